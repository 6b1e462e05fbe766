"""Exhaustive search: every valid config of the (pruned) space, in enumeration order,
asked for in batches of options.batch (an evaluator may run a batch at once; on k
workers a batch's idle last round times the next configs ahead)."""
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
            # the next batches: timed ahead where a batch leaves workers idle
            run.many(configs[i:i + options.batch],
                     ahead=(configs[j] for j in range(i + options.batch, len(configs))))
    except BudgetExhausted:
        pass
    return run.results
