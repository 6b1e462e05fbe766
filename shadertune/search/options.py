"""SearchOptions: everything a strategy may be told besides its space, evaluator and budget.

Every strategy has the one signature

    search(space, evaluate, budget=None, options=None) -> list[Result]

and reads the options it uses.  Strategies never see backends: a backend's cost
model reaches them as `cost_model`, a function of configs (tune() builds it from
Backend.predict_ms).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..core.config import Config

# predicted milliseconds per config, or None when there is no model
CostModel = Callable[[Sequence[Config]], "Sequence[float] | None"]


@dataclass(frozen=True)
class SearchOptions:
    seed: int = 0                       # every random choice (random draws, restarts)
    cost_model: CostModel | None = None
    seeds: tuple = ()                   # configs to time first, best first (a backend's list)
    top: int = 24                       # model: best-predicted configs timed first
    batch: int = 8                      # configs asked for at once (steps, restarts, draws)
    step_evals: int = 16                # local search with a model: neighbours timed per step
    patience: int = 3                   # restarts in a row without a gain before convergence
    min_gain: float = 0.01              # a smaller relative improvement is not a gain
    rank_limit: int = 200_000           # model: rank at most this many configs (a sample beyond)
    # model: space -> its ranked list, or None (rank in process with cost_model); the
    # same list ranked_configs makes, made elsewhere (search.ranking.ChildRanker; where it
    # has start(space) -> wait(), the search starts it as it begins)
    rank_elsewhere: Callable | None = None

    def __post_init__(self):
        object.__setattr__(self, "seeds", tuple(Config(c) for c in self.seeds))
        for name in ("top", "batch", "step_evals", "patience", "rank_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"SearchOptions.{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.min_gain < 1:
            raise ValueError(f"SearchOptions.min_gain must be in [0, 1), got {self.min_gain}")

    def predict(self, configs: Sequence[Config]) -> list[float] | None:
        """The cost model's predictions for `configs`, or None without a model."""
        if self.cost_model is None:
            return None
        pred = self.cost_model(configs)
        if pred is None:
            return None
        pred = [float(p) for p in pred]
        if len(pred) != len(configs):
            raise ValueError(f"the cost model gave {len(pred)} predictions for {len(configs)} configs")
        return pred
