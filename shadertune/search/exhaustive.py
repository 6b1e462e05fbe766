"""Exhaustive search: every valid config of the (pruned) space, in domain order."""
from __future__ import annotations

from ..result import Result
from ..space import Space
from .budget import Budget, BudgetExhausted, Tracker


def search(space: Space, evaluate, budget: Budget | None = None) -> list[Result]:
    run = Tracker(evaluate, budget)
    try:
        for cfg in space.configs():
            run(cfg)
    except BudgetExhausted:
        pass
    return run.results
