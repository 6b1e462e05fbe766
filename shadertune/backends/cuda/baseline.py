"""cuBLAS through CuPy as the baseline, in plain fp32/fp64 (TF32 off)."""
from __future__ import annotations

import os

import numpy as np

from ...core.problem import Problem
from .device import import_cupy
from .timing import event_times


def plain_fp32():
    """Make cupy.matmul call cuBLAS with CUBLAS_COMPUTE_32F (no TF32).

    CuPy's default compute type for float32 is plain fp32 unless CUPY_TF32>0;
    it is set explicitly here so that an inherited environment cannot turn
    the baseline into a TF32 one. NVIDIA_TF32_OVERRIDE=1 would also force
    TF32 inside cuBLAS, so it is refused."""
    cupy = import_cupy()
    if os.environ.get("NVIDIA_TF32_OVERRIDE", "0") not in ("", "0"):
        raise RuntimeError("NVIDIA_TF32_OVERRIDE is set: cuBLAS would use TF32; unset it")
    from cupy._core import _routines_linalg as linalg
    linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_DEFAULT)
    return cupy


def operands(problem: Problem, seed: int = 0):
    """Fresh random operands on the device in their stored layouts (never zeros)."""
    cp = import_cupy()
    rs = cp.random.RandomState(seed)
    p = problem
    sa, sb = p.stored_shapes
    A = rs.uniform(-1, 1, sa).astype(p.dtype)
    B = rs.uniform(-1, 1, sb).astype(p.dtype)
    return A, B


def op(x, trans: bool):
    """The operand as op() sees it: a stored matrix (or stack) transposed by
    its trans flag, as a view."""
    return x.swapaxes(-1, -2) if trans else x


def cublas_gemm(problem: Problem, A, B, out=None):
    cp = plain_fp32()
    return cp.matmul(op(A, problem.trans_a), op(B, problem.trans_b), out=out)


def cublas_time(problem: Problem, repeats: int = 20, warmup: int = 3, operands_=None,
                hold_stream: bool = True) -> list[float]:
    """Milliseconds of `repeats` cuBLAS GEMMs (cupy.matmul on the transposed
    views, so cuBLAS gets the op flags and no copy is made; a batch runs as
    one strided-batched call), CUDA events, queued behind a spin kernel
    unless `hold_stream` is False (see hold.py)."""
    cp = plain_fp32()
    A, B = operands_ if operands_ is not None else operands(problem)
    out = cp.empty(problem.out_shape, dtype=problem.dtype)
    a, b = op(A, problem.trans_a), op(B, problem.trans_b)
    return event_times(lambda: cp.matmul(a, b, out=out), repeats, warmup=warmup, hold_stream=hold_stream)
