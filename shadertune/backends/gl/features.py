"""What the learned performance model derives from a GL config (Backend.model_features):
the quantities a fragment's speed is written in (passes, fragments, outputs per
fragment, fetches, padding).

The function reads the problem, the config and the device limits saved with the
model (never a GPU context) and returns the same names for every config; the
learner finds how they combine on the device (shadertune/perfmodel/features.py).
"""
from __future__ import annotations

from ...config import Config
from ...problem import Problem
from ..base import ModelFeatures, log2_count as _log2
from .codegen import is_image, plan_layout
from .space import with_defaults


def gl_features(p: Problem, cfg: Config, limits) -> dict:
    """Per pass one draw of hc x wc fragments.  The MRT path (Jiang's): each fragment
    computes mrt_h x mrt_w C texels, fetching mrt_h A texels and mrt_w * b_sub B
    texels per k-step.  The image path: each fragment owns a block_h x block_w block
    of C and reads block_h A texels and block_w B texels per 4-k step."""
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


GL_MODEL_FEATURES = ModelFeatures(gl_features)
