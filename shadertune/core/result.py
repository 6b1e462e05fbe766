"""Result: everything measured about one (backend, device, problem, config)."""
from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import Config
from .problem import Problem

OK = "ok"
INVALID = "invalid"
COMPILE_FAILED = "compile_failed"
RUN_FAILED = "run_failed"
WRONG = "wrong"
SLOW = "slow"        # abandoned part-way, far slower than the best so far: never verified
STATUSES = (OK, INVALID, COMPILE_FAILED, RUN_FAILED, WRONG, SLOW)


@dataclass
class Result:
    backend: str
    device: str
    problem: Problem
    config: Config
    status: str
    times_ms: list[float] = field(default_factory=list)
    compile_ms: float | None = None
    error: float | None = None          # relative Frobenius error vs a float64 reference
    message: str = ""
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; expected one of {STATUSES}")
        if not isinstance(self.config, Config):
            self.config = Config(self.config)

    @property
    def ok(self) -> bool:
        return self.status == OK and bool(self.times_ms)

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None

    @property
    def gflops(self) -> float | None:
        m = self.median_ms
        if not self.ok or not m or m <= 0:
            return None
        return self.problem.flops / (m * 1e-3) / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device,
                "problem": self.problem.to_dict(), "config": self.config.to_dict(),
                "status": self.status, "times_ms": list(self.times_ms),
                "median_ms": self.median_ms, "gflops": self.gflops,
                "compile_ms": self.compile_ms, "error": self.error,
                "message": self.message, "timestamp": self.timestamp}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Result":
        return cls(backend=d["backend"], device=d["device"],
                   problem=Problem.from_dict(d["problem"]), config=Config(d["config"]),
                   status=d["status"], times_ms=[float(t) for t in d.get("times_ms", [])],
                   compile_ms=d.get("compile_ms"), error=d.get("error"),
                   message=d.get("message", ""), timestamp=d.get("timestamp", time.time()))


def best(results: Iterable[Result]) -> Result | None:
    """The fastest correct result; a wrong or failed one is never best."""
    good = [r for r in results if r.ok]
    return min(good, key=lambda r: r.median_ms or 0.0) if good else None    # ok: timed
