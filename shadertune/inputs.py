"""Checking a matmul call: numpy.matmul semantics with numpy-style errors.

check_call() reads shapes and dtypes and checks everything that does not
depend on the backend's way of computing: 1-D promotion, broadcast batch
dimensions (to `out`'s when given, as numpy does), alpha/beta, `out`'s shape,
dtype (numpy's same-kind casting) and writability.  It converts nothing that
lives on a GPU: a device array (one with __cuda_array_interface__) stays as
given, so a backend can use it in place.  The result is a MatmulCall, what a
backend's run_call() hook executes.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from .problem import Problem


@dataclass(frozen=True)
class Operand:
    """One input as the caller gave it.  Host inputs are numpy arrays (converted once
    here); a device array is left as it is (`device` True) with its shape and dtype."""
    value: Any
    shape: tuple
    dtype: np.dtype
    device: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class MatmulCall:
    """One checked call: alpha * A @ B + beta * out, numpy.matmul's shapes and dtypes.

    a, b       the inputs, not yet promoted (1-D stays 1-D: squeeze_a / squeeze_b)
    out        the caller's output array or None; when beta != 0 it is also C
    batch      the broadcast batch shape of the result (out's when given)
    M, N, K    the core sizes after 1-D promotion
    result_dtype  the dtype numpy.matmul gives for these inputs
    dtype      the dtype the backend computes in (the problem's): 'float32' or 'float64'
    logical    bool @ bool: numpy's logical OR of ANDs (computed as counts > 0)
    wrap       the ndarray-subclass input (np.matrix, ...) whose __array_wrap__ numpy
               would apply to the result, or None
    """
    a: Operand
    b: Operand
    out: Any
    alpha: float
    beta: float
    batch: tuple
    M: int
    N: int
    K: int
    squeeze_a: bool
    squeeze_b: bool
    result_dtype: np.dtype
    dtype: str
    logical: bool = False
    wrap: Any = None

    @property
    def shape(self) -> tuple:
        """The shape of numpy.matmul's result."""
        return self.batch + (() if self.squeeze_a else (self.M,)) + (() if self.squeeze_b else (self.N,))

    @property
    def full_shape(self) -> tuple:
        """The result with 1-D inputs promoted: batch + (M, N)."""
        return self.batch + (self.M, self.N)

    @property
    def problem(self) -> Problem:
        return Problem(self.M, self.N, self.K, self.dtype)

    @property
    def where(self) -> str:
        """The caller's shapes, for messages: 'A(3, 4) @ B(4, 5)'."""
        return f"A{self.a.shape} @ B{self.b.shape}"


# --- operands ----------------------------------------------------------------
def is_device_array(x) -> bool:
    """Whether x lives on a GPU (CuPy, PyTorch CUDA tensors, Numba, ...)."""
    return not isinstance(x, np.ndarray) and hasattr(x, "__cuda_array_interface__")


def _operand(x, name: str) -> Operand:
    if isinstance(x, (str, bytes)):
        raise TypeError(f"matmul: {name} must be a real numeric array, got {type(x).__name__}")
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"matmul: {name} is a masked array; shadertune does not honour masks "
                        f"(numpy.matmul computes with the hidden values): pass np.ma.filled({name}, 0) "
                        f"to count masked entries as zero, or {name}.data to use them")
    if is_device_array(x):
        iface = x.__cuda_array_interface__
        op = Operand(x, tuple(int(s) for s in iface["shape"]), np.dtype(iface["typestr"]), device=True)
    else:
        a = np.asarray(x)     # errors raised by x.__array__ are the caller's: they pass through
        op = Operand(a, a.shape, a.dtype)
    _check_dtype(op.dtype, name)
    if op.ndim == 0:
        raise ValueError(f"matmul: {name} must be at least 1-D (numpy.matmul does not take scalars), "
                         f"got shape {op.shape}")
    return op


def _check_dtype(dtype: np.dtype, name: str) -> None:
    if dtype.kind == "c":
        raise TypeError(f"matmul: complex input is not supported ({name} has dtype {dtype})")
    if dtype.kind not in "biuf":
        raise TypeError(f"matmul: {name} must be a real numeric array, got dtype {dtype}")


def real_scalar(x, name: str) -> float:
    """A Python or numpy real number, or a 0-d real array (bool is refused: it is not a scale)."""
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf":
        return float(x)
    if isinstance(x, np.generic) and x.dtype.kind in "iuf":
        return float(x)
    if isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)):
        return float(x)
    raise TypeError(f"matmul: {name} must be a real number, got {x!r}")


# --- the call ------------------------------------------------------------------
def check_call(A, B, out=None, *, alpha=1.0, beta=0.0, dtypes=("float32",)) -> MatmulCall:
    """Check one call; `dtypes` are the compute dtypes the backend offers (float64 is
    used where numpy's result would be float64 or wider and the backend has it)."""
    a = _operand(A, "A")
    b = _operand(B, "B")
    alpha = real_scalar(alpha, "alpha")
    beta = real_scalar(beta, "beta")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    a_shape = (1,) + a.shape if squeeze_a else a.shape
    b_shape = b.shape + (1,) if squeeze_b else b.shape
    M, K = a_shape[-2:]
    K2, N = b_shape[-2:]
    if K != K2:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
            f"(size {K2} is different from {K}): shapes A{a.shape} and B{b.shape} are not aligned")
    try:
        batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of A{a.shape} and B{b.shape} "
                         f"cannot be broadcast together") from None
    result_dtype = np.result_type(a.dtype, b.dtype)
    logical = result_dtype == np.bool_
    if logical and (alpha != 1.0 or beta != 0.0):
        raise TypeError("matmul: alpha and beta need numeric inputs: bool @ bool is numpy's "
                        "logical OR of ANDs, which has no scale")
    wide = result_dtype.kind == "f" and result_dtype.itemsize >= 8
    dtype = "float64" if wide and "float64" in dtypes else "float32"
    core = (() if squeeze_a else (M,)) + (() if squeeze_b else (N,))
    if out is not None:
        batch = _check_out(out, batch, core, result_dtype, logical, beta)
    elif beta != 0.0:
        raise ValueError("matmul: beta != 0 adds beta * out to the product: pass the array to "
                         "add as out= (it also receives the result)")
    return MatmulCall(a, b, out, alpha, beta, tuple(batch), int(M), int(N), int(K), squeeze_a,
                      squeeze_b, result_dtype, dtype, logical, _wrapper(A, B))


def _check_out(out, batch: tuple, core: tuple, result_dtype: np.dtype, logical: bool,
               beta: float) -> tuple:
    """out's batch shape, after numpy's checks: core dimensions equal, the inputs'
    batch broadcast to out's, numpy's result dtype cast to out's by same-kind rules."""
    if isinstance(out, np.ma.MaskedArray):
        raise TypeError("matmul: out is a masked array; shadertune does not honour masks")
    if isinstance(out, np.ndarray):
        shape, dtype = out.shape, out.dtype
        if not out.flags.writeable:
            raise ValueError("matmul: output array is read-only")
    elif is_device_array(out):
        iface = out.__cuda_array_interface__
        shape, dtype = tuple(int(s) for s in iface["shape"]), np.dtype(iface["typestr"])
    else:
        raise TypeError(f"matmul: out must be an array (numpy.ndarray, or a device array for "
                        f"the cuda backend), got {type(out).__name__}")
    nc = len(core)
    expected = batch + core
    if len(shape) < len(expected) or tuple(shape[len(shape) - nc:]) != core:
        raise ValueError(f"matmul: out has shape {tuple(shape)}, expected {expected} "
                         f"(Output operand 0 has a mismatch in its core dimensions)")
    out_batch = tuple(shape[:len(shape) - nc])
    try:
        ok = np.broadcast_shapes(batch, out_batch) == out_batch
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"matmul: non-broadcastable output operand with shape {tuple(shape)} "
                         f"doesn't match the broadcast shape {expected}")
    if not np.can_cast(result_dtype, dtype, "same_kind"):
        raise TypeError(f"matmul: Cannot cast ufunc 'matmul' output from {result_dtype!r} to "
                        f"{dtype!r} with casting rule 'same_kind'")
    if not logical and dtype.kind not in "fc":
        raise TypeError(f"matmul: out has dtype {dtype}, but shadertune computes in floating point "
                        f"(numpy would give an exact integer result): give out a floating dtype")
    if beta != 0.0 and dtype.kind == "c":
        raise TypeError("matmul: beta != 0 with a complex out: shadertune computes real products "
                        "and would add only out's real part; add beta * out yourself")
    return out_batch


def _wrapper(*xs):
    """The ndarray subclass input numpy would wrap the result with (highest
    __array_priority__ first), or None: np.matrix in, np.matrix out."""
    subs = [x for x in xs if isinstance(x, np.ndarray) and type(x) is not np.ndarray]
    if not subs:
        return None
    return max(subs, key=lambda x: getattr(x, "__array_priority__", 0.0))
