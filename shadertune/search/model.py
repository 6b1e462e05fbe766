"""Model-guided search: rank the space by a cost model, time the best guesses, climb.

1. Rank: the cost model (a backend's predict_ms, handed in as
   options.cost_model) predicts every config of the pruned space; a space larger
   than options.rank_limit is ranked on a seeded uniform sample of that size.
   Configs the model cannot tell apart (the same prediction to 3 significant
   digits) are one candidate: the first of them in enumeration order; the local
   search then tries the knobs the model does not see.
2. Time options.top candidates as one batch (the evaluator announces it, so a
   backend compiles them in parallel): first options.seeds (a backend's
   known-good list, its untuned default first; tune() asks Backend.candidates),
   or without seeds the space's start point; then the best-ranked.  So the
   search never ends worse than the untuned default, nor than the backend's
   own list.
3. Local search from the best, then restarts from the next-ranked candidates
   in batches of options.batch, until the budget or the convergence rule of
   local.py ends it.

On several workers the first batch offers ahead the first climb's first step,
from the batch's predicted best (local.step_ahead); the climb and the restarts
offer theirs (local.py).

Without a cost model the candidates are seeded random draws instead of the
ranking.
"""
from __future__ import annotations

import itertools
import random

from ..core.config import Config
from ..core.result import Result
from ..core.space import Space
from .budget import Budget, BudgetExhausted, Tracker
from .local import Listed, fresh_batches, improve, step_ahead
from .options import SearchOptions
from .random_search import draws
from .ranking import rank_configs


def search(space: Space, evaluate, budget: Budget | None = None,
           options: SearchOptions | None = None) -> list[Result]:
    options = options or SearchOptions()
    run = Tracker(evaluate, budget, canonical=space.canonical)
    try:
        start = space.phases.start_point if space.phases is not None else None
        lead = list(dict.fromkeys(space.canonical(c) for c in options.seeds if c in space))[:options.top]
        lead = lead or ([start] if start is not None else [])
        starts = Starts(space, options, run)
        source = iter(starts)
        first = lead + list(itertools.islice((c for c in source if c not in lead),
                                             options.top - len(lead)))
        what = "model" if starts.by_model(lead) else "random starts (no cost model)"
        run.phase(f"{what}: top {len(first)}")
        # ahead: the first climb's first step, from the batch's predicted best
        run.many(first, ahead=step_ahead(space, run, first, options))
        improve(space, run, options, fresh_batches(source, options.batch, run))
    except BudgetExhausted:
        pass
    return run.results


class Starts:
    """The configs a search takes after its lead (the first batch's rest, then the
    restarts): the model's ranking (ranked_configs), or without a model seeded random
    draws.  Ranking predicts every config of the space (a CUDA space: ~80,000, seconds
    of CPU).  Where a child process ranks (options.rank_elsewhere) and the budget leaves
    room for a restart (more evaluations than the first batch and a climb's step, or no
    count limit), the ranking starts with the search and the child ranks while the first
    batch and the first climb are timed; otherwise the space is ranked when the first of
    its configs is asked for, not before (a search whose lead fills its first batch, a
    first use's few evaluations, may end before its first restart).  When it is ranked
    changes nothing in what it yields."""

    _UNRANKED = object()

    def __init__(self, space: Space, options: SearchOptions, run: Tracker):
        self.space, self.options, self.run = space, options, run
        self.ranked = self._UNRANKED
        self._source = None         # the configs' iterator, made when first asked for
        start = getattr(options.rank_elsewhere, "start", None)
        most = run.budget.max_evals
        restarts_likely = most is None or most > options.top + options.step_evals
        self._pending = start(space) if start is not None and restarts_likely else None

    def __iter__(self):
        return self

    def __next__(self) -> Config:
        return next(self._configs())

    def fork(self):
        """An independent copy of what is left (local.FreshBatches.peek)."""
        return self._configs().fork()

    def _configs(self):
        """The configs, ranked (or drawn) when first asked for."""
        if self._source is None:
            if self.ranked is self._UNRANKED:
                self.ranked = self._rank()
            self._source = Listed(self.ranked) if self.ranked is not None else \
                draws(self.space, random.Random(self.options.seed), skip=self.run.evaluated)
        return self._source

    def _rank(self) -> list[Config] | None:
        if self._pending is not None:
            ranked = self._pending()
        else:
            elsewhere = self.options.rank_elsewhere
            ranked = elsewhere(self.space) if elsewhere is not None else None
        return ranked if ranked is not None else ranked_configs(self.space, self.options)

    def by_model(self, lead: list[Config]) -> bool:
        """Whether the configs come from a model's ranking.  Before the space is ranked
        the model is asked about `lead` alone: a cost model that predicts nothing has
        no model (SearchOptions.predict gives None)."""
        if self.ranked is not self._UNRANKED:
            return self.ranked is not None
        return self.options.cost_model is not None and bool(lead) and self.options.predict(lead) is not None


def ranked_configs(space: Space, options: SearchOptions) -> list[Config] | None:
    """The space's configs by predicted time, one per distinct prediction (see
    the module docstring); None without a cost model."""
    if options.cost_model is None:
        return None
    return rank_configs(space.configs(), options)
