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

import copy
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


def draws(space: Space, rng: random.Random, skip: Callable[[Config], bool] | None = None) -> "Draws":
    """Valid configs of `space` in a seeded uniform random order, each once, passing
    over those skip(config) says to (asked as each comes up: a search's evaluated
    configs); ends when every valid config has been drawn or passed over."""
    return Draws(space, rng, skip)


class Draws(Iterator[Config]):
    """The iterator `draws` gives (the module docstring's rules).  fork() gives an
    independent copy that yields what this one would yield next, given the same skip
    answers, and leaves this one where it is: a search looks at its next restart batch
    through a fork (local.FreshBatches.peek), since reading the draws early would ask
    skip early and could change what they yield later (skipped draws count as idle)."""

    def __init__(self, space: Space, rng: random.Random, skip: Callable[[Config], bool] | None = None):
        self._space, self._rng, self._skip = space, rng, skip
        self._drawn: set[Config] = set()    # valid configs drawn (yielded or passed over)
        self._tries = self._idle = 0
        self._rest: list[Config] | None = None  # once enumerated: the configs left, shuffled
        self._at = 0                        # the next of _rest

    def __next__(self) -> Config:
        while self._rest is None:
            if self._enumerate_now():
                self._rest = [c for c in self._space.configs() if c not in self._drawn]
                self._rng.shuffle(self._rest)
            else:
                cfg = self._draw()
                if cfg is not None:
                    return cfg
        while self._at < len(self._rest):
            cfg = self._rest[self._at]
            self._at += 1
            if self._skip is None or not self._skip(cfg):
                return cfg
        raise StopIteration

    def _enumerate_now(self) -> bool:
        """A small space at once; a large one where rejection stopped paying (the module
        docstring)."""
        full = self._space.full_size
        return (full <= ENUMERATE_LIMIT or self._idle >= IDLE_LIMIT
                or (self._tries == REJECTION_LIMIT and full * (len(self._drawn) + 1) / self._tries <= SMALL_SPACE))

    def _draw(self) -> Config | None:
        """One draw of the product: a valid config drawn for the first time and not
        skipped, else None (an idle draw)."""
        self._tries += 1
        cfg = self._space.draw(self._rng)
        if cfg is None or cfg in self._drawn:
            self._idle += 1
            return None
        self._drawn.add(cfg)
        if self._skip is not None and self._skip(cfg):
            self._idle += 1
            return None
        self._idle = 0
        return cfg

    def fork(self) -> "Draws":
        twin = copy.copy(self)
        twin._rng = copy.copy(self._rng)        # the same state, drawn on apart
        twin._drawn = set(self._drawn)
        return twin                             # (_rest is never changed once made: shared)
