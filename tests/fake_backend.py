"""A fake backend with a synthetic, deterministic cost surface (no GL, instant).

Its space mimics the GL one (Jiang's knobs and phase plan).  The cost is
separable, so the exhaustive optimum is known in closed form:

    ms = outer(glsl, fetch, unroll) * (1 + ((np - NP_BEST) / NP_BEST)^2) * mc * mrt

with NP_BEST = 22 (not a power of two: only the recursive np refinement finds
it).  Traps, timed as the fastest of all: glsl=330 with mc=2x2 computes a
wrong C; mc=1x4 with mrt 4x2 leaves C unwritten (NaN); fetch=texture with
unroll=full fails to compile; np=6 raises InvalidConfig at build.

With model=True it has a cost model (predict_ms): the true cost times a
log-normal factor per config (sigma MODEL_NOISE, seeded by the config), so
rank-correlated but wrong in detail, and blind to the traps (they predict fastest).

Environment (read when instantiated, for subprocess tests): FAKE_LOG appends
'start KEY' when a build starts and 'done KEY' when timing ends; FAKE_SLEEP
sleeps that many seconds in each build; FAKE_HANG_AT=n hangs in the n-th
build (a stuck kernel, for the kill-and-resume test).
"""
from __future__ import annotations

import math
import os
import random
import time

import numpy as np

from shadertune.backends.base import Backend, DeviceInfo, Kernel
from shadertune.core.config import Config
from shadertune.errors import BuildError, ContextError, InvalidConfig
from shadertune.core.space import PhasePlan, Space

NP_BEST = 22
OUTER = {"glsl": {"330": 1.0, "450": 0.8}, "fetch": {"texelFetch": 1.0, "texture": 1.1},
         "unroll": {1: 1.3, 2: 1.1, 4: 1.0, "full": 1.05}}
MC = {"1x1": 1.6, "1x2": 1.2, "1x4": 0.9, "2x2": 1.0}
MRT = {(1, 1): 1.5, (1, 2): 1.2, (2, 1): 1.25, (2, 2): 0.85, (1, 4): 1.1, (4, 1): 1.15,
       (2, 4): 0.95, (4, 2): 0.9, (4, 4): 1.0}
PHASES = PhasePlan(outer=("glsl", "fetch", "unroll"), refine="np",
                   groups=(("mc",), ("mrt_h", "mrt_w")))
MODEL_NOISE = 0.3


def cost_ms(cfg) -> float:
    c = 1.0
    for k, table in OUTER.items():
        c *= table[cfg[k]]
    c *= 1 + ((cfg["np"] - NP_BEST) / NP_BEST) ** 2
    c *= MC[cfg["mc"]] * MRT[(cfg["mrt_h"], cfg["mrt_w"])]
    return c * 0.5 if is_wrong(cfg) or is_unwritten(cfg) else c   # traps look fastest


def _predicted_all(problem, configs):
    return [predicted_ms(c) for c in configs]


def predicted_ms(cfg) -> float:
    """The fake's cost model: cost_ms off by a seeded log-normal factor per config."""
    return cost_ms(cfg) * math.exp(random.Random(Config(cfg).key).gauss(0.0, MODEL_NOISE))


def is_wrong(cfg) -> bool:
    return cfg["glsl"] == "330" and cfg["mc"] == "2x2"


def is_unwritten(cfg) -> bool:
    return cfg["mc"] == "1x4" and (cfg["mrt_h"], cfg["mrt_w"]) == (4, 2)


def fails_compile(cfg) -> bool:
    return cfg["fetch"] == "texture" and cfg["unroll"] == "full"


def make_space(problem, phases=PHASES) -> Space:
    k_up = -(-problem.K // 4) * 4
    return Space(
        {"glsl": ("330", "450"), "fetch": ("texelFetch", "texture"), "unroll": (1, 2, 4, "full"),
         "np": tuple(range(2, k_up + 1, 2)), "mc": tuple(MC), "mrt_h": (1, 2, 4), "mrt_w": (1, 2, 4)},
        restrictions=["mrt_h * mrt_w <= max_draw_buffers", "np <= K_up",
                      lambda c: not (c["unroll"] == "full" and c["np"] > 32)],
        constants={"max_draw_buffers": 8, "K_up": k_up}, phases=phases)


def best_correct(space) -> Config:
    """The exhaustive optimum among correct, building configs (ground truth)."""
    ok = [c for c in space.configs()
          if not (is_wrong(c) or is_unwritten(c) or fails_compile(c) or c["np"] == 6)]
    return min(ok, key=cost_ms)


class FakeKernel(Kernel):
    def __init__(self, backend, problem, config):
        self.backend, self.problem, self.config = backend, problem, config
        self.compile_ms = 1.0
        self.released = False

    def run(self, A, B, C=None, *, alpha=1.0, beta=0.0):
        p = self.problem
        a = A.T if p.trans_a else A
        b = B.T if p.trans_b else B
        out = (a.astype(np.float64) @ b.astype(np.float64)).astype(p.dtype)
        if is_wrong(self.config):
            out = out * 1.01
        if is_unwritten(self.config):
            out[-1, -1] = np.nan
        return out

    def time(self, repeats=10, warmup=2):
        self.backend.timed += 1
        self.backend.log("done", self.config)
        c = cost_ms(self.config)
        return [c * (1 + 0.001 * (i % 3)) for i in range(repeats)]

    def release(self):
        self.released = True
        self.backend.released += 1


class FakeBackend(Backend):
    name = "fake"

    def __init__(self, phases=PHASES, context_error_after: int | None = None, model: bool = False):
        self.phases = phases
        self.model = model
        self.predicted = 0
        self.context_error_after = context_error_after
        self.builds: list[Config] = []
        self.timed = 0
        self.released = 0
        self._spaces = {}
        self._log = os.environ.get("FAKE_LOG")
        self._sleep = float(os.environ.get("FAKE_SLEEP", "0"))
        self._hang_at = int(os.environ.get("FAKE_HANG_AT", "0"))

    def log(self, what, cfg):
        if self._log:
            with open(self._log, "a") as f:
                f.write(f"{what} {cfg.key}\n")

    def device(self):
        return DeviceInfo("fake", "shadertune", "fake renderer", "1.0", {"max_draw_buffers": 8})

    def space(self, problem):
        if problem not in self._spaces:
            self._spaces[problem] = make_space(problem, self.phases)
        return self._spaces[problem]

    def default_config(self, problem):
        return Config(glsl="330", fetch="texelFetch", unroll=1, np=2, mc="1x1", mrt_h=1, mrt_w=1)

    def template_hash(self):
        return "fake-templates-1"

    def predict_ms(self, problem, configs):
        if not self.model:
            return None
        self.predicted += len(configs)
        return [predicted_ms(c) for c in configs]

    def host_predictor(self):
        return _predicted_all if self.model else None

    def source(self, problem, config):
        return f"// fake kernel {config.key}"

    def build(self, problem, config):
        self.log("start", config)
        if self._sleep:
            time.sleep(self._sleep)
        self.builds.append(config)
        while len(self.builds) == self._hang_at:
            time.sleep(1)
        if self.context_error_after is not None and len(self.builds) > self.context_error_after:
            raise ContextError("no EGL display: the fake GPU went away")
        why = self.space(problem).why_invalid(config)
        if why or config["np"] == 6:
            raise InvalidConfig(why or "np=6 exceeds the fake instruction budget")
        if fails_compile(config):
            raise BuildError("0:12(3): error: fake compiler says no\nmore log lines", source="...")
        return FakeKernel(self, problem, config)


class NoContextBackend(FakeBackend):
    def device(self):
        raise ContextError("no GL context: EGL found no device (install Mesa's EGL, or set DISPLAY)")


class AllWrongBackend(FakeBackend):
    def build(self, problem, config):
        k = super().build(problem, config)
        k.run = lambda A, B, *a, **kw: np.zeros((problem.M, problem.N), problem.dtype) + 1.0
        return k


def write_many(path: str, tag: str, n: int) -> None:
    """Write n distinct ok Results to the store at `path`, one transaction each
    (run in several processes at once by the concurrency test)."""
    from shadertune.db import Store
    from shadertune.core.problem import Problem
    from shadertune.core.result import Result
    with Store(path) as s:
        for i in range(n):
            cfg = Config(glsl="450", fetch="texelFetch", unroll=1, np=2 * (i + 1), mc="1x1",
                         mrt_h=1, mrt_w=1, writer=tag)
            s.put(Result("fake", "fake renderer | 1.0", Problem(8, 8, 64), cfg, "ok",
                         times_ms=[1.0 + i]), "fake-templates-1")
