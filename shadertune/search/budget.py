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

On an evaluator that runs k evaluations at once (a cluster's workers: its
`parallelism`), a batch of b configs takes ceil(b / k) rounds and leaves
workers idle in its last one.  A strategy names the configs it may ask for next
(`many(cfgs, ahead=...)`) and the Tracker times up to that many of them in the
same batch; where the evaluator carries such configs past their batch (a
cluster's: its `carries`), one more a worker, which run on while the search
decides its next step, are counted by the budget while they run, and are waited
for if the search asks for one before it came in.  Such a config stays out of the search's view (get, best, evaluated)
until the search asks for it: it is then one of the search's own evaluations
(`path`), at no further cost.  So the search decides as a search on one worker
does (given the same measurements) and asks for the same configs in the same
order, in fewer rounds.  Every Result measured counts against `max_evals`, those
timed ahead too, and `results` holds them all in the order measured: under a
count budget the search's own evaluations are then a prefix of one worker's
(a config timed ahead and never asked for took one of the count), under a time
limit they go further.  With one worker nothing is timed ahead: `path` is
`results`.

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
    # Spend the whole budget: a strategy's convergence rule does not end the search while
    # `seconds` or `max_evals` remain (it restarts instead); the caller asked for that much
    # search (a time limit on the CLI; a benchmark that compares runs of equal evaluations).
    spend_all: bool = False

    def __post_init__(self):
        if self.max_evals is not None and self.max_evals < 0:
            raise ValueError(f"Budget.max_evals must be >= 0, got {self.max_evals}")
        if self.seconds is not None and not self.seconds >= 0:
            raise ValueError(f"Budget.seconds must be >= 0, got {self.seconds}")

    @property
    def to_spend(self) -> bool:
        """Whether the convergence rule is off: spend_all with a limit to spend."""
        return self.spend_all and (self.seconds is not None or self.max_evals is not None)


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
        # the search's own evaluations: what it asked for, in the order it asked
        self.seen: dict[Config, Result] = {}
        self.path: list[Result] = []
        # configs timed ahead on idle workers, not asked for yet (see `many`)
        self._ahead: dict[Config, Result] = {}
        # every Result measured, in the order measured (the report's)
        self.results: list[Result] = []

    def _config(self, cfg) -> Config:
        cfg = cfg if isinstance(cfg, Config) else Config(cfg)
        return cfg if self._canonical is None else self._canonical(cfg)

    @property
    def parallelism(self) -> int:
        """How many evaluations the evaluator runs at once for this search (1: one after
        another; a cluster's evaluator: its workers)."""
        return max(1, int(self._evaluate.parallelism))

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
        """Evaluations the count budget still allows: those measured and, on an evaluator
        that carries configs timed ahead past their batch, those still running count."""
        if self.budget.max_evals is None:
            return math.inf
        return self._left(self._flying())

    def _left(self, flying: frozenset) -> float:
        """_evals_left with `flying` (_flying's answer, which may add to `results`) known."""
        b = self.budget
        return math.inf if b.max_evals is None else b.max_evals - len(self.results) - len(flying)

    @property
    def _carrying(self) -> bool:
        return self._evaluate.carries

    def _flying(self) -> frozenset:
        """Configs timed ahead and still running (an evaluator that carries them past
        their batch), after taking in those that finished (_collect)."""
        if not self._carrying:
            return frozenset()
        # asked before collecting: one that comes in between is collected, not lost
        flying = self._evaluate.carried()
        self._collect()
        return frozenset(c for c in flying if c not in self._ahead)

    def _collect(self) -> None:
        """Configs timed ahead whose Results came in since: measured (in `results`,
        counted by the budget), out of the search's view until it asks (`_ahead`)."""
        got = self._evaluate.collect()
        for c, r in got:
            self._ahead[c] = r
            self.results.append(r)
        if got:
            self._evaluate.timed_ahead(timed=len(got))

    def spent(self) -> bool:
        return self._evals_left() <= 0 or self._out_of_time()

    def _record(self, cfg: Config, r: Result) -> None:
        self.seen[cfg] = r
        self.path.append(r)
        self.results.append(r)

    def _claim(self, cfg: Config) -> Result:
        """A config timed ahead, now asked for: one of the search's own evaluations."""
        r = self.seen[cfg] = self._ahead.pop(cfg)
        self.path.append(r)
        self._evaluate.timed_ahead(asked=1)
        return r

    def __call__(self, cfg: Config) -> Result:
        cfg = self._config(cfg)
        if cfg in self.seen:
            return self.seen[cfg]
        if self._carrying:                      # it may be running ahead: many() knows
            return self.many([cfg])[0]
        if cfg in self._ahead:                  # measured and counted already
            return self._claim(cfg)
        if self.spent():
            raise BudgetExhausted
        self._started = True
        r = self._evaluate(cfg)
        self._record(cfg, r)
        return r

    def many(self, cfgs: Iterable, ahead: Iterable = ()) -> list[Result]:
        """Results of `cfgs` in order (a config seen before gives its first Result).

        The new ones are one batch for the evaluator, cut to the evaluations the
        budget has left; the time limit is checked before each.  When the budget
        cut the batch, what was evaluated is recorded and BudgetExhausted raised.

        `ahead`: configs the search may ask for next (most likely first).  Where the
        evaluator runs several evaluations at once (parallelism k > 1) and the batch
        would leave workers idle in its last round, up to that many of them are timed
        in the same batch, ahead (within the evaluations the budget has left).  A
        config timed ahead stays out of the search's view (get, best, evaluated)
        until the search asks for it, so the search decides exactly as it would one
        evaluation at a time; it is in `results` (and counted by the budget) from
        when it was measured.  With one worker nothing is timed ahead.

        `ahead` is read only where configs are timed ahead, and only until the room
        for them is filled (one worker, or a batch the search has all evaluated, reads
        none of it): a strategy may pass a generator that works out its guesses
        as they are read, and a search on one worker never pays for them."""
        cfgs = [self._config(c) for c in cfgs]
        todo = [c for c in dict.fromkeys(cfgs) if c not in self.seen]
        if todo:
            # cut to the evaluations the budget has left (a config timed ahead was
            # counted when it was measured, or sent: it costs nothing more)
            flying = self._flying()
            left = self._left(flying)
            allowed, new, landing = [], [], []
            for c in todo:
                if c in flying and c not in self._ahead:
                    landing.append(c)               # timed ahead, still running: waited for
                elif c not in self._ahead:
                    if len(new) >= left:
                        break
                    new.append(c)
                allowed.append(c)
            if not allowed or (new and self._out_of_time()):
                raise BudgetExhausted
            # (an evaluator that carries them sends configs ahead on every batch, one of
            # configs timed ahead too: what it times never depends on which of them had
            # come in when the search asked)
            extra = self._extra(ahead, new, left - len(new), flying) \
                if new or landing or self._carrying else []
            got: dict[Config, Result] = {}
            if new or landing or extra:
                if self._carrying:
                    # the configs ahead go out as the batch's last ones leave workers
                    # free, and run on past it (across the search's next decision)
                    batch = new + landing
                    results = self._evaluate.many(batch, stop=self._stop, ahead=extra)
                else:
                    batch = new + extra
                    results = self._evaluate.many(batch, stop=self._stop)
                if len(results) > len(batch):
                    raise RuntimeError(f"the evaluator returned {len(results)} results "
                                       f"for a batch of {len(batch)}")
                got = dict(zip(batch, results))
                self.results.extend(results)            # in the order measured
                if landing:
                    self._evaluate.timed_ahead(timed=sum(c in got for c in landing))
                timed = [c for c in extra if c in got]
                for c in timed:
                    self._ahead[c] = got[c]
                if timed:
                    self._evaluate.timed_ahead(timed=len(timed))
                self._collect()
            for c in allowed:                            # the search's own, in its order
                if c in self._ahead:
                    self._claim(c)
                elif c in got:
                    self.seen[c] = got[c]
                    self.path.append(got[c])
                    if c in landing:
                        self._evaluate.timed_ahead(asked=1)
                else:
                    raise BudgetExhausted                # the time limit cut the batch
            if len(allowed) < len(todo):
                raise BudgetExhausted
        return [self.seen[c] for c in cfgs]

    def _extra(self, ahead: Iterable, new: list, left: float, flying=frozenset()) -> list[Config]:
        """Configs of `ahead` to time beside the batch `new`: as many as the batch's last
        round leaves workers idle (and, where the evaluator carries them past the batch,
        one more a worker: they keep the workers busy while the search decides its next
        step), and no more than the evaluations the budget leaves after this batch."""
        k = self.parallelism
        if k <= 1:
            return []
        room = min((-len(new)) % k + (k if self._carrying else 0), left)
        if room <= 0:
            return []
        out: list[Config] = []
        taken = set(new) | set(flying)
        for c in ahead:
            c = self._config(c)
            if c not in self.seen and c not in self._ahead and c not in taken:
                out.append(c)
                taken.add(c)
                if len(out) >= room:
                    break
        return out

    def prefetch(self, cfgs) -> None:
        """Tell the evaluator which configs come next (a backend may compile them in
        parallel); configs this search has evaluated, and those past the budget's
        evaluations, are left out."""
        if self.spent():
            return
        todo = [c for c in dict.fromkeys(map(self._config, cfgs))
                if c not in self.seen and c not in self._ahead]
        left = self._evals_left()
        todo = todo[:max(0, left)] if left < len(todo) else todo
        if todo:
            self._evaluate.prefetch(todo)

    def phase(self, label: str) -> None:
        """The strategy's current phase, passed on to the evaluator (progress)."""
        self._evaluate.phase(label)

    def evaluated(self, cfg: Config) -> bool:
        """Whether this search has evaluated `cfg` (draws pass over such configs)."""
        return self._config(cfg) in self.seen

    def get(self, cfg: Config) -> Result | None:
        """The Result for `cfg` if this search has evaluated it (no evaluation)."""
        return self.seen.get(self._config(cfg))

    def best(self) -> Result | None:
        """The best of the search's own evaluations (configs timed ahead and not asked
        for yet are not among them)."""
        ok = [r for r in self.path if r.ok]
        return min(ok, key=score) if ok else None
