"""Operand checking for matmul(): numpy.matmul semantics with clear errors.

Shared by every backend: shapes, dtypes, 1-D promotion, stacking (broadcast
batch dimensions), alpha/beta and `out`.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np


@dataclass
class Operands:
    A: np.ndarray            # (..., M, K), float dtype chosen by the backend
    B: np.ndarray            # (..., K, N)
    C: np.ndarray | None     # (..., M, N) or None when beta == 0
    alpha: float
    beta: float
    batch: tuple             # broadcast batch shape ((), for plain 2-D)
    shape: tuple             # shape of the result numpy.matmul would give
    M: int
    N: int
    K: int
    squeeze_a: bool          # A was 1-D: drop the M axis from the result
    squeeze_b: bool          # B was 1-D: drop the N axis


def _as_real_array(x, name: str) -> np.ndarray:
    if isinstance(x, (str, bytes)):
        raise TypeError(f"matmul: {name} must be a real numeric array, got {type(x).__name__}")
    # CuPy arrays and other array-likes come to the host through __array__ / .get().
    if not isinstance(x, np.ndarray) and hasattr(x, "get") and hasattr(x, "__cuda_array_interface__"):
        x = x.get()
    try:
        a = np.asarray(x)
    except Exception as e:
        raise TypeError(f"matmul: {name} could not be converted to an array: {e}") from None
    k = a.dtype.kind
    if k == "c":
        raise TypeError(f"matmul: complex input is not supported ({name} has dtype {a.dtype})")
    if k not in "biuf":
        raise TypeError(f"matmul: {name} must be a real numeric array, got dtype {a.dtype}")
    check_ndim(a.shape, name)
    return a


def check_ndim(shape: tuple, name: str) -> None:
    if len(shape) == 0:
        raise ValueError(f"matmul: {name} must be at least 1-D (numpy.matmul does not take scalars), "
                         f"got shape {shape}")


@dataclass
class Shapes:
    """numpy.matmul's shapes for operands of shapes a and b (see core_shapes)."""
    M: int
    N: int
    K: int
    batch: tuple             # broadcast batch shape
    shape: tuple             # the result's shape
    squeeze_a: bool          # A was 1-D (a row: M = 1, dropped from the result)
    squeeze_b: bool          # B was 1-D (a column: N = 1, dropped)


def core_shapes(a_shape: tuple, b_shape: tuple) -> Shapes:
    """M, N, K, the broadcast batch and the result shape of A @ B by
    numpy.matmul's rules; numpy-style ValueErrors for misfits."""
    check_ndim(a_shape, "A")
    check_ndim(b_shape, "B")
    squeeze_a, squeeze_b = len(a_shape) == 1, len(b_shape) == 1
    a2 = (1,) + tuple(a_shape) if squeeze_a else tuple(a_shape)
    b2 = tuple(b_shape) + (1,) if squeeze_b else tuple(b_shape)
    M, K = a2[-2:]
    K2, N = b2[-2:]
    if K != K2:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
            f"(size {K2} is different from {K}): shapes A{tuple(a_shape)} and B{tuple(b_shape)} are not aligned")
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2]) if len(a2) > 2 or len(b2) > 2 else ()
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of A{tuple(a_shape)} and B{tuple(b_shape)} "
                         f"cannot be broadcast together") from None
    shape = batch + ((M,) if not squeeze_a else ()) + ((N,) if not squeeze_b else ())
    return Shapes(M, N, K, batch, shape, squeeze_a, squeeze_b)


def _scalar(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        if isinstance(x, np.generic) and x.dtype.kind in "iuf":
            return float(x)
        raise TypeError(f"matmul: {name} must be a real number, got {x!r}")
    return float(x)


def check_operands(A, B, C=None, *, alpha=1.0, beta=0.0, dtype=np.float32) -> Operands:
    """Validate and convert inputs; raise numpy-style ValueError/TypeError."""
    a = _as_real_array(A, "A")
    b = _as_real_array(B, "B")
    alpha = _scalar(alpha, "alpha")
    beta = _scalar(beta, "beta")
    sh = core_shapes(a.shape, b.shape)
    M, N, K, batch, shape, squeeze_a, squeeze_b = (sh.M, sh.N, sh.K, sh.batch, sh.shape,
                                                   sh.squeeze_a, sh.squeeze_b)
    a2 = a[None, :] if squeeze_a else a
    b2 = b[:, None] if squeeze_b else b
    cast = np.dtype(dtype)
    a2 = np.ascontiguousarray(np.broadcast_to(a2, batch + (M, K)), dtype=cast)
    b2 = np.ascontiguousarray(np.broadcast_to(b2, batch + (K, N)), dtype=cast)
    c2 = None
    if beta != 0.0:
        if C is None:
            raise ValueError("matmul: beta != 0 needs C (pass it as `out=` or `C=`)")
        c = _as_real_array(C, "C")
        full = batch + (M, N)
        try:
            c2 = np.ascontiguousarray(np.broadcast_to(c.reshape(shape) if c.shape == shape else c, full),
                                      dtype=cast)
        except ValueError:
            raise ValueError(f"matmul: C has shape {c.shape}, expected {shape} for A{a.shape} @ B{b.shape}") from None
    return Operands(a2, b2, c2, alpha, beta, batch, shape, M, N, K, squeeze_a, squeeze_b)


def check_out(out, shape: tuple, dtype) -> None:
    if out is None:
        return
    if not isinstance(out, np.ndarray):
        raise TypeError(f"matmul: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"matmul: out has shape {out.shape}, expected {shape}")
    if out.dtype != np.dtype(dtype):
        raise TypeError(f"matmul: out must have dtype {np.dtype(dtype)}, got {out.dtype}")
    if not out.flags.writeable:
        raise ValueError("matmul: out is read-only")
