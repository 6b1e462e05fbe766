"""What a strategy's evaluations go through: the evaluator contract.

A strategy calls evaluate(config) -> Result through its Tracker, and may ask for
a batch at once.  An evaluator implements __call__; the rest has defaults:

- many(configs, stop)  a batch, Results in the order given; the default announces
                       the batch (prefetch) and evaluates one config after
                       another, calling stop() before each and ending the batch
                       when it says so (the time limit).  A distributed
                       evaluator farms the batch out instead.
- prefetch(configs)    configs evaluated next (a backend may compile them ahead);
                       by default nothing is done.
- phase(label)         the strategy's current phase, for progress; ignored by
                       default.
- parallelism          how many evaluations it runs at once for one search (1 by
                       default; a cluster's evaluator: its workers).  With k > 1 a
                       strategy's batch that leaves workers idle in its last round
                       is filled with configs the search may ask for next, timed
                       ahead (Tracker.many); the search's own decisions never see
                       them before it asks.
- timed_ahead(timed, asked)  how many configs were timed ahead, and how many of
                       those the search then asked for (reports); ignored by default.
- carries              whether configs timed ahead may run on past the batch that
                       sent them (False by default; a cluster's evaluator: True).
                       Such an evaluator takes them apart, many(configs, stop,
                       ahead=...), returns once `configs` are in, and keeps the rest
                       running: carried() names those still running, collect() hands
                       over (once) the Results of those that finished, and a later
                       many() that asks for one waits for it instead of sending it
                       again.
- finish(wait)         the search ended: the Results of what it timed ahead and never
                       collected (waited for: the budget counted them when sent), or
                       with wait=False (the search failed) what is still carried is
                       cancelled, never recorded; [] by default.

A plain function config -> Result is wrapped in FunctionEvaluator.
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

from ..core.config import Config
from ..core.result import Result


class BaseEvaluator(abc.ABC):
    @abc.abstractmethod
    def __call__(self, config: Config) -> Result:
        """Evaluate one config; every failure is a Result with a status."""

    def many(self, configs: Sequence[Config],
             stop: Callable[[], bool] | None = None) -> list[Result]:
        """Results of `configs` in order; a shorter list if stop() ended the batch."""
        if len(configs) > 1:
            self.prefetch(configs)
        out = []
        for cfg in configs:
            if stop is not None and stop():
                break
            out.append(self(cfg))
        return out

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Configs evaluated next; nothing is done ahead by default."""

    def phase(self, label: str) -> None:
        """The strategy names its current phase; ignored by default."""

    @property
    def parallelism(self) -> int:
        """Evaluations run at once for one search: one after another by default."""
        return 1

    def timed_ahead(self, timed: int = 0, asked: int = 0) -> None:
        """`timed` configs of the last batch were timed ahead on idle workers; `asked`
        configs timed ahead were then asked for by the search (a report counts both);
        ignored by default."""

    carries = False

    def carried(self) -> frozenset:
        """Configs timed ahead and still running (an evaluator that carries them)."""
        return frozenset()

    def collect(self) -> list[tuple[Config, Result]]:
        """(config, Result) of the configs timed ahead that finished since the last call."""
        return []

    def finish(self, wait: bool = True) -> list[Result]:
        """The search ended: Results of configs timed ahead it never collected."""
        return []


class FunctionEvaluator(BaseEvaluator):
    """A plain function config -> Result as an evaluator."""

    def __init__(self, fn: Callable[[Config], Result]):
        self._fn = fn

    def __call__(self, config: Config) -> Result:
        return self._fn(config)


def as_evaluator(evaluate) -> BaseEvaluator:
    return evaluate if isinstance(evaluate, BaseEvaluator) else FunctionEvaluator(evaluate)
