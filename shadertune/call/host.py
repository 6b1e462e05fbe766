"""Running a checked matmul call on host (numpy) arrays, one 2-D product at a time.

The path of every backend that computes from host memory (GL; CUDA until it
takes device arrays): the operands are converted to the compute dtype once
(not once per matrix of a batch), empty and K = 0 calls are answered without a
kernel, and each 2-D product writes straight into the caller's `out` when out
has the compute dtype and shares no memory with A or B (numpy's in-place
`a @= b` does share it: then the result is made apart and copied in).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .inputs import MatmulCall

# product(A, B, C, dest): dest[...] = alpha * A @ B + beta * C for one 2-D product.
# A (M, K), B (K, N) and C (M, N, or None when beta == 0) are C-contiguous arrays
# of the compute dtype; dest is an (M, N) array of that dtype, possibly a strided
# view into the caller's out.
Product = Callable[[np.ndarray, np.ndarray, "np.ndarray | None", np.ndarray], None]


def to_host(x) -> np.ndarray:
    """x as a numpy array: a device array is copied to the host (CuPy's .get(), PyTorch's .cpu())."""
    if isinstance(x, np.ndarray):
        return x
    get = getattr(x, "get", None)
    if callable(get):
        return np.asarray(get())
    cpu = getattr(x, "cpu", None)
    if callable(cpu):
        return np.asarray(cpu())
    a = np.asarray(x)
    if a.dtype == object:
        raise TypeError(f"matmul: a {type(x).__name__} lives on a GPU and has neither .get() (CuPy) "
                        f"nor .cpu() (PyTorch) to copy it to the host: use backend='cuda', which "
                        f"reads it in place, or pass a host array")
    return a


def promoted(x, call: MatmulCall):
    """A view of x (shaped like numpy's result) as batch + (M, N): the axes a 1-D input
    dropped put back (indexing with None never copies)."""
    if call.squeeze_a and call.squeeze_b:
        return x[..., None, None]
    if call.squeeze_a:
        return x[..., None, :]
    if call.squeeze_b:
        return x[..., :, None]
    return x


def host_operands(call: MatmulCall) -> tuple[np.ndarray, np.ndarray]:
    """A as (batch..., M, K) and B as (batch..., K, N), C-contiguous in the compute dtype
    before broadcasting (a broadcast operand is converted once, not per matrix)."""
    dtype = np.dtype(call.dtype)
    a = np.ascontiguousarray(to_host(call.a.value), dtype)
    b = np.ascontiguousarray(to_host(call.b.value), dtype)
    a = a[None, :] if call.squeeze_a else a
    b = b[:, None] if call.squeeze_b else b
    return (np.broadcast_to(a, call.batch + (call.M, call.K)),
            np.broadcast_to(b, call.batch + (call.K, call.N)))


def accumulator(call: MatmulCall) -> np.ndarray | None:
    """C = out's old values as batch + (M, N) in the compute dtype (None when beta == 0:
    BLAS convention, out is not read)."""
    if call.beta == 0.0:
        return None
    return np.asarray(promoted(to_host(call.out), call), np.dtype(call.dtype))


def destination(call: MatmulCall) -> tuple[np.ndarray, bool]:
    """(the array the products are written into as batch + (M, N), whether it is the
    caller's out itself): out where it has the compute dtype and shares no memory with
    A or B (numpy's in-place `a @= b` does share it), else a new array."""
    dtype = np.dtype(call.dtype)
    out = call.out
    direct = (isinstance(out, np.ndarray) and out.dtype == dtype
              and not any(np.may_share_memory(out, op.value) for op in (call.a, call.b)
                          if isinstance(op.value, np.ndarray)))
    return (promoted(out, call) if direct else np.empty(call.full_shape, dtype)), direct


def deliver(call: MatmulCall, res: np.ndarray, direct: bool):
    """The call's result from `res` (see destination): out, filled, or a new array."""
    if call.out is None:
        return res.reshape(call.shape)
    if not direct:
        call.out[...] = res.reshape(call.shape)
    return call.out


def run_on_host(call: MatmulCall, product: Product):
    """Execute `call` with `product` per 2-D matrix; returns out (filled) or a new array
    of numpy.matmul's shape in the compute dtype."""
    A, B = host_operands(call)
    C = accumulator(call)
    res, direct = destination(call)
    if res.size:
        if call.K == 0:                   # an empty sum: beta * C
            res[...] = 0.0 if C is None else call.beta * C
        else:
            for idx in np.ndindex(*call.batch):
                product(np.ascontiguousarray(A[idx]), np.ascontiguousarray(B[idx]),
                        None if C is None else np.ascontiguousarray(C[idx]), res[idx])
    return deliver(call, res, direct)
