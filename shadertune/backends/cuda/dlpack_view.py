"""A DLPack operand's memory, read from its producer's capsule with no import
into CuPy: the express lane's reader of CUDA DLPack objects (express.py).

DLPack hands memory over per call: `obj.__dlpack__(stream=s)` makes the
consumer's stream `s` wait for the producer's pending work (the stream
handshake) and returns a capsule that describes the memory.  view(obj, s) asks
for that capsule as cupy.from_dlpack does (`max_version=(1, 0)`; a producer type
that refuses the keyword is asked without it from then on, so the TypeError is
paid once a type, not once a call) and reads it:

    view(obj, stream) -> (capsule, ptr, shape, strides, dtype, device_type, device_id) | None

ptr is the first element's address (data + byte_offset), strides are in bytes
(a capsule without strides is C-contiguous, given CuPy's strides for it), dtype
a numpy dtype; None where the capsule is not one this reader takes: a DLPack
major version other than 1, vector lanes, a dtype numpy has no name for (what
cupy.from_dlpack refuses), or not a DLPack capsule.  The device type is
returned, not judged: the caller decides which devices it reads.
consumer_stream(cp) is the stream value cupy.from_dlpack hands a CUDA producer.

The capsule is read, never consumed.  A consumer that takes the memory over
renames the capsule ("used_dltensor") and must call the tensor's deleter
itself; this reader leaves the name as it is, so the producer's own capsule
destructor calls the deleter once, when the last reference to the capsule
goes.  The caller holds the capsule until its kernels are enqueued and then
drops it: the deleter releases the producer's export (its hold on the array,
the shape buffer), not the memory the array owns, which the caller's object
keeps as it keeps a CuPy array's.  That is the lifetime the regular path gives
the array cupy.from_dlpack makes (dropped when the call returns).  Everything
read from the capsule's shape and strides is copied into Python ints first.

The structs are read with struct.unpack_from through one memoryview spanning
the address space (ctypes' from_address or string_at cost a foreign call and
an object per field or block; notes/cuda.md has the numbers): the addresses
read are the capsule's own and the pointers in it, valid while the capsule
lives, as the DLPack contract says.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys

import numpy as np

MAX_VERSION = (1, 0)          # the DLPack version this reader knows (dlpack.h 1.x's structs)
DL_CPU, DL_CUDA, DL_CUDA_MANAGED = 1, 2, 13

_VERSIONED, _LEGACY = b"dltensor_versioned", b"dltensor"

# PyCapsule_GetPointer as a prototype of this module's own (ctypes.pythonapi's
# attributes are shared: another module may set their argtypes). A wrong name
# or a non-capsule raises ValueError (the Python API sets it, PYFUNCTYPE raises).
_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

# dlpack.h 1.x, native layout:
#   DLManagedTensorVersioned {DLPackVersion {u32 major, minor}; void *manager_ctx;
#                             void (*deleter)(...); u64 flags; DLTensor dl_tensor}
#   DLManagedTensor          {DLTensor dl_tensor; void *manager_ctx; void (*deleter)(...)}
#   DLTensor {void *data; DLDevice {i32 device_type, device_id}; i32 ndim;
#             DLDataType {u8 code, u8 bits, u16 lanes}; i64 *shape; i64 *strides; u64 byte_offset}
# The DLDataType is read as one u32 word (_DTYPES' key).
_TENSOR = struct.Struct("@PiiiIPPQ")
_TENSOR_VERSIONED = struct.Struct("@I28xPiiiIPPQ")   # the major version, then dl_tensor at 32
assert _TENSOR.size == 48 and _TENSOR_VERSIONED.size == 80

_MEM = memoryview((ctypes.c_char * (sys.maxsize // 2 + 1)).from_address(0))
_INTS = [struct.Struct(f"@{n}q") for n in range(33)]     # shape / strides of n dimensions
MAX_NDIM = len(_INTS) - 1


def _word(code: int, bits: int, lanes: int = 1) -> int:
    return struct.unpack("@I", struct.pack("@BBH", code, bits, lanes))[0]


# DLDataType word (lanes 1) -> numpy dtype: what cupy.from_dlpack maps (kDLInt 0,
# kDLUInt 1, kDLFloat 2, kDLComplex 5, kDLBool 6); bfloat16 (4) and the rest: none
_DTYPES = {_word(code, bits): np.dtype(name) for code, bits, name in [
    (0, 8, "int8"), (0, 16, "int16"), (0, 32, "int32"), (0, 64, "int64"),
    (1, 8, "uint8"), (1, 16, "uint16"), (1, 32, "uint32"), (1, 64, "uint64"),
    (2, 16, "float16"), (2, 32, "float32"), (2, 64, "float64"),
    (5, 64, "complex64"), (5, 128, "complex128"), (6, 8, "bool")]}

_C_STRIDES: dict = {}     # (shape, itemsize) -> CuPy's C-contiguous byte strides


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    """CuPy's strides of a C-contiguous array (cupy internal.set_contiguous_strides:
    a dimension of 0 or 1 elements does not multiply the stride)."""
    st = _C_STRIDES.get((shape, itemsize))
    if st is None:
        out, acc = [], itemsize
        for n in reversed(shape):
            out.append(acc)
            if n > 1:
                acc *= n
        if len(_C_STRIDES) > 1024:
            _C_STRIDES.clear()
        st = _C_STRIDES[(shape, itemsize)] = tuple(reversed(out))
    return st


def read(capsule):
    """(capsule, ptr, shape, strides, dtype, device_type, device_id) of a DLPack
    capsule of either name, or None (see the module)."""
    try:
        p = _pointer(capsule, _VERSIONED)
    except ValueError:
        try:
            p = _pointer(capsule, _LEGACY)
        except ValueError:       # not a DLPack capsule, or one already consumed
            return None
        return _legacy(capsule, p)
    return _versioned(capsule, p)


def _versioned(capsule, p: int):
    major, data, dev_type, dev_id, ndim, word, sp, tp, offset = _TENSOR_VERSIONED.unpack_from(_MEM, p)
    if major != 1:
        return None
    return _tensor(capsule, data, dev_type, dev_id, ndim, word, sp, tp, offset)


def _legacy(capsule, p: int):
    return _tensor(capsule, *_TENSOR.unpack_from(_MEM, p))


def _tensor(capsule, data, dev_type, dev_id, ndim, word, sp, tp, offset):
    dtype = _DTYPES.get(word)
    if dtype is None or not 0 <= ndim <= MAX_NDIM:
        return None
    ints = _INTS[ndim]
    shape = ints.unpack_from(_MEM, sp) if ndim else ()
    it = dtype.itemsize
    if not tp:
        strides = _c_strides(shape, it)
    elif ndim == 2:
        s0, s1 = ints.unpack_from(_MEM, tp)
        strides = (s0 * it, s1 * it)
    else:
        strides = tuple([s * it for s in ints.unpack_from(_MEM, tp)])
    return capsule, data + offset, shape, strides, dtype, dev_type, dev_id


# producer type -> how it is asked: _ASK_V (max_version; it gave a versioned capsule),
# _ASK_V_GOT_L (max_version; it gave a legacy one), _ASK_L (stream only: it refused
# max_version with a TypeError)
_ASK_V, _ASK_V_GOT_L, _ASK_L = 0, 1, 2
_ASK: dict = {}


def view(obj, stream):
    """The capsule of obj.__dlpack__(stream=stream, ...) read (see the module)."""
    ask = _ASK.get(type(obj))
    if ask == _ASK_V:
        capsule = obj.__dlpack__(stream=stream, max_version=MAX_VERSION)
        try:
            p = _pointer(capsule, _VERSIONED)
        except ValueError:       # a legacy capsule this time
            return read(capsule)
        return _versioned(capsule, p)
    if ask is None:
        return _first_view(obj, stream)
    capsule = (obj.__dlpack__(stream=stream) if ask == _ASK_L
               else obj.__dlpack__(stream=stream, max_version=MAX_VERSION))
    try:
        p = _pointer(capsule, _LEGACY)
    except ValueError:           # a versioned capsule this time
        return read(capsule)
    return _legacy(capsule, p)


def _first_view(obj, stream):
    """view() for a type not asked before: with max_version, and on a TypeError
    without it (cupy.from_dlpack's order); the way that answered is kept for the type."""
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=MAX_VERSION)
    except TypeError:
        capsule = obj.__dlpack__(stream=stream)
        ask = _ASK_L
    else:
        ask = _ASK_V if _is_versioned(capsule) else _ASK_V_GOT_L
    _ASK[type(obj)] = ask
    return read(capsule)


def _is_versioned(capsule) -> bool:
    try:
        _pointer(capsule, _VERSIONED)
        return True
    except ValueError:
        return False


def forget() -> None:
    """Forget how each producer type was asked (tests)."""
    _ASK.clear()


_DEFAULT_STREAM: list = []


def consumer_stream(cp, stream=None) -> int:
    """The stream value cupy.from_dlpack hands a CUDA producer for CuPy's current
    stream (or `stream`, that stream already asked for): its handle, or for the null
    stream the default stream's DLPack value (1: the legacy default stream; 2: the
    per-thread one, where CuPy was started with CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1),
    never 0, which DLPack disallows."""
    ptr = (stream if stream is not None else cp.cuda.get_current_stream()).ptr
    if ptr:
        return ptr
    if not _DEFAULT_STREAM:
        _DEFAULT_STREAM.append(_default_stream())
    return _DEFAULT_STREAM[0]


def _default_stream() -> int:
    """CuPy's get_default_stream_ptr (fixed when CuPy is imported), or its rule
    where cupy_backends is not there (the stand-ins)."""
    try:
        from cupy_backends.cuda import stream as backend_stream
        return int(backend_stream.get_default_stream_ptr())
    except Exception:      # noqa: BLE001 (no cupy_backends: CuPy's environment rule)
        return 2 if os.environ.get("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "0") == "1" else 1
