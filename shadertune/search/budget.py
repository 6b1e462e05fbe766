"""Budget (evaluations and/or seconds) and the Tracker every strategy evaluates through.

The Tracker is the evaluate wrapper the strategies share: it never evaluates
one config twice in a search (a repeat returns the first Result), and it
raises BudgetExhausted *before* an evaluation that the budget no longer
allows, so a strategy just catches that and returns what it has.

Every distinct config counts against `max_evals`, whether the evaluator
measured it or replayed it from the store: a resumed search then follows the
same path and stops at the same point as one that was never interrupted.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from ..config import Config
from ..result import Result


@dataclass(frozen=True)
class Budget:
    max_evals: int | None = None    # distinct configs evaluated; None: no limit
    seconds: float | None = None    # wall time from the strategy's start; None: no limit

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
    def __init__(self, evaluate: Callable[[Config], Result], budget: Budget | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._evaluate = evaluate
        self.budget = budget or Budget()
        self._clock = clock
        self._t0 = clock()
        self.seen: dict[Config, Result] = {}
        self.results: list[Result] = []

    def spent(self) -> bool:
        b = self.budget
        if b.max_evals is not None and len(self.results) >= b.max_evals:
            return True
        return b.seconds is not None and self._clock() - self._t0 >= b.seconds

    def __call__(self, cfg: Config) -> Result:
        cfg = cfg if isinstance(cfg, Config) else Config(cfg)
        if cfg in self.seen:
            return self.seen[cfg]
        if self.spent():
            raise BudgetExhausted
        r = self._evaluate(cfg)
        self.seen[cfg] = r
        self.results.append(r)
        return r

    def prefetch(self, cfgs) -> None:
        """Tell the evaluator which configs come next (a backend may compile them in
        parallel); configs this search has evaluated are left out."""
        fn = getattr(self._evaluate, "prefetch", None)
        if fn is None or self.spent():
            return
        todo = [c for c in dict.fromkeys(cfgs) if c not in self.seen]
        if todo:
            fn(todo)

    def get(self, cfg: Config) -> Result | None:
        """The Result for `cfg` if this search has evaluated it (no evaluation)."""
        return self.seen.get(cfg)

    def best(self) -> Result | None:
        ok = [r for r in self.results if r.ok]
        return min(ok, key=score) if ok else None
