"""GL arrays: matrices that stay on the GPU between products (the GL backend's own arrays).

    >>> import numpy as np, shadertune, shadertune.gl as gl
    >>> A = gl.asarray(np.eye(3, dtype=np.float32))     # one upload
    >>> C = shadertune.matmul(A, A)                     # a GL array: nothing came back
    >>> C.numpy()[0, 0]                                 # one read-back
    np.float32(1.0)

An array lives in a storage buffer of the GL context that ``shadertune.matmul``
uses in the calling thread (one per thread and device_index: docs/threads.md), so
chained products never cross the bus: GL arrays in give a GL array out; ``out=`` a
GL array (or a view of one, ``C[k:, k:]``) is written where it lies; ``alpha`` and
``beta`` make ``C -= A @ B`` one call.  Views (basic slicing, ``.T``) share the
buffer.  The storage goes back to the backend's texture pool when the last array
that uses it does (or at ``release()``).  An array is used in the thread that made
it; from another thread it raises ContextError.  docs/gl.md, "GL arrays".
"""
from __future__ import annotations

from typing import Any

from .front.matmul import backend as _backend
from .backends.gl.platform.arrays import GLArray
from .backends.gl.platform.arrays import asarray as _asarray
from .backends.gl.platform.arrays import empty as _empty
from .backends.gl.platform.arrays import zeros as _zeros

__all__ = ["GLArray", "asarray", "empty", "zeros", "home"]


def home(device_index: int | None = None) -> Any:
    """Where this thread's GL arrays live on `device_index`: the ArrayHome of the GL
    backend ``shadertune.matmul`` uses here (its context, texture pool and transfers)."""
    be = _backend("gl", device_index)
    return be.arrays  # type: ignore[attr-defined]


def asarray(x: Any, dtype: Any = None, *, device_index: int | None = None) -> GLArray:
    """``x`` as a GL array: uploaded once (float32), or ``x`` itself where it is a GL
    array of this thread's context.

    Parameters
    ----------
    x : array_like
        Real values of 0, 1 or 2 dimensions (numpy arrays, lists, CuPy arrays, ...).
        float64 values are stored in float32 and warn
        (:class:`shadertune.errors.PrecisionWarning`) unless ``dtype`` says float32.
    dtype : float32, optional
        GL arrays hold float32; anything else raises TypeError.
    device_index : int, optional
        Which GPU's context (the EGL device), as ``shadertune.matmul`` takes it.
    """
    return _asarray(home(device_index), x, dtype)


def empty(shape: Any, dtype: Any = None, *, device_index: int | None = None) -> GLArray:
    """A new GL array of ``shape`` (int or tuple, at most 2 dimensions), its values
    whatever its buffer held."""
    return _empty(home(device_index), shape, dtype)


def zeros(shape: Any, dtype: Any = None, *, device_index: int | None = None) -> GLArray:
    """A new GL array of ``shape`` filled with zeros on the GPU."""
    return _zeros(home(device_index), shape, dtype)
