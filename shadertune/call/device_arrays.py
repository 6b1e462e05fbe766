"""What kind of array an operand is, and where its elements lie, without
copying it or touching a GPU: numpy (host), CuPy, PyTorch, any object with
`__cuda_array_interface__` (CAI, versions 0-3) or CUDA DLPack.

`describe(x)` returns an ArrayInfo: the caller's kind, shape, strides in
elements, dtype, and for device arrays the device pointer, the device ordinal
where the object says it, the producer's stream (CAI v3) and whether it is
read-only.  The front door (inputs.py) reads shapes and dtypes from it and
leaves device arrays as they are; a backend that computes on the device (CUDA)
reads their memory in place through the same ArrayInfo.  A DLPack-only device
object is described from its `shape`, `dtype` and `__dlpack_device__` and
consumed later, by the backend (strides None until then), so every check can
run without a GPU (tests use fake objects exposing the interfaces); one that
states no shape is imported through CuPy at once (no copy), as a CuPy array.

Kinds: 'numpy' (host memory: numpy arrays, host DLPack), 'cupy', 'torch' (a
CUDA tensor), 'cai' (another CAI object), 'dlpack' (a CUDA DLPack object
without CAI).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.frozen import quick_init

# DLPack device types (dlpack.h): host memory, and memory a CUDA kernel can read.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_TYPESTRS: dict = {}     # CAI typestr -> numpy dtype (np.dtype(str) costs ~1 us a call)


@quick_init
@dataclass(frozen=True)
class ArrayInfo:
    kind: str                 # numpy | cupy | torch | cai | dlpack
    obj: Any                  # the caller's object (a numpy array for host kinds)
    shape: tuple | None       # None: a DLPack object that does not say
    strides: tuple | None     # in elements; None: not known yet (DLPack, consumed later)
    dtype: np.dtype | str     # numpy dtype, or a name numpy lacks ('bfloat16')
    ptr: int = 0              # device address of element 0 (0 on the host)
    device: int | None = None     # CUDA device ordinal, None on the host or not known without a GPU
    stream: int | None = None     # CAI v3: the stream the producer's work is queued on
    readonly: bool = False

    @property
    def on_device(self) -> bool:
        return self.kind != "numpy"


def _module_of(x) -> str:
    return type(x).__module__.split(".", 1)[0]


def describe_device(x) -> ArrayInfo | None:
    """The ArrayInfo of a device array, None for anything else (host memory)."""
    if type(x) is np.ndarray:
        return None
    mod = _module_of(x)
    if mod == "torch" and "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor):
        return _torch(x) if x.is_cuda else None
    if mod == "cupy" and "cupy" in sys.modules and isinstance(x, sys.modules["cupy"].ndarray):
        return _cupy(x)
    if isinstance(x, np.ndarray):
        return None
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai(x, cai)
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None and hasattr(x, "__dlpack__"):
        dev_type, dev_id = dl()
        if int(dev_type) in (DL_CUDA, DL_CUDA_MANAGED):
            shape = getattr(x, "shape", None)
            if shape is None and (consumed := _from_dlpack_with_cupy(x)) is not None:
                return _cupy(consumed)       # the only way to learn its shape: import it (no copy)
            return ArrayInfo("dlpack", x, None if shape is None else tuple(int(s) for s in shape), None,
                             _dtype_name(getattr(x, "dtype", None)), device=int(dev_id))
        if int(dev_type) not in (DL_CPU, DL_CUDA_HOST):
            raise TypeError(f"matmul: {type(x).__name__} lives on DLPack device type {int(dev_type)}, "
                            f"neither the host nor a CUDA GPU")
    return None


def _from_dlpack_with_cupy(x):
    """A CUDA DLPack object that states no shape, as a zero-copy CuPy array
    (the DLPack stream protocol makes CuPy's current stream wait for its
    producer); None where CuPy is not installed."""
    try:
        import cupy
    except ImportError:
        return None
    return cupy.from_dlpack(x)


def host_array(x) -> np.ndarray:
    """x as a numpy array: host DLPack objects without __array__ through
    np.from_dlpack, the rest through np.asarray (whose errors pass through)."""
    if isinstance(x, np.ndarray):
        return x
    if not hasattr(x, "__array__") and hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return np.from_dlpack(x)
    return np.asarray(x)


def describe_host(a: np.ndarray) -> ArrayInfo:
    it = a.dtype.itemsize or 1
    return ArrayInfo("numpy", a, a.shape, tuple(s // it for s in a.strides), a.dtype,
                     readonly=not a.flags.writeable)


def describe(x) -> ArrayInfo:
    """The ArrayInfo of any operand (host ones converted by host_array)."""
    info = describe_device(x)
    return info if info is not None else describe_host(host_array(x))


def _cupy(x) -> ArrayInfo:
    dtype = x.dtype
    it = dtype.itemsize
    st = x.strides
    strides = (st[0] // it, st[1] // it) if len(st) == 2 else tuple(s // it for s in st)
    mem = x.data          # a MemoryPointer: its address and device (x.device makes a Device)
    return ArrayInfo("cupy", x, x.shape, strides, dtype, mem.ptr, mem.device_id)


_TORCH_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
                 "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
                 "uint8": np.uint8, "bool": np.bool_, "complex64": np.complex64,
                 "complex128": np.complex128}


def _torch(x) -> ArrayInfo:
    tname = str(x.dtype).removeprefix("torch.")
    dt = _TORCH_DTYPES.get(tname)
    return ArrayInfo("torch", x, tuple(x.shape), tuple(x.stride()),
                     np.dtype(dt) if dt is not None else tname,
                     ptr=x.data_ptr(), device=x.device.index)


def _cai(x, cai: dict) -> ArrayInfo:
    name = type(x).__name__
    try:
        shape = tuple(int(s) for s in cai["shape"])
        ts = cai["typestr"]
        dtype = _TYPESTRS.get(ts)
        if dtype is None:
            dtype = _TYPESTRS.setdefault(ts, np.dtype(ts))
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise TypeError(f"matmul: the __cuda_array_interface__ of a {name} is malformed ({e})") from None
    if cai.get("mask") is not None:
        raise TypeError(f"matmul: a masked device array (__cuda_array_interface__ 'mask') is not supported")
    it = dtype.itemsize
    st = cai.get("strides")
    if st is None:           # C-contiguous
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        strides = tuple(reversed(strides))
    else:
        if any(int(s) % it for s in st):
            raise ValueError(f"matmul: the strides {tuple(st)} of a {name} are not multiples of its "
                             f"item size {it}")
        strides = tuple(int(s) // it for s in st)
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    return ArrayInfo("cai", x, shape, strides, dtype, ptr=int(ptr or 0),
                     stream=None if stream is None else int(stream), readonly=bool(readonly))


def _dtype_name(dt) -> np.dtype | str:
    if dt is None:
        return "unknown"
    try:
        return np.dtype(dt)
    except TypeError:
        return str(dt).rsplit(".", 1)[-1]
