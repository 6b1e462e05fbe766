"""Exhaustive search: every valid config of the (pruned) space, in enumeration order,
asked for in batches of options.batch (an evaluator may run a batch at once)."""
from __future__ import annotations

from ..core.result import Result
from ..core.space import Space
from .budget import Budget, BudgetExhausted, Tracker
from .options import SearchOptions


def search(space: Space, evaluate, budget: Budget | None = None,
           options: SearchOptions | None = None) -> list[Result]:
    options = options or SearchOptions()
    run = Tracker(evaluate, budget, canonical=space.canonical)
    run.phase("exhaustive")
    configs = space.configs()
    try:
        for i in range(0, len(configs), options.batch):
            run.many(configs[i:i + options.batch])
    except BudgetExhausted:
        pass
    return run.results
