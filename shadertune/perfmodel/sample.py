"""Data for a model: sampled problems, each measured on random and on
model-guided configs through the search core, into a store, in bounded time.

Problems: M, N, K each log-uniform in [lo, hi] (integers, so odd sizes come
as often as round ones), the layout (trans_a, trans_b) drawn from the ones
asked for. Configs per problem: the backend's default, then, alternating,
the current model's best predictions (the model is retrained as the store
grows, see saved.model_for) and uniform draws from the problem's candidates
(perfmodel.candidates: the whole space when small). Before a model exists
every config is random.
"""
from __future__ import annotations

import math
import random
import time

from ..errors import InvalidConfig
from ..core.problem import Problem
from ..search import Budget
from .candidates import candidates
from .saved import model_for
from .tuning_run import TuningRun

LAYOUTS = ("NN", "NT", "TN", "TT")


def log_uniform_problems(n: int, lo: int, hi: int, *, seed: int = 0, layouts=LAYOUTS,
                         dtype: str = "float32") -> list[Problem]:
    if not 1 <= lo <= hi:
        raise ValueError(f"sizes must satisfy 1 <= lo <= hi, got lo={lo}, hi={hi}")
    bad = [x for x in layouts if x not in LAYOUTS]
    if bad or not layouts:
        raise ValueError(f"layouts must be some of {list(LAYOUTS)}, got {list(layouts)}")
    rng = random.Random(seed)
    draw = lambda: int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 0.5)))))  # noqa: E731
    out = []
    for _ in range(n):
        t = rng.choice(list(layouts))
        out.append(Problem(min(draw(), hi), min(draw(), hi), min(draw(), hi), dtype,
                           t[0] == "T", t[1] == "T"))
    return out


def generate(backend, store, problems, *, configs: int = 16, seconds: float | None = None,
             repeats: int = 5, warmup: int = 1, seed: int = 0, log=None) -> dict:
    """Measure up to `configs` configs of each problem (see the module docstring);
    no evaluation starts after `seconds` in all. Returns counts for a summary."""
    rng = random.Random(seed)
    t0 = time.monotonic()
    done = {"problems": 0, "evaluated": 0, "ok": 0, "guided": 0, "seconds": 0.0, "skipped": []}
    with TuningRun(backend, store) as run:        # measure, then train the model
        _sample(run, problems, rng, t0, done, configs=configs, seconds=seconds, repeats=repeats,
                warmup=warmup, seed=seed, log=log)
    done["seconds"] = time.monotonic() - t0
    return done


def _sample(run, problems, rng, t0, done, *, configs, seconds, repeats, warmup, seed, log) -> None:
    backend, store = run.backend, run.store
    for p in problems:
        left = None if seconds is None else seconds - (time.monotonic() - t0)
        if left is not None and left <= 0:
            break
        try:
            space = backend.space(p)
            default = backend.default_config(p)
        except (InvalidConfig, ValueError) as e:
            done["skipped"].append(f"{p.label}: {e}")
            continue
        model, _ = model_for(backend, store)
        if model is not None and not model.trained_on(p.dtype):
            model = None
        seeds = [default] + (model.verified_configs(p.dtype) if model is not None else [])
        cands = candidates(space, seeds, seed=rng.randrange(1 << 30))
        guided = [c for _, c in model.rank(p, cands)] if model is not None else []
        pool = [c for c in cands if c != default]
        rng.shuffle(pool)
        order, picked_by_model = [default], set()
        while len(order) < configs and (guided or pool):
            for src in (guided, pool):
                while src and src[0] in order:
                    src.pop(0)
                if src and len(order) < configs:
                    if src is guided:
                        picked_by_model.add(src[0])
                    order.append(src.pop(0))
        results = run.measure(p, order, budget=Budget(configs, left), repeats=repeats,
                              warmup=warmup, seed=seed)
        done["problems"] += 1
        done["evaluated"] += len(results)
        done["ok"] += sum(r.ok for r in results)
        done["guided"] += sum(r.config in picked_by_model for r in results)
        if log is not None:
            b = max((r.gflops for r in results if r.ok), default=None)
            log(f"{p.label}: {len(results)} configs ({sum(r.ok for r in results)} ok), best "
                + (f"{b:.3f} GFLOP/s" if b is not None else "-"))
