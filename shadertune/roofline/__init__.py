"""Measured ceilings (the roofline) and the models that say which one bounds a kernel.

    ceil = measure_gl(ctx)            # fragment FMA peak, texel-fetch rate, compute FMA peak
    ceil = merge(ceil, measure_cuda())  # + CUDA FMA peak and DRAM bandwidth, if a GPU is there
    save("results/ceilings.json", ceil)
    gl_config_roofline(config, ceil) -> {"gflops", "bound", "flops_per_fetch"}

Backends own their models: Backend.roofline(problem, config, ceilings) and
Backend.ceiling_lines(ceilings) call the functions of model.py; a measurement
taken on a software renderer is flagged (store.software_reason) and is no roofline.
"""
from .model import (best_gl_roofline, cuda_ceiling_lines, cuda_problem_roofline, flops_per_fetch,
                    gl_ceiling_lines, gl_config_roofline, gl_fetch_counts, gl_image_load_counts)
from .store import UNITS, CeilingsError, load, mark_software, merge, save, software_reason


def measure_gl(ctx=None, quick=False, **kw) -> dict:
    from .gl import measure_gl as _m
    return _m(ctx, quick, **kw)


def measure_cuda(quick=False, **kw) -> dict:
    from .cuda import measure_cuda as _m
    return _m(quick, **kw)


def cuda_available() -> tuple[bool, str]:
    from .cuda import available
    return available()


__all__ = ["measure_gl", "measure_cuda", "cuda_available", "save", "load", "merge",
           "flops_per_fetch", "gl_fetch_counts", "gl_config_roofline", "cuda_problem_roofline",
           "best_gl_roofline", "gl_ceiling_lines", "cuda_ceiling_lines", "gl_image_load_counts",
           "mark_software", "software_reason", "CeilingsError", "UNITS"]
