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


class FunctionEvaluator(BaseEvaluator):
    """A plain function config -> Result as an evaluator."""

    def __init__(self, fn: Callable[[Config], Result]):
        self._fn = fn

    def __call__(self, config: Config) -> Result:
        return self._fn(config)


def as_evaluator(evaluate) -> BaseEvaluator:
    return evaluate if isinstance(evaluate, BaseEvaluator) else FunctionEvaluator(evaluate)
