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

from ...core.config import Config
from ...core.problem import Problem
from ..base import ModelFeatures, log2_count as _log2
from .paths import path_of, predict_ms
from .space import with_defaults


_FRAGMENT = ("log2_passes", "np_effective", "log2_fragments", "outputs_per_fragment",
             "log2_fragment_passes", "unrolled_body", "log2_fetches", "macs_per_fetch", "padding",
             "log2_largest_texture")
_COMPUTE = ("log2_workgroups", "waves", "resident", "threads", "registers", "log2_shared_bytes",
            "global_floats_per_fma", "shared_bytes_per_fma", "splits", "compute_passes")


def gl_features(p: Problem, cfg: Config, limits) -> dict:
    """The features of the config's path (KernelPath.features: a fragment path's from
    fragment.fragment_features, the compute family's), every other name at 0, which
    family it is, and the analytical model's log2 time (a feature: on GL the learned
    model keeps its plain target)."""
    cfg = with_defaults(cfg)
    path = path_of(cfg)
    own = path.features(p, cfg, limits)
    out = {"compute": float(path.family == "compute")}
    out.update({k: own.get(k, 0.0) for k in _FRAGMENT + _COMPUTE})
    out["log2_model_cycles"] = _log2(predict_ms(p, [cfg], limits)[0] * 1e6)
    return out


GL_MODEL_FEATURES = ModelFeatures(gl_features)
