"""Tune one problem: space -> strategy over an Evaluator -> the report's problem entry."""
from __future__ import annotations

import time
from typing import Callable

from ..db.spaces import space_sizes
from ..problem import Problem
from ..result import Result
from .budget import Budget
from .evaluate import Evaluator
from .registry import get_strategy
from .report_json import problem_entry


def tune(backend, problem: Problem, *, strategy: str = "phased", budget: Budget | None = None,
         store=None, retune: bool = False, repeats: int = 10, warmup: int = 2, seed: int = 0,
         tolerance: float | None = None,
         on_result: Callable[[Result, bool], None] | None = None,
         on_phase: Callable[[str], None] | None = None) -> dict:
    """Search `problem` on `backend`; return its report entry (see report_json).

    Results go to `store` as they are measured; ContextError propagates.
    on_phase(label) is told where the search is whenever that changes."""
    space = backend.space(problem)
    on_result = _announcing_phases(space, strategy, on_phase, on_result)
    evaluate = Evaluator(backend, problem, store=store, retune=retune, tolerance=tolerance,
                         repeats=repeats, warmup=warmup, seed=seed, on_result=on_result)
    # a backend may hold more between kernels while a search runs (GL: its texture pool)
    t0 = time.monotonic()
    with backend.search_session():
        results = get_strategy(strategy, seed=seed)(space, evaluate, budget or Budget())
    seconds = time.monotonic() - t0
    # The pruned size enumerates the space (the store keeps it): after the search, so
    # results start at once.
    size, full = space_sizes(store, backend, problem, space)
    return problem_entry(problem, results, space_size=size, full_space_size=full,
                         measured=evaluate.measured, cached=evaluate.cached, seconds=seconds,
                         stage_seconds=evaluate.stage_seconds)


def _announcing_phases(space, strategy, on_phase, on_result):
    """on_result, telling on_phase first when the phase changes.  Until the strategies
    name their phases themselves, a phase of the phased search is one combination of
    its plan's outer knobs (read off each evaluated config); other strategies have one."""
    if on_phase is None:
        return on_result
    outer = list((space.phases or {}).get("outer", [])) if strategy == "phased" else []
    last = [None]

    def announce(r: Result, cached: bool) -> None:
        label = " ".join(f"{k}={r.config.get(k)}" for k in outer) or strategy
        if label != last[0]:
            last[0] = label
            on_phase(label)
        if on_result is not None:
            on_result(r, cached)
    return announce
