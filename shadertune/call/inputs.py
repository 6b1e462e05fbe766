"""Checking a matmul call: numpy.matmul semantics with numpy-style errors.

check_call() reads shapes and dtypes and checks everything that does not
depend on the backend's way of computing: 1-D promotion, broadcast batch
dimensions (to `out`'s when given, as numpy does), alpha/beta, `out`'s shape,
dtype (numpy's same-kind casting) and writability.  It converts nothing that
lives on a GPU: a device array (CuPy, a PyTorch CUDA tensor, anything with
__cuda_array_interface__ or CUDA DLPack; shadertune.call.device_arrays) stays as
given, so a backend can use it in place, and so does an array that lives in a
backend's own memory (a GL array: its type names the backend in
`__shadertune_resident__`).  The result is a MatmulCall, what a
backend's run_call() hook executes.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.frozen import quick_init
from .device_arrays import ArrayInfo, describe_device, host_array
from ..core.problem import Problem

_SHAPES: dict = {}       # what check_call derives from shapes and dtypes alone, per signature
_SHAPES_MAX = 4096


@quick_init
@dataclass(frozen=True)
class Operand:
    """One input as the caller gave it.  Host inputs are numpy arrays (converted once
    here); a device array is left as it is (`device` True) with its shape and dtype,
    and `info` says where its elements lie (device_arrays.ArrayInfo); an array of a
    backend's own (`resident`: the backend's name, e.g. 'gl') is left as it is too,
    without an info (its backend reads it)."""
    value: Any
    shape: tuple
    dtype: np.dtype
    device: bool = False
    info: ArrayInfo | None = None
    resident: str | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)


@quick_init
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
    resident   the backend whose own arrays (A, B or out) take part ('gl'), or None
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
    resident: str | None = None

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
def _device_dtype(info: ArrayInfo, name: str) -> np.dtype:
    """A device array's numpy dtype (bfloat16 and other types numpy lacks: TypeError)."""
    if info.shape is None:
        raise TypeError(f"matmul: {name} is a CUDA DLPack object that states no shape: pass "
                        f"cupy.from_dlpack({name}) or torch.from_dlpack({name})")
    if isinstance(info.dtype, np.dtype):
        return info.dtype
    raise TypeError(f"matmul: {name} has dtype {info.dtype}, which shadertune does not compute with "
                    f"(float32 and float64 only): cast it first, e.g. {name}.float()")


def _operand(x, name: str) -> Operand:
    resident = getattr(type(x), "__shadertune_resident__", None)
    if resident is not None:          # a backend's own array: its shape and dtype, read nothing
        op = Operand(x, tuple(x.shape), np.dtype(x.dtype), device=True, resident=resident)
        if op.ndim == 0:
            raise ValueError(f"matmul: {name} must be at least 1-D (numpy.matmul does not take scalars), "
                             f"got shape {op.shape}")
        return op
    if isinstance(x, (str, bytes)):
        raise TypeError(f"matmul: {name} must be a real numeric array, got {type(x).__name__}")
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"matmul: {name} is a masked array; shadertune does not honour masks "
                        f"(numpy.matmul computes with the hidden values): pass np.ma.filled({name}, 0) "
                        f"to count masked entries as zero, or {name}.data to use them")
    info = describe_device(x)
    if info is not None:
        op = Operand(x, info.shape, _device_dtype(info, name), device=True, info=info)
    else:
        a = host_array(x)     # errors raised by x.__array__ are the caller's: they pass through
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
    t = type(x)
    if t is float:
        return x
    if t is int:
        return float(x)
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf":
        return float(x)
    if isinstance(x, np.generic) and x.dtype.kind in "iuf":
        return float(x)
    if isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)):
        return float(x)
    raise TypeError(f"matmul: {name} must be a real number, got {x!r}")


# --- the call ------------------------------------------------------------------
def single_out(out: tuple[Any, ...]) -> Any:
    """numpy's tuple form of out: (C,) is C and (None,) is None, as a ufunc with one
    output takes them; a tuple of another length is numpy's ValueError."""
    if len(out) != 1:
        raise ValueError("matmul: The 'out' tuple must have exactly one entry per ufunc output")
    return out[0]


def check_call(A, B, out=None, *, alpha=1.0, beta=0.0, dtypes=("float32",)) -> MatmulCall:
    """Check one call; `dtypes` are the compute dtypes the backend offers (float64 is
    used where numpy's result would be float64 or wider and the backend has it).

    What follows from the shapes and dtypes alone (the core sizes, the batch, the
    result and compute dtypes, out's fit) is worked out once per signature and
    kept; what depends on this call's values (alpha, beta, out's writability) is
    checked every call."""
    a = _operand(A, "A")
    b = _operand(B, "B")
    alpha = real_scalar(alpha, "alpha")
    beta = real_scalar(beta, "beta")
    if out is None:
        key, out_sig, out_error = (a.shape, a.dtype, b.shape, b.dtype, dtypes), None, None
    else:
        out_sig, out_error = _out_of(out)
        key = (a.shape, a.dtype, b.shape, b.dtype, dtypes, out_sig, beta != 0.0)
    shapes = _SHAPES.get(key) if out_error is None else None
    if shapes is None:     # numpy's checks in numpy's order; a signature is kept once it passed
        shapes = _shapes(a, b, dtypes, out_sig, out_error, alpha, beta)
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[key] = shapes
    batch, M, N, K, squeeze_a, squeeze_b, result_dtype, dtype, logical = shapes
    if logical:
        _check_logical(alpha, beta)
    if out is None and beta != 0.0:
        raise ValueError("matmul: beta != 0 adds beta * out to the product: pass the array to "
                         "add as out= (it also receives the result)")
    resident = a.resident or b.resident or (None if out is None else
                                            getattr(type(out), "__shadertune_resident__", None))
    return MatmulCall(a, b, out, alpha, beta, batch, M, N, K, squeeze_a, squeeze_b,
                      result_dtype, dtype, logical, _wrapper(A, B), resident)


def _check_logical(alpha: float, beta: float) -> None:
    if alpha != 1.0 or beta != 0.0:
        raise TypeError("matmul: alpha and beta need numeric inputs: bool @ bool is numpy's "
                        "logical OR of ANDs, which has no scale")


def _shapes(a: Operand, b: Operand, dtypes, out_sig, out_error, alpha: float, beta: float) -> tuple:
    """(batch, M, N, K, squeeze_a, squeeze_b, result_dtype, dtype, logical) of a
    signature: numpy.matmul's rules on shapes and dtypes, its errors raised in its
    order (out's own error, found first, is raised where numpy would)."""
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    a_shape = (1,) + a.shape if squeeze_a else a.shape
    b_shape = b.shape + (1,) if squeeze_b else b.shape
    M, K = a_shape[-2:]
    K2, N = b_shape[-2:]
    if K != K2:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
            f"(size {K2} is different from {K}): shapes A{a.shape} and B{b.shape} are not aligned")
    try:   # (two matrices, the common call: no batch to broadcast)
        batch = () if len(a_shape) == len(b_shape) == 2 else np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of A{a.shape} and B{b.shape} "
                         f"cannot be broadcast together") from None
    result_dtype = np.result_type(a.dtype, b.dtype)
    logical = bool(result_dtype == np.bool_)
    if logical:
        _check_logical(alpha, beta)
    wide = result_dtype.kind == "f" and result_dtype.itemsize >= 8
    dtype = "float64" if wide and "float64" in dtypes else "float32"
    core = (() if squeeze_a else (M,)) + (() if squeeze_b else (N,))
    if out_error is not None:
        raise out_error
    if out_sig is not None:
        batch = _check_out(out_sig, batch, core, result_dtype, logical, beta)
    return (tuple(batch), int(M), int(N), int(K), squeeze_a, squeeze_b, result_dtype, dtype, logical)


def _out_of(out) -> tuple:
    """((shape, dtype), None) of out, after the checks of its kind and writability
    (every call), or (None, the error) for check_call to raise in numpy's order."""
    try:
        if isinstance(out, np.ma.MaskedArray):
            raise TypeError("matmul: out is a masked array; shadertune does not honour masks")
        if getattr(type(out), "__shadertune_resident__", None) is not None:
            return (tuple(out.shape), np.dtype(out.dtype)), None
        info = describe_device(out)
        if info is not None:
            shape, dtype = info.shape, _device_dtype(info, "out")
            if info.readonly:
                raise ValueError("matmul: output array is read-only")
        elif isinstance(out, np.ndarray):
            shape, dtype = out.shape, out.dtype
            if not out.flags.writeable:
                raise ValueError("matmul: output array is read-only")
        else:
            raise TypeError(f"matmul: out must be an array (numpy.ndarray, a device array for "
                            f"the cuda backend, or a GL array for the gl backend), got {type(out).__name__}")
    except Exception as e:   # noqa: BLE001 (raised again by check_call, after the inputs' checks)
        return None, e
    return (tuple(shape), dtype), None


def _check_out(out_sig: tuple, batch: tuple, core: tuple, result_dtype: np.dtype, logical: bool,
               beta: float) -> tuple:
    """out's batch shape, after numpy's checks: core dimensions equal, the inputs'
    batch broadcast to out's, numpy's result dtype cast to out's by same-kind rules."""
    shape, dtype = out_sig
    nc = len(core)
    expected = batch + core
    if len(shape) < len(expected) or tuple(shape[len(shape) - nc:]) != core:
        raise ValueError(f"matmul: out has shape {tuple(shape)}, expected {expected} "
                         f"(Output operand 0 has a mismatch in its core dimensions)")
    out_batch = tuple(shape[:len(shape) - nc])
    try:
        ok = batch == out_batch or np.broadcast_shapes(batch, out_batch) == out_batch
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


def _wrapper(A, B):
    """The ndarray subclass input numpy would wrap the result with (highest
    __array_priority__ first), or None: np.matrix in, np.matrix out."""
    ta, tb = type(A), type(B)
    if (ta is np.ndarray or not isinstance(A, np.ndarray)) and (tb is np.ndarray or not isinstance(B, np.ndarray)):
        return None
    subs = [x for x in (A, B) if isinstance(x, np.ndarray) and type(x) is not np.ndarray]
    return max(subs, key=lambda x: getattr(x, "__array_priority__", 0.0))
