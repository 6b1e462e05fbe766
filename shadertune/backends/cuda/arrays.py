"""What kind of array an operand is, and where its elements lie, without
copying it: numpy (host), CuPy, PyTorch, any object with
`__cuda_array_interface__` (CAI, versions 0-3) or DLPack.

`describe(x)` returns an ArrayInfo: the caller's kind, shape, strides in
elements, dtype, the device pointer and device ordinal for device arrays.
Nothing here touches the GPU: a DLPack-only device object is described from
`__dlpack_device__` and consumed later (`call.py`), so argument handling can
be checked without a GPU (tests use fake objects exposing the interfaces).

Kinds: 'numpy' (host memory: numpy arrays, lists, CPU tensors, host DLPack),
'cupy', 'torch' (a CUDA tensor), 'cai' (another CAI object), 'dlpack' (a
CUDA DLPack object without CAI). Device results come back as the caller's
kind: CuPy for 'cupy', 'cai' and 'dlpack' (there is no generic constructor
for a foreign type), a tensor on the same device for 'torch'.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

# DLPack device types (dlpack.h): host memory, and memory a CUDA kernel can read.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13

# Element types the kernels compute in. Half precision on the device
# (float16, bfloat16) is refused: there is no half-precision kernel, and a
# silent float32 result would hide that. Host arrays of other real types
# (integers, bools, float16) are cast to float32 as on the GL path.
KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_HALF = ("float16", "bfloat16")
_TYPESTRS: dict = {}     # CAI typestr -> numpy dtype (np.dtype(str) costs ~1 us a call)


@dataclass(frozen=True)
class ArrayInfo:
    kind: str                 # numpy | cupy | torch | cai | dlpack
    obj: Any                  # the caller's object (a numpy array for host kinds)
    shape: tuple
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


def describe(x, name: str) -> ArrayInfo:
    """The ArrayInfo of operand `x` (`name` for error messages: 'A', 'B', 'out')."""
    if type(x) is np.ndarray:
        return _host(x, name)
    mod = _module_of(x)
    if mod == "torch" and "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor):
        return _torch(x, name)
    if mod == "cupy" and "cupy" in sys.modules and isinstance(x, sys.modules["cupy"].ndarray):
        return _cupy(x)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai(x, cai, name)
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None and hasattr(x, "__dlpack__"):
        dev_type, dev_id = dl()
        if int(dev_type) in (DL_CUDA, DL_CUDA_MANAGED):
            return ArrayInfo("dlpack", x, tuple(getattr(x, "shape", ())), None,
                             _dtype_name(getattr(x, "dtype", None)), device=int(dev_id))
        if int(dev_type) in (DL_CPU, DL_CUDA_HOST):
            return _host(np.from_dlpack(x), name)
        raise TypeError(f"matmul: {name} lives on DLPack device type {int(dev_type)}, "
                        f"neither the host nor a CUDA GPU")
    return _host(x, name)


def _host(x, name: str) -> ArrayInfo:
    if isinstance(x, (str, bytes)):
        raise TypeError(f"matmul: {name} must be a real numeric array, got {type(x).__name__}")
    try:
        a = np.asarray(x)
    except Exception as e:
        raise TypeError(f"matmul: {name} could not be converted to an array: {e}") from None
    it = a.dtype.itemsize or 1
    return ArrayInfo("numpy", a, a.shape, tuple(s // it for s in a.strides), a.dtype,
                     readonly=not a.flags.writeable)


def _cupy(x) -> ArrayInfo:
    it = x.dtype.itemsize
    return ArrayInfo("cupy", x, x.shape, tuple(s // it for s in x.strides), x.dtype,
                     ptr=x.data.ptr, device=x.device.id)


_TORCH_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
                 "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
                 "uint8": np.uint8, "bool": np.bool_, "complex64": np.complex64,
                 "complex128": np.complex128}


def _torch(x, name: str) -> ArrayInfo:
    if not x.is_cuda:        # a CPU tensor: host memory, numpy result as before
        return _host(x.detach().numpy() if x.requires_grad else x.numpy(), name)
    tname = str(x.dtype).removeprefix("torch.")
    dt = _TORCH_DTYPES.get(tname)
    return ArrayInfo("torch", x, tuple(x.shape), tuple(x.stride()),
                     np.dtype(dt) if dt is not None else tname,
                     ptr=x.data_ptr(), device=x.device.index)


def _cai(x, cai: dict, name: str) -> ArrayInfo:
    try:
        shape = tuple(int(s) for s in cai["shape"])
        ts = cai["typestr"]
        dtype = _TYPESTRS.get(ts)
        if dtype is None:
            dtype = _TYPESTRS.setdefault(ts, np.dtype(ts))
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise TypeError(f"matmul: {name}'s __cuda_array_interface__ is malformed ({e})") from None
    if cai.get("mask") is not None:
        raise TypeError(f"matmul: {name} is a masked array (__cuda_array_interface__ 'mask'), not supported")
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
            raise ValueError(f"matmul: {name}'s strides {tuple(st)} are not multiples of its item size {it}")
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


def check_dtype(info: ArrayInfo, name: str) -> None:
    """A numpy-style TypeError for element types matmul cannot take."""
    dt = info.dtype
    if dt in KERNEL_DTYPES:
        return
    tname = dt if isinstance(dt, str) else dt.name
    if tname in _HALF and info.on_device:
        raise TypeError(f"matmul: {name} has dtype {tname}; the CUDA kernels compute in float32 "
                        f"and float64 only (no half-precision kernel): cast it first, "
                        f"e.g. {name}.astype('float32')")
    if isinstance(dt, str):
        raise TypeError(f"matmul: {name} has dtype {dt}, not a real numeric type the CUDA kernels take")
    if dt.kind == "c":
        raise TypeError(f"matmul: complex input is not supported ({name} has dtype {dt})")
    if dt.kind not in "biuf":
        raise TypeError(f"matmul: {name} must be a real numeric array, got dtype {dt}")


def result_dtype(*infos: ArrayInfo) -> np.dtype:
    """float64 if an operand is float64, else float32 (the GL path's rule)."""
    f64 = KERNEL_DTYPES[1]
    for i in infos:
        if i is not None and i.dtype is f64 or (isinstance(i.dtype, np.dtype) and i.dtype == f64):
            return f64
    return KERNEL_DTYPES[0]


# The kernels' operand layouts, for a matrix of `rows` x `cols` with element
# strides (sr, sc): 'N' row-major (the stored layout), 'T' column-major (the
# stored layout of its transpose: the kernel's trans flag reads it in place),
# None: neither (copied once to row-major). A dimension of length 1 has no
# meaningful stride.
def matrix_layout(rows: int, cols: int, sr: int, sc: int) -> str | None:
    if (cols == 1 or sc == 1) and (rows == 1 or sr == cols):
        return "N"
    if (rows == 1 or sr == 1) and (cols == 1 or sc == rows):
        return "T"
    return None


def batch_stride(batch: tuple, shape: tuple, strides: tuple) -> int | None:
    """One element stride between consecutive products of the flattened
    `batch` for an operand whose batch dims are `shape` (left-padded with 1s
    by broadcasting) with `strides`; 0 for a broadcast operand; None when the
    products are not evenly spaced (the operand is then copied)."""
    nd = len(batch)
    shape = (1,) * (nd - len(shape)) + tuple(shape)
    strides = (0,) * (nd - len(strides)) + tuple(strides)
    s, span = None, 1            # span: products per step of dimension i
    for i in reversed(range(nd)):
        if batch[i] > 1:
            st = 0 if shape[i] == 1 else strides[i]
            if s is None:
                if st % span:
                    return None
                s = st // span
            elif st != s * span:
                return None
        span *= batch[i]
    return 0 if s is None else s
