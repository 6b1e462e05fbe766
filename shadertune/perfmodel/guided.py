"""The learned model as a search's cost model (what tune() passes its strategy).

    predict = learned_cost_model(backend, store, problem)   # (problem, configs) -> ms, or None

The model is the one saved for the backend's device and templates beside the
store (saved.trained_model: never trained for a search, which would wait for
it), if it was trained on problems of this one's dtype and did not validate
worse than the backend's analytical model (the guard saved with it,
PerfModel.prefers_analytical); None otherwise, and
tune() then uses the backend's own predict_ms (docs/perfmodel.md says which is
used when).
"""
from __future__ import annotations

from collections.abc import Callable

from .saved import trained_model


def learned_cost_model(backend, store, problem) -> Callable | None:
    m = trained_model(backend, store) if store is not None else None
    if m is None or not m.trained_on(problem.dtype) or m.prefers_analytical():
        return None
    return m.predict_ms


# configs a search ranks by the learned model at most (a uniform sample of a larger
# space): it predicts about 25,000 configs a second (the features are computed in
# Python), so ranking stays near a second; the backends' analytical models rank
# SearchOptions.rank_limit
RANK_LIMIT = 20_000
