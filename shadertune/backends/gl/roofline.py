"""The GL roofline model: which measured ceiling bounds a fragment-shader config.

Brook-style (Jiang, seeds/002): a fragment shader of the render-target (MRT)
path is bound by min(fragment ALU peak, texel-fetch rate x flops per fetch of
its blocking).  On the image path, where an operand may come from a storage
buffer, it is also bound by the storage-buffer load rate x flops per load (the
two paths are separate units, so the slowest one bounds the fragment).

The ceilings are measured by microbench.py (`report roofline`); GLBackend's
roofline() and ceiling_lines() hooks call the functions here.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ...roofline.bounds import flat, need, peak_line
from .compute_layout import ComputeLayout
from .layout import MC_SHAPES


def _mc(config: Mapping) -> tuple[int, int]:
    mc = str(config.get("mc", "1x1"))
    try:
        return MC_SHAPES[mc]
    except KeyError:
        raise ValueError(f"unknown mc {mc!r}; expected one of {sorted(MC_SHAPES)}") from None


def _is_image(config: Mapping) -> bool:
    return config.get("out", "mrt") == "image"


# --- the render-target (MRT) path ------------------------------------------------

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


# --- the image path ----------------------------------------------------------------

def gl_image_load_counts(config: Mapping, K: int | None = None) -> tuple[float, float, float]:
    """(flops, texture fetches, storage-buffer loads) of one image-path fragment over one
    pass of `np` k-values (backends/gl/image_layout.py).

    A fragment owns block_h x block_w outputs; per A texel (4 k) it reads block_h A
    vec4s and 4 x block_w / 4 B vec4s, each from a texture or a storage buffer as
    a_src / b_src say; per pass it also loads its block_h x block_w / 4 C texels
    (imageLoad, counted as texture fetches).  Without np (or np=0) the per-pass
    term is left out."""
    rows, cols = int(config["block_h"]), int(config["block_w"])
    if rows < 1 or cols < 4 or cols % 4:
        raise ValueError(f"an image-path block is block_h >= 1 x block_w (a multiple of 4), "
                         f"got {rows} x {cols}")
    per_step = {"texture": 0, "ssbo": 0}
    for src, n in ((config.get("a_src", "texture"), rows), (config.get("b_src", "texture"), cols)):
        if src not in per_step:
            raise ValueError(f"unknown operand source {src!r}; expected 'texture' or 'ssbo'")
        per_step[src] += n
    outputs = rows * cols
    np_ = config.get("np")
    if np_ is None or int(np_) <= 0:
        return 2.0 * 4 * outputs, float(per_step["texture"]), float(per_step["ssbo"])
    np_ = int(np_)
    if K is not None and K > 0:
        np_ = min(np_, -(-K // 4) * 4)
    steps = math.ceil(np_ / 4)
    return (2.0 * np_ * outputs, float(steps * per_step["texture"] + outputs // 4),
            float(steps * per_step["ssbo"]))


def _gl_image_roofline(config: Mapping, c: Mapping, K: int | None) -> dict:
    """The image path's bound: a fragment's flops over the longest of its ALU time,
    texture-fetch time and storage-buffer load time (separate units, so the slowest
    one bounds it)."""
    flops, fetches, loads = gl_image_load_counts(config, K)
    times = {"alu": flops / need(c, "fragment_fma_gflops")}
    if fetches:
        times["fetch"] = fetches / need(c, "fetch_gtexels")
    if loads:
        times["ssbo"] = loads / need(c, "ssbo_gloads")
    bound = max(times, key=times.get)
    return {"gflops": flops / times[bound], "bound": bound,
            "flops_per_fetch": flops / fetches if fetches else math.inf,
            "flops_per_load": flops / loads if loads else math.inf}


# --- the fragment family's bound -----------------------------------------------------

def flops_per_fetch(config: Mapping, K: int | None = None) -> float:
    """Flops a fragment does per RGBA32F texel it fetches (the GL arithmetic intensity;
    on the image path per texture fetch, inf when it fetches none)."""
    if _is_image(config):
        flops, fetches, _ = gl_image_load_counts(config, K)
    else:
        flops, fetches = gl_fetch_counts(config, K)
    return flops / fetches if fetches else math.inf


def gl_config_roofline(config: Mapping, ceilings: Mapping, K: int | None = None) -> dict:
    """{'gflops', 'bound': 'fetch'|'alu', 'flops_per_fetch'} for one GL config; an
    image-path config adds 'flops_per_load' (per storage-buffer load) and may be
    bound by 'ssbo' (the measured storage-buffer load rate, `ssbo_gloads`)."""
    c = flat(ceilings)
    if _is_image(config):
        return _gl_image_roofline(config, c, K)
    alu = need(c, "fragment_fma_gflops")
    rate = need(c, "fetch_gtexels")                       # G fetches/s
    fpf = flops_per_fetch(config, K)
    fetch_bound = rate * fpf                              # G fetches/s x flops/fetch = GFLOP/s
    if fetch_bound < alu:
        return {"gflops": fetch_bound, "bound": "fetch", "flops_per_fetch": fpf}
    return {"gflops": alu, "bound": "alu", "flops_per_fetch": fpf}


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


def gl_ceiling_lines(ceilings: Mapping) -> list[tuple[str, float]]:
    """The fragment FMA peak, and the fetch roofline of the best blocking (within 8 targets)."""
    c = flat(ceilings)
    lines = peak_line(c, "fragment_fma_gflops", "fragment FMA peak")
    try:
        top = best_gl_roofline(c)
    except KeyError:
        return lines
    return lines + [(f"fetch roofline {top['gflops']:,.0f} ({top['flops_per_fetch']:.1f} flops/fetch)",
                     top["gflops"])]


def compute_roofline(problem: Problem, config: Mapping, ceilings: Mapping) -> dict:
    """The bound of a compute config given measured ceilings: the compute FMA peak, or
    the operand traffic its tiles cause at the measured bandwidth where one was
    measured ('compute_fma_gflops', 'cuda_dram_gbs'); flops per byte moved."""
    L = ComputeLayout.plan(problem, config)
    c = flat(ceilings)
    alu = need(c, "compute_fma_gflops")
    moved = 4 * L.batch * (L.tiles_n * L.M * L.K + L.tiles_m * L.K * L.N) + 4 * L.c_floats
    intensity = problem.flops / moved
    bw = c.get("cuda_dram_gbs")
    if isinstance(bw, (int, float)) and bw > 0 and bw * intensity < alu:
        return {"gflops": bw * intensity, "bound": "memory", "flops_per_byte": intensity}
    return {"gflops": float(alu), "bound": "alu", "flops_per_byte": intensity}
