"""Strategies by name.  Each is a function with one signature,

    search(space, evaluate, budget=None, options=None) -> list[Result]

(options: a SearchOptions; every strategy reads the options it uses).
"""
from __future__ import annotations

from . import exhaustive, model, phased, random_search

STRATEGIES = {
    "phased": phased.search,
    "model": model.search,
    "exhaustive": exhaustive.search,
    "random": random_search.search,
}

# one line each, for --strategy's help
DESCRIPTIONS = {
    "phased": "Jiang's phase plan with np refinement, then local search",
    "model": "the cost model's best guesses, then local search (random starts without a model)",
    "exhaustive": "every valid config",
    "random": "uniform draws without replacement",
}


def get_strategy(name: str):
    """The strategy `name`."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; expected one of {sorted(STRATEGIES)}") from None
