"""The compute family's roofline: the compute FMA peak, or the operand traffic its
tiles cause at the measured bandwidth."""
from __future__ import annotations

from collections.abc import Mapping

from ....core.problem import Problem
from ....core.roofline.bounds import flat, need
from .layout import ComputeLayout


def compute_roofline(config: Mapping, ceilings: Mapping, problem: Problem) -> dict:
    """The bound of a compute config given measured ceilings (the KernelPath hook): the
    compute FMA peak, or the operand traffic its tiles cause at the measured bandwidth
    where one was measured ('compute_fma_gflops', 'cuda_dram_gbs'); flops per byte moved."""
    if problem is None:
        raise ValueError("a compute config's roofline needs its problem (the tiles' traffic)")
    L = ComputeLayout.plan(problem, config)
    c = flat(ceilings)
    alu = need(c, "compute_fma_gflops")
    moved = 4 * L.batch * (L.tiles_n * L.M * L.K + L.tiles_m * L.K * L.N) + 4 * L.c_floats
    intensity = problem.flops / moved
    bw = c.get("cuda_dram_gbs")
    if isinstance(bw, (int, float)) and bw > 0 and bw * intensity < alu:
        return {"gflops": bw * intensity, "bound": "memory", "flops_per_byte": intensity}
    return {"gflops": float(alu), "bound": "alu", "flops_per_byte": intensity}
