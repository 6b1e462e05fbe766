"""Derived features per backend: what a kernel's shape does with a problem.

Each function reads the problem, the config and the device limits saved with
the model (never a GPU context) and returns the same names for every config of
its backend. The numbers are the quantities a performance model of the
kernel would be written in (tiles, waves, passes, fetches, padding); the
learner finds how they combine on the device.
"""
from __future__ import annotations

import math

from ..config import Config
from ..problem import Problem
from .features import register_derived


def _log2(x: float) -> float:
    return math.log2(max(float(x), 1.0))


@register_derived("gl")
def gl_features(p: Problem, cfg: Config, limits) -> dict:
    """Per pass one draw of hc x wc fragments.  The MRT path (Jiang's): each fragment
    computes mrt_h x mrt_w C texels, fetching mrt_h A texels and mrt_w * b_sub B
    texels per k-step.  The image path: each fragment owns a block_h x block_w block
    of C and reads block_h A texels and block_w B texels per 4-k step."""
    from ..backends.gl.codegen import is_image, plan_layout
    from ..backends.gl.space import with_defaults
    cfg = with_defaults(cfg)
    L = plan_layout(p.M, p.N, p.K, cfg)
    steps = L.steps
    unroll = cfg.get("unroll", 1)
    body = steps if unroll == "full" else min(int(unroll), steps)
    fragments = L.hc * L.wc
    if is_image(cfg):
        a_reads, b_reads = L.fragment_reads()
        outputs = L.rows * L.cols                            # C elements per fragment
        fetches = steps * (a_reads + b_reads)                # texels per fragment and pass
        macs = steps * 4 * outputs
        body_targets = body * L.rows * L.col_texels
        padded = (L.hc * L.rows) * (L.wc * L.cols) * (L.passes * L.np)
    else:
        outputs = L.targets * L.mc_h * L.mc_w
        fetches = steps * (L.mrt_h + L.mrt_w * L.b_sub)
        macs = steps * L.ka * outputs
        body_targets = body * L.targets
        padded = L.Mp * L.Np * L.Kp
    return {
        "log2_passes": _log2(L.passes),
        "np_effective": float(L.np),
        "log2_fragments": _log2(fragments),
        "outputs_per_fragment": float(outputs),
        "log2_fragment_passes": _log2(fragments * L.passes),
        "unrolled_body": float(body_targets),
        "log2_fetches": _log2(fragments * L.passes * fetches),
        "macs_per_fetch": macs / max(fetches, 1),
        "padding": padded / max(p.M * p.N * p.K, 1),
        "log2_largest_texture": _log2(L.largest_texture()),
    }


@register_derived("cuda", baseline="log2_model_cycles")
def cuda_features(p: Problem, cfg: Config, limits) -> dict:
    """The generated CUDA GEMM: block tiles over the SMs (waves, occupancy), the
    reuse of a block and a thread/warp tile, split-K, and the analytical
    model's cycles (backends/cuda/tuning.py) as one more input."""
    from ..backends.cuda.device import DEFAULT_LIMITS
    from ..backends.cuda.space import WARP, complete, derive
    from ..backends.cuda.tuning import model_cycles
    lim = {**DEFAULT_LIMITS, **{k: v for k, v in dict(limits or {}).items() if v is not None}}
    c = complete(cfg)
    d = derive(p, c)
    sms = int(lim["num_sms"])
    regs = max(32, math.ceil(d.regs_est / 8) * 8)
    per_sm = max(1, min(2048 // d.threads, lim["regs_per_block"] // (d.threads * regs),
                        (228 * 1024) // (d.smem_bytes + 1024), 32))
    blocks = d.grid[0] * d.grid[1] * d.grid[2]
    slots = sms * per_sm
    waves = blocks / slots
    M, N = max(p.M, 1), max(p.N, 1)
    pad = (d.grid[1] * c["BM"]) * (d.grid[0] * c["BN"]) / (M * N)
    if c.get("MMA", 0):
        warp_reuse = c["WM"] * c["WN"] / (c["WM"] + c["WN"])
    else:
        warp_reuse = c["TM"] * c["TN"] / (c["TM"] + c["TN"])
    try:
        cycles = model_cycles(p, c, lim)
    except ZeroDivisionError:        # empty problems (M or N = 0): nothing to model
        cycles = 1.0
    return {
        "log2_threads": _log2(d.threads),
        "log2_smem": _log2(d.smem_bytes),
        "regs": float(d.regs_est),
        "blocks_per_sm": float(per_sm),
        "log2_blocks": _log2(blocks),
        "waves": waves,
        "wave_efficiency": blocks / (math.ceil(waves) * slots) if blocks else 0.0,
        "padding": pad,
        "block_reuse": c["BM"] * c["BN"] / (c["BM"] + c["BN"]),
        "warp_reuse": warp_reuse,
        "log2_k_chunk": _log2(d.k_chunk),
        "k_stages": d.k_chunk / max(d.KT, 1),
        "warps_per_block": d.threads / WARP,
        "log2_model_cycles": _log2(cycles),
    }
