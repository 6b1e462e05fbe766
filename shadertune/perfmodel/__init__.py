"""A learned performance model over the tuning store.

    from shadertune.perfmodel import model_for, saved_model
    model, note = model_for(backend, store)      # trained when stale, saved next to the store
    model, note = saved_model(backend, store)    # as saved: what `auto` reads (never trains)
    model.predict_ms(problem, configs)           # the Backend cost-model hook's signature

Training happens where tuning writes: at the end of a TuningRun (tuning_run: the
search command line, shadertune.tune(), the demo and `perfmodel sample` tune, then
train), in `python -m shadertune.perfmodel train` and in first-use tuning; `auto` and
a search's cost model read the saved model.

Modules: features (what a row is; a backend's derived features come from its
package: Backend.model_features), data (verified results of a store), learners
(scikit-learn, the `model` extra), model (PerfModel), validate (leave-problems-out
scores), saved (files next to the store: the writers' model_for and
train_if_stale, the readers' saved_model), candidates (what is ranked for a
problem), first_use_plan (tune="first-use": its spec and its ranking of the space;
the tuning is shadertune/front/first_use.py), measure (time a list of configs through
the search core), guided (the learned model as a search's cost model), tuning_run
(tune, then train), sample (data generation); its command line is
shadertune/cli/perfmodel.py.
"""
from .features import Featurizer, register_derived
from .first_use_plan import FirstUse
from .guided import learned_cost_model, search_cost_model
from .learners import ModelUnavailable
from .model import PerfModel
from .saved import model_for, saved_model, train_if_stale
from .tuning_run import TuningRun

__all__ = ["Featurizer", "FirstUse", "ModelUnavailable", "PerfModel", "TuningRun", "learned_cost_model",
           "model_for", "register_derived", "saved_model", "search_cost_model", "train_if_stale"]
