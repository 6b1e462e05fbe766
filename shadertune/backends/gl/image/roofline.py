"""The image path's roofline: where an operand may come from a storage buffer, a
fragment is also bound by the storage-buffer load rate x flops per load (the
texture units and the load path are separate units, so the slowest one bounds it)."""
from __future__ import annotations

import math
from collections.abc import Mapping

from ....core.problem import Problem
from ....core.roofline.bounds import flat, need


def gl_image_load_counts(config: Mapping, K: int | None = None) -> tuple[float, float, float]:
    """(flops, texture fetches, storage-buffer loads) of one image-path fragment over one
    pass of `np` k-values (image/layout.py).

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


def flops_per_fetch(config: Mapping, K: int | None = None) -> float:
    """Flops a fragment does per texture fetch (inf when it fetches none)."""
    flops, fetches, _ = gl_image_load_counts(config, K)
    return flops / fetches if fetches else math.inf


def bound(config: Mapping, ceilings: Mapping, problem: Problem | None = None) -> dict:
    """The image path's bound (the KernelPath hook): a fragment's flops over the longest
    of its ALU time, texture-fetch time and storage-buffer load time; 'flops_per_load'
    is per storage-buffer load and the bound may be 'ssbo' (the measured load rate,
    `ssbo_gloads`)."""
    c = flat(ceilings)
    flops, fetches, loads = gl_image_load_counts(config, None if problem is None else problem.K)
    times = {"alu": flops / need(c, "fragment_fma_gflops")}
    if fetches:
        times["fetch"] = fetches / need(c, "fetch_gtexels")
    if loads:
        times["ssbo"] = loads / need(c, "ssbo_gloads")
    bound = max(times, key=times.get)
    return {"gflops": flops / times[bound], "bound": bound,
            "flops_per_fetch": flops / fetches if fetches else math.inf,
            "flops_per_load": flops / loads if loads else math.inf}
