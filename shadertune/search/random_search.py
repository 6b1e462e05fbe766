"""Random search: valid configs drawn uniformly without replacement (seeded).

Small spaces are enumerated and shuffled.  Large ones (more than
ENUMERATE_LIMIT points before restrictions) are sampled from the product of
the domains with rejection of invalid and repeated points, so that the first
evaluation does not wait for the whole space to be enumerated (a rejected point
costs a few cached rule verdicts: Space.draw).  Where the rules reject nearly
every point of the product, rejection costs more than enumeration, and the rest
is drawn from the enumerated space, shuffled (still uniform over the configs not
drawn yet):
- once REJECTION_LIMIT draws estimate the valid configs (the product times the
  share accepted) at most SMALL_SPACE (GL at tiny sizes: 2,339 valid configs in a
  product of 3 million);
- once IDLE_LIMIT draws in a row gave nothing new: invalid, drawn before, or
  passed over because the caller has it already (`skip`: configs a search has
  evaluated).  This bounds the work of every draw, and ends the draws of a space
  whose every valid config has been drawn or evaluated (a narrowed space of 16
  valid configs in a product of millions, all evaluated by phased's plan), where
  drawing the product until every point was seen would never end.
Draws are asked for in batches of options.batch (an evaluator may run a batch at
once).
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from ..core.config import Config
from ..core.result import Result
from ..core.space import Space
from .budget import Budget, BudgetExhausted, Tracker
from .local import fresh_batches
from .options import SearchOptions

ENUMERATE_LIMIT = 100_000
REJECTION_LIMIT = 500
SMALL_SPACE = 20_000
IDLE_LIMIT = 2_000


def search(space: Space, evaluate, budget: Budget | None = None,
           options: SearchOptions | None = None) -> list[Result]:
    options = options or SearchOptions()
    run = Tracker(evaluate, budget, canonical=space.canonical)
    run.phase("random")
    try:
        source = draws(space, random.Random(options.seed), skip=run.evaluated)
        for batch in fresh_batches(source, options.batch, run):
            run.many(batch)
    except BudgetExhausted:
        pass
    return run.results


def draws(space: Space, rng: random.Random, skip: Callable[[Config], bool] | None = None
          ) -> Iterator[Config]:
    """Valid configs of `space` in a seeded uniform random order, each once, passing
    over those skip(config) says to (asked as each comes up: a search's evaluated
    configs); ends when every valid config has been drawn or passed over."""
    if space.full_size <= ENUMERATE_LIMIT:
        cfgs = space.configs()
        rng.shuffle(cfgs)
        yield from _unskipped(cfgs, skip)
        return
    drawn: set[Config] = set()        # valid configs drawn (yielded or passed over)
    tries = idle = 0
    while True:
        if idle >= IDLE_LIMIT or (tries == REJECTION_LIMIT
                                  and space.full_size * (len(drawn) + 1) / tries <= SMALL_SPACE):
            rest = [c for c in space.configs() if c not in drawn]
            rng.shuffle(rest)
            yield from _unskipped(rest, skip)
            return
        tries += 1
        cfg = space.draw(rng)
        if cfg is None or cfg in drawn:
            idle += 1
            continue
        drawn.add(cfg)
        if skip is not None and skip(cfg):
            idle += 1
            continue
        idle = 0
        yield cfg


def _unskipped(cfgs, skip):
    return cfgs if skip is None else (c for c in cfgs if not skip(c))
