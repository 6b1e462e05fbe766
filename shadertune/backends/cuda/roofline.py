"""The CUDA roofline model: min(FMA peak, DRAM bandwidth x the problem's arithmetic
intensity).  The ceilings are measured by microbench.py; CUDABackend's roofline()
and ceiling_lines() hooks call the functions here."""
from __future__ import annotations

import math
from collections.abc import Mapping

from ...core.problem import Problem
from ...core.roofline.bounds import flat, need, peak_line


def cuda_problem_roofline(problem, ceilings: Mapping) -> dict:
    """{'gflops', 'bound': 'memory'|'alu', 'intensity'}: min(FMA peak, BW x flops/byte).

    `problem` is a Problem or its dict; bytes are the fewest a kernel must move."""
    p = problem if isinstance(problem, Problem) else Problem.from_dict(problem)
    c = flat(ceilings)
    # FP64 problems are bound by the FP64 peak where it was measured.
    alu_key = "cuda_fma64_gflops" if p.dtype == "float64" and "cuda_fma64_gflops" in c else "cuda_fma_gflops"
    alu = need(c, alu_key)
    bw = need(c, "cuda_dram_gbs")
    intensity = p.flops / p.bytes if p.bytes else math.inf
    mem = bw * intensity
    if mem < alu:
        return {"gflops": mem, "bound": "memory", "intensity": intensity}
    return {"gflops": alu, "bound": "alu", "intensity": intensity}


def cuda_ceiling_lines(ceilings: Mapping) -> list[tuple[str, float]]:
    """The CUDA FMA peak (FP32)."""
    return peak_line(flat(ceilings), "cuda_fma_gflops", "CUDA FMA peak")
