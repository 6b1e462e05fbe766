"""Roofline models: which measured ceiling bounds a config or a problem.

GL (Brook-style, Jiang/seeds 002): a fragment shader is bound by
min(fragment ALU peak, texel-fetch rate x flops per fetch of its blocking).
CUDA: min(FMA peak, DRAM bandwidth x the problem's arithmetic intensity).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

MC_SHAPES = {"1x1": (1, 1), "1x2": (1, 2), "1x3": (1, 3), "1x4": (1, 4), "2x2": (2, 2)}


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
    return flops / fetches


def _flat(ceilings: Mapping) -> Mapping:
    """Accept a stored measurement ({'ceilings': {...}, ...}) or the flat ceilings map."""
    inner = ceilings.get("ceilings")
    return inner if isinstance(inner, Mapping) else ceilings


def _need(c: Mapping, key: str) -> float:
    v = c.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
        raise KeyError(f"ceilings lack a positive {key!r} (have {sorted(c)})")
    return float(v)


def gl_config_roofline(config: Mapping, ceilings: Mapping, K: int | None = None) -> dict:
    """{'gflops', 'bound': 'fetch'|'alu', 'flops_per_fetch'} for one GL config."""
    c = _flat(ceilings)
    alu = _need(c, "fragment_fma_gflops")
    rate = _need(c, "fetch_gtexels")                      # G fetches/s
    fpf = flops_per_fetch(config, K)
    fetch_bound = rate * fpf                              # G fetches/s x flops/fetch = GFLOP/s
    if fetch_bound < alu:
        return {"gflops": fetch_bound, "bound": "fetch", "flops_per_fetch": fpf}
    return {"gflops": alu, "bound": "alu", "flops_per_fetch": fpf}


def cuda_problem_roofline(problem, ceilings: Mapping) -> dict:
    """{'gflops', 'bound': 'memory'|'alu', 'intensity'}: min(FMA peak, BW x flops/byte).

    `problem` is a Problem or its dict; bytes are the fewest a kernel must move."""
    from ..problem import Problem
    p = problem if isinstance(problem, Problem) else Problem.from_dict(problem)
    c = _flat(ceilings)
    # FP64 problems are bound by the FP64 peak where it was measured.
    alu_key = "cuda_fma64_gflops" if p.dtype == "float64" and "cuda_fma64_gflops" in c else "cuda_fma_gflops"
    alu = _need(c, alu_key)
    bw = _need(c, "cuda_dram_gbs")
    intensity = p.flops / p.bytes if p.bytes else math.inf
    mem = bw * intensity
    if mem < alu:
        return {"gflops": mem, "bound": "memory", "intensity": intensity}
    return {"gflops": alu, "bound": "alu", "intensity": intensity}


def best_gl_roofline(ceilings: Mapping, max_targets: int = 8) -> dict:
    """The highest fetch roofline any mc/mrt blocking reaches within max_targets render targets."""
    best = None
    for mc in MC_SHAPES:
        for h in (1, 2, 4):
            for w in (1, 2, 4):
                if h * w > max_targets:
                    continue
                r = gl_config_roofline({"mc": mc, "mrt_h": h, "mrt_w": w}, ceilings)
                if best is None or r["gflops"] > best["gflops"]:
                    best = dict(r, config={"mc": mc, "mrt_h": h, "mrt_w": w})
    return best


def _peak_line(c: Mapping, key: str, label: str) -> list[tuple[str, float]]:
    v = c.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return [(f"{label} {v:,.0f}", float(v))]
    return []


def gl_ceiling_lines(ceilings: Mapping) -> list[tuple[str, float]]:
    """The fragment FMA peak, and the fetch roofline of the best blocking (within 8 targets)."""
    c = _flat(ceilings)
    lines = _peak_line(c, "fragment_fma_gflops", "fragment FMA peak")
    try:
        top = best_gl_roofline(c)
    except KeyError:
        return lines
    return lines + [(f"fetch roofline {top['gflops']:,.0f} ({top['flops_per_fetch']:.1f} flops/fetch)",
                     top["gflops"])]


def cuda_ceiling_lines(ceilings: Mapping) -> list[tuple[str, float]]:
    """The CUDA FMA peak (FP32)."""
    return _peak_line(_flat(ceilings), "cuda_fma_gflops", "CUDA FMA peak")
