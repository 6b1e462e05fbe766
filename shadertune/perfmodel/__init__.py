"""A learned performance model over the tuning store (issue 17).

    from shadertune.perfmodel import model_for
    model, note = model_for(backend, store)      # trained, saved next to the store, kept fresh
    model.predict_ms(problem, configs)           # the Backend cost-model hook's signature

Modules: features (what a row is; a backend's derived features come from its
package: Backend.model_features), data (verified results of a store), learners (scikit-learn, the `model` extra),
model (PerfModel), validate (leave-problems-out scores), saved (files next to
the store, retraining), candidates (what is ranked for a problem), firstuse
(tune="first-use"), measure (time a list of configs through the search core),
guided (the learned model as tune()'s cost model), sample (data generation),
cli (python -m shadertune.perfmodel).
"""
from .features import Featurizer, register_derived
from .firstuse import FirstUse
from .guided import learned_cost_model
from .learners import ModelUnavailable
from .model import PerfModel
from .saved import model_for

__all__ = ["Featurizer", "FirstUse", "ModelUnavailable", "PerfModel", "learned_cost_model",
           "model_for", "register_derived"]
