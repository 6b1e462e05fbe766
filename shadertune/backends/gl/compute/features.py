"""What the learned model derives from a compute config (KernelPath.features): its
grid, residency and traffic (layout.py, model.py)."""
from __future__ import annotations

from ....core.config import Config
from ....core.problem import Problem
from ...base import log2_count as _log2
from .layout import ComputeLayout
from .model import residency


def features(p: Problem, cfg: Config, limits) -> dict:
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
