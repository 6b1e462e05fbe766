"""Tuning on first use, the model's part: what matmul(A, B, config="auto",
tune="first-use") asks for (FirstUse, parse) and the order in which it times
configs over the whole space (ranked_space).

The tuning itself (the store, auto's own pick first, the time bound, the
measurements) sits above `auto`'s selection, in the front door's layer:
shadertune/front/first_use.py.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from ..core.problem import Problem
from .candidates import analytical_candidates, candidates
from .saved import model_for

NAME = "first-use"


@dataclass(frozen=True)
class FirstUse:
    k: int = 8               # configs timed at most
    seconds: float = 20.0    # no evaluation starts after this

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"FirstUse.k must be a positive int, got {self.k!r}")
        if not self.seconds > 0:
            raise ValueError(f"FirstUse.seconds must be positive, got {self.seconds!r}")


def parse(tune) -> FirstUse | None:
    """None / False: off; 'first-use' or True: FirstUse(); a FirstUse as given."""
    if tune is None or tune is False:
        return None
    if tune is True or (isinstance(tune, str) and tune == NAME):
        return FirstUse()
    if isinstance(tune, FirstUse):
        return tune
    raise ValueError(f"matmul: tune must be None, {NAME!r} or a shadertune.perfmodel.FirstUse, "
                     f"got {tune!r}")


def ranked_space(backend, problem: Problem, store, seeds=()) -> list:
    """Valid configs of `problem`, best predicted first: the whole space when small,
    else a sample (perfmodel.candidates) seeded with `seeds`, the configs the
    model has seen verified on this dtype and the backend's analytical candidate
    list; ranked by the learned model (trained on this dtype; not where it
    validated worse than the backend's cost model: PerfModel.prefers_analytical),
    else the backend's cost model, else in a seeded random order.  First use writes
    the store, so it may train the model here when the store changed enough since the
    saved one (model_for)."""
    model, _ = model_for(backend, store)
    if model is not None and not model.trained_on(problem.dtype):
        model = None
    space = backend.space(problem)
    seeds = (list(seeds) + (model.verified_configs(problem.dtype) if model is not None else [])
             + analytical_candidates(backend, problem, space))
    cands = candidates(space, seeds)
    if model is not None and not model.prefers_analytical():
        return [c for _, c in model.rank(problem, cands)]
    if (ms := backend.predict_ms(problem, cands)) is not None:
        return [cands[i] for i in sorted(range(len(cands)), key=lambda i: ms[i])]
    order = list(cands)      # nothing predicts
    random.Random(0).shuffle(order)
    return order
