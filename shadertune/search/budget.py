"""Budget (evaluations and/or seconds) and the Tracker every strategy evaluates through.

The Tracker is the evaluate wrapper the strategies share: it never evaluates
one config twice in a search (a repeat returns the first Result), and it
raises BudgetExhausted *before* an evaluation that the budget no longer
allows, so a strategy just catches that and returns what it has.

A strategy may ask for a batch (`many`): the configs not evaluated yet go to
the evaluator at once (which may compile them in parallel, or farm them out),
cut to the evaluations `max_evals` still allows; the time limit is checked
before each evaluation of the batch.  The budget is therefore exact whether a
strategy asks one config at a time or a batch.

Every distinct config counts against `max_evals`, whether the evaluator
measured it or replayed it from the store: a resumed search then follows the
same path and stops at the same point as one that was never interrupted.

The time limit lets the search's first evaluation through, however short it is
(`max_evals` does not: it is a count the caller gave): a search with a time limit
always measures its first config (its start point, the backend's default for
the model strategy), so that a short tune of any shape ends with a measurement,
never with nothing measured.

Configs enter the Tracker in the space's canonical form (`canonical`, the
strategy passes Space.canonical): one kernel is one config, evaluated and
stored once, and its Result's config holds every knob local search reads.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable

from ..core.config import Config
from ..core.result import Result
from .contract import as_evaluator


@dataclass(frozen=True)
class Budget:
    max_evals: int | None = None    # distinct configs evaluated; None: no limit
    seconds: float | None = None    # wall time from the strategy's start; None: no limit
    # Spend the whole time limit: a strategy's convergence rule does not end the search
    # while `seconds` remain (it restarts instead); the caller asked for that much search.
    spend_all: bool = False

    def __post_init__(self):
        if self.max_evals is not None and self.max_evals < 0:
            raise ValueError(f"Budget.max_evals must be >= 0, got {self.max_evals}")
        if self.seconds is not None and not self.seconds >= 0:
            raise ValueError(f"Budget.seconds must be >= 0, got {self.seconds}")


class BudgetExhausted(Exception):
    """Raised by Tracker instead of starting an evaluation the budget does not allow."""


def score(r: Result | None) -> float:
    """Lower is better; anything not ok (failed, wrong, unmeasured) is +inf."""
    return r.median_ms if r is not None and r.ok else math.inf


class Tracker:
    def __init__(self, evaluate, budget: Budget | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 canonical: Callable[[Config], Config] | None = None):
        self._evaluate = as_evaluator(evaluate)
        self.budget = budget or Budget()
        self._clock = clock
        self._t0 = clock()
        self._canonical = canonical
        self._started = False       # an evaluation was let through (the time limit's first)
        self.seen: dict[Config, Result] = {}
        self.results: list[Result] = []

    def _config(self, cfg) -> Config:
        cfg = cfg if isinstance(cfg, Config) else Config(cfg)
        return cfg if self._canonical is None else self._canonical(cfg)

    def _out_of_time(self) -> bool:
        """The time limit is spent (never before the first evaluation: module docstring)."""
        b = self.budget
        return self._started and b.seconds is not None and self._clock() - self._t0 >= b.seconds

    def _stop(self) -> bool:
        """Asked by the evaluator before each evaluation of a batch starts."""
        if not self._started:
            self._started = True
            return False
        return self._out_of_time()

    def _evals_left(self) -> float:
        b = self.budget
        return math.inf if b.max_evals is None else b.max_evals - len(self.results)

    def spent(self) -> bool:
        return self._evals_left() <= 0 or self._out_of_time()

    def _record(self, cfg: Config, r: Result) -> None:
        self.seen[cfg] = r
        self.results.append(r)

    def __call__(self, cfg: Config) -> Result:
        cfg = self._config(cfg)
        if cfg in self.seen:
            return self.seen[cfg]
        if self.spent():
            raise BudgetExhausted
        self._started = True
        r = self._evaluate(cfg)
        self._record(cfg, r)
        return r

    def many(self, cfgs: Iterable) -> list[Result]:
        """Results of `cfgs` in order (a config seen before gives its first Result).

        The new ones are one batch for the evaluator, cut to the evaluations the
        budget has left; the time limit is checked before each.  When the budget
        cut the batch, what was evaluated is recorded and BudgetExhausted raised."""
        cfgs = [self._config(c) for c in cfgs]
        todo = [c for c in dict.fromkeys(cfgs) if c not in self.seen]
        if todo:
            left = self._evals_left()
            allowed = todo[:max(0, left)] if left < len(todo) else todo
            if not allowed or self._out_of_time():
                raise BudgetExhausted
            results = self._evaluate.many(allowed, stop=self._stop)
            if len(results) > len(allowed):
                raise RuntimeError(f"the evaluator returned {len(results)} results "
                                   f"for a batch of {len(allowed)}")
            for cfg, r in zip(allowed, results):
                self._record(cfg, r)
            if len(results) < len(todo):
                raise BudgetExhausted
        return [self.seen[c] for c in cfgs]

    def prefetch(self, cfgs) -> None:
        """Tell the evaluator which configs come next (a backend may compile them in
        parallel); configs this search has evaluated, and those past the budget's
        evaluations, are left out."""
        if self.spent():
            return
        todo = [c for c in dict.fromkeys(map(self._config, cfgs)) if c not in self.seen]
        left = self._evals_left()
        todo = todo[:max(0, left)] if left < len(todo) else todo
        if todo:
            self._evaluate.prefetch(todo)

    def phase(self, label: str) -> None:
        """The strategy's current phase, passed on to the evaluator (progress)."""
        self._evaluate.phase(label)

    def get(self, cfg: Config) -> Result | None:
        """The Result for `cfg` if this search has evaluated it (no evaluation)."""
        return self.seen.get(self._config(cfg))

    def best(self) -> Result | None:
        ok = [r for r in self.results if r.ok]
        return min(ok, key=score) if ok else None
