"""The learned model as a search's cost model.

    predict = learned_cost_model(backend, store, problem)   # (problem, configs) -> ms, or None
    entry = tune(backend, problem, store=store, ...)        # search.tune ranking by it

The model is the one saved for the backend's device and templates beside the
store (saved.trained_model: never trained for a search, which would wait for
it), if it was trained on problems of this one's dtype and did not validate
worse than the backend's analytical model (the guard saved with it,
PerfModel.prefers_analytical); None otherwise, and the search then uses the
backend's own predict_ms (docs/perfmodel.md says which is used when).  The
search layer sits below the model's: it takes the model as a value
(search.ProblemCostModel), and this module hands it over.
"""
from __future__ import annotations

from collections.abc import Callable

from ..search import ProblemCostModel
from ..search import tune as search_tune
from .saved import trained_model

# configs a search ranks by the learned model at most (a uniform sample of a larger
# space): it predicts about 25,000 configs a second (the features are computed in
# Python), so ranking stays near a second; the backends' analytical models rank
# SearchOptions.rank_limit
RANK_LIMIT = 20_000


def learned_cost_model(backend, store, problem) -> Callable | None:
    m = trained_model(backend, store) if store is not None else None
    if m is None or not m.trained_on(problem.dtype) or m.prefers_analytical():
        return None
    return m.predict_ms


def search_cost_model(backend, store, problem) -> ProblemCostModel | None:
    """learned_cost_model as the search takes it (named 'learned', ranking RANK_LIMIT
    configs at most), or None: the search ranks by the backend's own."""
    predict = learned_cost_model(backend, store, problem)
    return ProblemCostModel("learned", predict, RANK_LIMIT) if predict is not None else None


def tune(backend, problem, *, store=None, **kw) -> dict:
    """search.tune() ranking by the learned model saved beside `store` where there is
    one (search_cost_model), else by the backend's own cost model; the entry's
    'cost_model' says which.  It trains nothing: a search's end does
    (saved.train_if_stale), once its results are stored."""
    return search_tune(backend, problem, store=store,
                       cost_model=search_cost_model(backend, store, problem), **kw)
