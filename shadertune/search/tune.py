"""Tune one problem: space -> strategy over an Evaluator -> the report's problem entry."""
from __future__ import annotations

import time
from typing import Callable

from ..problem import Problem
from ..result import Result
from .budget import Budget
from .evaluate import Evaluator
from .registry import get_strategy
from .report_json import problem_entry


def tune(backend, problem: Problem, *, strategy: str = "phased", budget: Budget | None = None,
         store=None, retune: bool = False, repeats: int = 10, warmup: int = 2, seed: int = 0,
         tolerance: float | None = None,
         on_result: Callable[[Result, bool], None] | None = None, evaluator=None) -> dict:
    """Search `problem` on `backend`; return its report entry (see report_json).

    Results go to `store` as they are measured; ContextError propagates.  `evaluator`
    replaces the local Evaluator (made from the arguments above otherwise): a
    cluster's, which evaluates on its workers (shadertune.cluster)."""
    space = backend.space(problem)
    evaluate = evaluator if evaluator is not None else Evaluator(
        backend, problem, store=store, retune=retune, tolerance=tolerance, repeats=repeats,
        warmup=warmup, seed=seed, on_result=on_result)
    # a backend may hold more between kernels while a search runs (GL: its texture pool)
    t0 = time.monotonic()
    with backend.search_session():
        results = get_strategy(strategy, seed=seed)(space, evaluate, budget or Budget())
    seconds = time.monotonic() - t0
    # The pruned size enumerates the space: after the search, so results start at once.
    return problem_entry(problem, results, space_size=len(space), full_space_size=space.full_size,
                         measured=evaluate.measured, cached=evaluate.cached, seconds=seconds,
                         stage_seconds=evaluate.stage_seconds)
