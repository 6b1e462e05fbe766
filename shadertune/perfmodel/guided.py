"""A backend whose cost model is the learned one: tune() through it ranks by the
model trained on the store (its model-guided strategy reads Backend.predict_ms).

    entry = tune(learned_cost_model(backend, store), problem, store=store, ...)

Everything else is the wrapped backend's own (results are stored under its
name, device and templates). Without a model for the backend and device (too
little data, no scikit-learn), predict_ms is the backend's own (None for GL).
"""
from __future__ import annotations

from .saved import model_for


class LearnedCostModel:
    def __init__(self, backend, store):
        self._backend = backend
        self._store = store
        self.name = backend.name

    @property
    def model(self):
        """The model predict_ms uses (trained or retrained as saved.model_for says), or None."""
        return model_for(self._backend, self._store)[0]

    def predict_ms(self, problem, configs):
        m = self.model
        if m is None:
            return self._backend.predict_ms(problem, configs)
        return m.predict_ms(problem, configs)

    def __getattr__(self, attr):
        return getattr(self._backend, attr)


def learned_cost_model(backend, store) -> LearnedCostModel:
    return LearnedCostModel(backend, store)
