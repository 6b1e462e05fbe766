"""Synthetic tuning stores for the performance-model tests (real SQLite, real training).

The fake backend's space (tests/fake_backend.py) with a cost that depends on
the shape, so that a model has something to learn that the nearest-shape rule
gets wrong:
- the best packing mc is '1x4' for tall problems (M >= N) and '2x2' for wide ones;
- the best np is min(K, 32) rounded to even;
- glsl 450 is 10% faster; the render-target table of the fake backend applies.
"""
from __future__ import annotations

import math
import random

from fake_backend import MRT, FakeBackend

from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.core.result import Result

DEVICE = "fake renderer | 1.0"
TEMPLATES = "fake-templates-1"


def true_gflops(p: Problem, c) -> float:
    tall = p.M >= p.N
    mc = ({"1x4": 1.0, "2x2": 0.75, "1x2": 0.65, "1x1": 0.5} if tall else
          {"2x2": 1.0, "1x4": 0.7, "1x2": 0.6, "1x1": 0.5})[c["mc"]]
    np_best = max(2, min(p.K, 32) // 2 * 2)
    npf = 1.0 / (1.0 + ((c["np"] - np_best) / 12.0) ** 2)
    size = min(1.0, math.log2(max(p.flops, 2)) / 24)
    return 20.0 * size * mc * npf * (1.1 if c["glsl"] == "450" else 1.0) / MRT[(c["mrt_h"], c["mrt_w"])]


def true_ms(p: Problem, c) -> float:
    return p.flops / (true_gflops(p, c) * 1e6)


def put(store: Store, p: Problem, cfg, status: str = "ok", ms: float | None = None) -> None:
    times = [true_ms(p, cfg) if ms is None else ms] if status == "ok" else []
    store.put(Result("fake", DEVICE, p, cfg, status, times_ms=times, error=1e-7 if times else None),
              TEMPLATES)


def fill(store: Store, problems, per_problem: int = 60, seed: int = 0) -> None:
    """`per_problem` random valid configs of each problem, timed by the synthetic cost."""
    rng = random.Random(seed)
    be = FakeBackend()
    for p in problems:
        cfgs = be.space(p).configs()
        for c in rng.sample(cfgs, min(per_problem, len(cfgs))):
            put(store, p, c)


TRAIN = [Problem(128, 16, 64), Problem(96, 8, 24), Problem(200, 24, 48), Problem(64, 12, 16),
         Problem(16, 128, 64), Problem(8, 96, 40), Problem(24, 200, 20), Problem(12, 64, 56)]
