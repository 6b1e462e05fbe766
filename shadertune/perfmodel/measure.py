"""Time a given list of configs through the search core: the Evaluator (built,
run, verified against float64, timed, stored) behind a Tracker (budget), with
the list announced first so that a backend compiles it in parallel."""
from __future__ import annotations

import time

from ..problem import Problem
from ..result import Result
from ..search import Budget, BudgetExhausted, Evaluator, Tracker


def measure(backend, problem: Problem, configs, store, *, budget: Budget, repeats: int = 10,
            warmup: int = 2, seed: int = 0, on_result=None) -> list[Result]:
    """Results of `configs`, in order, until the budget ends. The budget's seconds
    count from this call's start: the float64 reference is inside them."""
    t0 = time.monotonic()
    ev = Evaluator(backend, problem, store=store, repeats=repeats, warmup=warmup, seed=seed,
                   on_result=on_result)
    if budget.seconds is not None:
        budget = Budget(budget.max_evals, max(0.0, budget.seconds - (time.monotonic() - t0)))
    run = Tracker(ev, budget)
    with backend.search_session():
        run.prefetch(configs)
        try:
            for cfg in configs:
                run(cfg)
        except BudgetExhausted:
            pass
    return run.results
