"""What the learned performance model derives from a GL config (Backend.model_features):
the quantities a fragment's speed is written in (passes, fragments, outputs per
fragment, fetches, padding), and a compute config's (workgroups, waves, residency,
registers, traffic per FMA, splits) and the analytical model's time, which the
learner corrects rather than replaces.  Every config gets every name: the other
family's read 0, and `compute` says which family it is.

The function reads the problem, the config and the device limits saved with the
model (never a GPU context) and returns the same names for every config; the
learner finds how they combine on the device (shadertune/perfmodel/features.py).
"""
from __future__ import annotations

from ...config import Config
from ...problem import Problem
from ..base import ModelFeatures, log2_count as _log2
from .codegen import is_image, plan_layout
from .compute_layout import ComputeLayout
from .compute_model import predict_ms, residency
from .space import with_defaults


_FRAGMENT = ("log2_passes", "np_effective", "log2_fragments", "outputs_per_fragment",
             "log2_fragment_passes", "unrolled_body", "log2_fetches", "macs_per_fetch", "padding",
             "log2_largest_texture")
_COMPUTE = ("log2_workgroups", "waves", "resident", "threads", "registers", "log2_shared_bytes",
            "global_floats_per_fma", "shared_bytes_per_fma", "splits", "compute_passes")


def gl_features(p: Problem, cfg: Config, limits) -> dict:
    """The fragment family's features (fragment_features) or the compute family's
    (compute_features), the other family's names at 0, and the analytical model's
    log2 time (a feature: on GL the learned model keeps its plain target)."""
    cfg = with_defaults(cfg)
    compute = cfg.get("family") == "compute"
    own = compute_features(p, cfg, limits) if compute else fragment_features(p, cfg)
    out = {"compute": float(compute)}
    out.update({k: own.get(k, 0.0) for k in _FRAGMENT + _COMPUTE})
    out["log2_model_cycles"] = _log2(predict_ms(p, [cfg], limits)[0] * 1e6)
    return out


def compute_features(p: Problem, cfg: Config, limits) -> dict:
    """A compute config: its grid, residency and traffic (compute_layout, compute_model)."""
    L = ComputeLayout.of(p, cfg)
    resident = residency(L, limits)
    units = max(1, int(limits.get("compute_units", 1)))
    return {"log2_workgroups": _log2(L.workgroups),
            "waves": L.workgroups / (units * resident),
            "resident": float(resident), "threads": float(L.threads),
            "registers": float(L.registers), "log2_shared_bytes": _log2(L.shared_bytes),
            "global_floats_per_fma": L.global_floats_per_fma(),
            "shared_bytes_per_fma": L.shared_bytes_per_fma(),
            "splits": float(L.ks), "compute_passes": float(L.passes)}


def fragment_features(p: Problem, cfg: Config) -> dict:
    """Per pass one draw of hc x wc fragments.  The MRT path (Jiang's): each fragment
    computes mrt_h x mrt_w C texels, fetching mrt_h A texels and mrt_w * b_sub B
    texels per k-step.  The image path: each fragment owns a block_h x block_w block
    of C and reads block_h A texels and block_w B texels per 4-k step."""
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
