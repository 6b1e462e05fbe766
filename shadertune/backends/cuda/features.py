"""What the learned performance model derives from a CUDA config (Backend.model_features):
block tiles over the SMs (waves, occupancy), the reuse of a block and a
warp/thread tile, split-K, and the analytical model's cycles, which are the
residual target's baseline.

The function reads the problem, the config and the device limits saved with the
model (never a GPU context) and returns the same names for every config; the
learner finds how they combine on the device (shadertune/perfmodel/features.py).
"""
from __future__ import annotations

import math

from ...core.config import Config
from ...core.problem import Problem
from ..base import ModelFeatures, log2_count as _log2
from .device import DEFAULT_LIMITS
from .space import WARP, complete, derive
from .tuning import model_cycles


def cuda_features(p: Problem, cfg: Config, limits) -> dict:
    """The generated CUDA GEMM: block tiles over the SMs (waves, occupancy), the
    reuse of a block and a thread/warp tile, split-K, and the analytical
    model's cycles (backends/cuda/tuning.py) as one more input."""
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


CUDA_MODEL_FEATURES = ModelFeatures(cuda_features, baseline="log2_model_cycles")
