"""Strategies by name.  Each is a plain function search(space, evaluate, budget) -> list[Result]."""
from __future__ import annotations

import functools

from . import exhaustive, phased, random_search

STRATEGIES = {
    "phased": phased.search,
    "exhaustive": exhaustive.search,
    "random": random_search.search,
}


def get_strategy(name: str, *, seed: int = 0):
    """The strategy `name`, with `seed` bound where it takes one."""
    try:
        fn = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; expected one of {sorted(STRATEGIES)}") from None
    if fn is random_search.search:
        return functools.partial(fn, seed=seed)
    return fn
