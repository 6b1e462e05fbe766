"""The render-target path's roofline: a fragment is bound by min(fragment ALU peak,
texel-fetch rate x flops per fetch of its blocking) (Brook-style, Jiang).  The
assembly path draws the same layout, so it is bound the same way."""
from __future__ import annotations

import math
from collections.abc import Mapping

from ....core.problem import Problem
from ....core.roofline.bounds import flat, need
from .layout import MC_SHAPES


def _mc(config: Mapping) -> tuple[int, int]:
    mc = str(config.get("mc", "1x1"))
    try:
        return MC_SHAPES[mc]
    except KeyError:
        raise ValueError(f"unknown mc {mc!r}; expected one of {sorted(MC_SHAPES)}") from None


def gl_fetch_counts(config: Mapping, K: int | None = None) -> tuple[float, float]:
    """(flops, fetches) of one fragment over one pass of `np` k-values.

    The lead's layout: A texels hold mc_h rows x ka k-values (ka = 4 // mc_h),
    B texels hold kb k-values x mc_w cols (kb = min(ka, 4 // mc_w)), a fragment
    computes mrt_h x mrt_w C texels of mc_h x mc_w outputs.  Per ka k-steps it
    fetches mrt_h A texels and mrt_w * (ka // kb) B texels; per pass it also
    reads its mrt_h * mrt_w partial-sum texels.  Without `np` (or np=0) the
    per-pass term is left out (one endless pass).
    """
    mc_h, mc_w = _mc(config)
    mrt_h, mrt_w = int(config.get("mrt_h", 1)), int(config.get("mrt_w", 1))
    ka = 4 // mc_h
    kb = min(ka, 4 // mc_w)
    fetch_per_step = mrt_h + mrt_w * (ka // kb)          # per ka k-values
    outputs = (mrt_h * mc_h) * (mrt_w * mc_w)
    np_ = config.get("np")
    if np_ is None or int(np_) <= 0:
        return 2.0 * ka * outputs, float(fetch_per_step)
    np_ = int(np_)
    if K is not None and K > 0:
        np_ = min(np_, -(-K // ka) * ka)                  # as Layout.plan: one pass covers padded K
    steps = math.ceil(np_ / ka)                           # texels are fetched whole
    return 2.0 * np_ * outputs, float(steps * fetch_per_step + mrt_h * mrt_w)


def flops_per_fetch(config: Mapping, K: int | None = None) -> float:
    """Flops a fragment does per RGBA32F texel it fetches (the GL arithmetic intensity)."""
    flops, fetches = gl_fetch_counts(config, K)
    return flops / fetches if fetches else math.inf


def bound(config: Mapping, ceilings: Mapping, problem: Problem | None = None) -> dict:
    """{'gflops', 'bound': 'fetch'|'alu', 'flops_per_fetch'} for one config (the
    KernelPath hook; without a problem, one pass of np not clamped to K)."""
    c = flat(ceilings)
    alu = need(c, "fragment_fma_gflops")
    rate = need(c, "fetch_gtexels")                       # G fetches/s
    fpf = flops_per_fetch(config, None if problem is None else problem.K)
    fetch_bound = rate * fpf                              # G fetches/s x flops/fetch = GFLOP/s
    if fetch_bound < alu:
        return {"gflops": fetch_bound, "bound": "fetch", "flops_per_fetch": fpf}
    return {"gflops": alu, "bound": "alu", "flops_per_fetch": fpf}


def best_roofline(ceilings: Mapping, max_targets: int = 8) -> dict:
    """The highest fetch roofline any mc/mrt blocking reaches within max_targets render targets."""
    best = None
    for mc in MC_SHAPES:
        for h in (1, 2, 4):
            for w in (1, 2, 4):
                if h * w > max_targets:
                    continue
                r = bound({"mc": mc, "mrt_h": h, "mrt_w": w}, ceilings)
                if best is None or r["gflops"] > best["gflops"]:
                    best = dict(r, config={"mc": mc, "mrt_h": h, "mrt_w": w})
    return best
