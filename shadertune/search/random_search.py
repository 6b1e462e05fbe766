"""Random search: valid configs drawn uniformly without replacement (seeded).

Small spaces are enumerated and shuffled.  Large ones (more than
ENUMERATE_LIMIT points before restrictions) are sampled from the product of
the domains with rejection of invalid and repeated points, so that the first
evaluation does not wait for the whole space to be enumerated.  Where the rules
reject nearly every point of the product (GL at tiny sizes: 2,339 valid configs in
a product of 3 million), rejection costs more than enumeration: once
REJECTION_LIMIT draws estimate the valid configs (the product times the share
accepted) at most SMALL_SPACE, the rest is drawn from the enumerated space,
shuffled (still uniform over the configs not drawn yet).  Draws are asked for in
batches of options.batch (an evaluator may run a batch at once).
"""
from __future__ import annotations

import random

from ..core.config import Config
from ..core.result import Result
from ..core.space import Space
from .budget import Budget, BudgetExhausted, Tracker
from .local import fresh_batches
from .options import SearchOptions

ENUMERATE_LIMIT = 100_000
REJECTION_LIMIT = 500
SMALL_SPACE = 20_000


def search(space: Space, evaluate, budget: Budget | None = None,
           options: SearchOptions | None = None) -> list[Result]:
    options = options or SearchOptions()
    run = Tracker(evaluate, budget, canonical=space.canonical)
    run.phase("random")
    try:
        for batch in fresh_batches(draws(space, random.Random(options.seed)), options.batch, run):
            run.many(batch)
    except BudgetExhausted:
        pass
    return run.results


def draws(space: Space, rng: random.Random):
    """Valid configs of `space` in a seeded uniform random order, each once."""
    if space.full_size <= ENUMERATE_LIMIT:
        cfgs = space.configs()
        rng.shuffle(cfgs)
        yield from cfgs
        return
    seen: set[Config] = set()
    drawn: set[Config] = set()
    rejected = 0
    while len(seen) < space.full_size:
        tries = rejected + len(drawn)
        if tries == REJECTION_LIMIT and space.full_size * (len(drawn) + 1) / tries <= SMALL_SPACE:
            rest = [c for c in space.configs() if c not in drawn]
            rng.shuffle(rest)
            yield from rest
            return
        cfg = space.random_config(rng)
        if cfg in seen:
            rejected += 1
            continue
        seen.add(cfg)
        if cfg in space:
            drawn.add(cfg)
            yield cfg
        else:
            rejected += 1
