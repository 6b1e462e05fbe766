"""Measured ceilings (the roofline) and the models that say which one bounds a kernel.

    ceil = measure_gl(ctx)            # fragment FMA peak, texel-fetch rate, compute FMA peak
    ceil = merge(ceil, measure_cuda())  # + CUDA FMA peak and DRAM bandwidth, if a GPU is there
    save("results/ceilings.json", ceil)
    gl_config_roofline(config, ceil) -> {"gflops", "bound", "flops_per_fetch"}
"""
from .model import (best_gl_roofline, ceilings_are_a_roofline, cuda_problem_roofline, flops_per_fetch,
                    gl_config_roofline, gl_fetch_counts, gl_image_load_counts)
from .store import UNITS, CeilingsError, load, merge, save


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
           "best_gl_roofline", "gl_image_load_counts", "ceilings_are_a_roofline", "CeilingsError", "UNITS"]
