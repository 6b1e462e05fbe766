"""Tune, then train the model: the one way the search command line, shadertune.tune(),
the demo and `perfmodel sample` write results and have the learned model follow.

    with TuningRun(backend, store) as run:
        entry = run.search(problem, strategy=..., budget=..., on_result=...)   # a search
        results = run.measure(problem, configs, budget=...)                     # given configs
    # leaving the block without an error: the model saved beside the store is trained
    # again if the store changed enough since it was (saved.train_if_stale)

A search ranks by the learned model saved beside the store where there is one
(guided.tune).  Nothing is trained while the run goes on (a search would wait for it),
and a run that stops with an error or Ctrl-C trains nothing: what it measured is
stored, and the next run's end trains.  The model is trained only where this run
evaluated something (measured or replayed) and the store is writable (`auto` only
reads: tuning writes and trains).
"""
from __future__ import annotations

from ..core.problem import Problem
from ..core.result import Result
from .guided import tune as guided_tune
from .measure import measure as measure_configs
from .saved import train_if_stale


class TuningRun:
    """Searches and measurements of one backend into one store, then one training."""

    def __init__(self, backend, store, *, train: bool = True):
        self.backend = backend
        self.store = store
        self.train = train           # False: leave the model to a later run
        self.evaluated = 0           # configs evaluated (measured or replayed) by this run

    def search(self, problem: Problem, **search) -> dict:
        """search.tune() of `problem` ranking by the learned model saved beside the store
        (perfmodel.guided.tune; `search`: its keywords): the problem's report entry."""
        entry = guided_tune(self.backend, problem, store=self.store, **search)
        self.evaluated += entry["evaluated"]
        return entry

    def measure(self, problem: Problem, configs, **options) -> list[Result]:
        """`configs` of `problem` timed through the search core, in order, until the
        budget ends (perfmodel.measure.measure; `options`: its keywords)."""
        results = measure_configs(self.backend, problem, configs, self.store, **options)
        self.evaluated += len(results)
        return results

    def finish(self):
        """Train the model now if the store changed enough (and this run evaluated into a
        writable store): (model, note) as train_if_stale gives them, or None."""
        if self.train and self.evaluated and not self.store.readonly:
            return train_if_stale(self.backend, self.store)
        return None

    def __enter__(self) -> "TuningRun":
        return self

    def __exit__(self, kind, error, trace) -> bool:
        if kind is None:
            self.finish()
        return False


__all__ = ["TuningRun"]
