"""Time a given list of configs through the search core: the Evaluator (built,
run, verified against float64, timed, stored) behind a Tracker (budget), the
list as one batch (a backend compiles it in parallel)."""
from __future__ import annotations

import time

from ..core.problem import Problem
from ..core.result import Result
from ..search import Budget, BudgetExhausted, Evaluator, Tracker


def measure(backend, problem: Problem, configs, store, *, budget: Budget, repeats: int = 10,
            warmup: int = 2, seed: int = 0, tolerance: float | None = None, since: float | None = None,
            on_result=None) -> list[Result]:
    """Results of `configs`, in order, until the budget ends.  The budget's seconds
    count from `since` (a time.monotonic() value; default: this call's start), so
    the float64 reference made at the first evaluation is inside them."""
    since = time.monotonic() if since is None else since
    ev = Evaluator(backend, problem, store=store, repeats=repeats, warmup=warmup, seed=seed,
                   tolerance=tolerance, on_result=on_result)
    if budget.seconds is not None:
        budget = Budget(budget.max_evals, max(0.0, budget.seconds - (time.monotonic() - since)))
    run = Tracker(ev, budget)
    with backend.search_session():
        try:
            run.many(configs)
        except BudgetExhausted:
            pass
    return run.results
