"""DLPack capsules made and read with ctypes, for the CuPy stand-ins
(fake_cupy.py, light_cupy.py) and the tests of the express lane's DLPack reader
(shadertune/backends/cuda/dlpack_view.py), with no GPU:

- capsule(...): a capsule of any device type over memory it is given (host
  memory playing device memory), versioned ("dltensor_versioned", DLPack 1.x) or
  legacy ("dltensor"), built as a producer builds it: the managed tensor and its
  shape and strides live until its deleter runs, and the capsule's destructor
  calls the deleter once unless a consumer renamed the capsule ("used_...");
- Producer: an object with __dlpack__/__dlpack_device__ over such capsules that
  records the stream each export was asked for and counts its deleters' calls;
  LegacyProducer's __dlpack__ refuses max_version (a TypeError), as producers
  older than DLPack 1.0 do;
- from_dlpack(x, current_stream): what cupy.from_dlpack does before it builds
  its array (the stream it hands the producer, max_version and the TypeError
  fallback, the checks and the reading), written with ctypes Structures,
  independently of the reader under test.
"""
from __future__ import annotations

import ctypes
import itertools

import numpy as np

DL_CPU, DL_CUDA, DL_CUDA_MANAGED = 1, 2, 13
VERSIONED, LEGACY = b"dltensor_versioned", b"dltensor"
USED_VERSIONED, USED_LEGACY = b"used_dltensor_versioned", b"used_dltensor"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2

# the Python API as prototypes of this module's own (a capsule passed as its address:
# the destructor runs while the capsule is being freed, when no new reference may be made)
_api = ctypes.pythonapi
_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(("PyCapsule_New", _api))
_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_get_obj = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))

_LIVE: dict = {}          # managed tensor address -> what it holds, until its deleter runs
_TOKENS = itertools.count(1)


@DELETER
def _deleter(address):
    held = _LIVE.pop(address)
    on_delete = held[-1]
    if on_delete is not None:
        on_delete()


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destructor(capsule_address):
    """The producer's capsule destructor (the DLPack Python spec's): the deleter,
    unless a consumer renamed the capsule and took the tensor over."""
    for name, struct in ((VERSIONED, DLManagedTensorVersioned), (LEGACY, DLManagedTensor)):
        if _is_valid(capsule_address, name):
            p = _get(capsule_address, name)
            struct.from_address(p).deleter(p)
            return


_DESTRUCTOR = ctypes.cast(_destructor, ctypes.c_void_p)

_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


def capsule(ptr: int, shape, dtype, strides=None, *, byte_offset: int = 0, device=(DL_CUDA, 0),
            versioned: bool = True, version=(1, 0), flags: int = 0, lanes: int = 1, dl_code=None,
            on_delete=None, keep=None):
    """A DLPack capsule of `shape` (strides in elements, None: C-contiguous and no
    strides array, as DLPack allows) over the memory at `ptr` (data; the first
    element at ptr + byte_offset); `keep` is held until the deleter runs, which
    then calls on_delete()."""
    dtype = np.dtype(dtype)
    nd = len(shape)
    shp = (ctypes.c_int64 * max(nd, 1))(*shape)
    std = None if strides is None else (ctypes.c_int64 * max(nd, 1))(*strides)
    m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = m.dl_tensor
    t.data = ptr
    t.device = DLDevice(*device)
    t.ndim = nd
    t.dtype = DLDataType(_CODES[dtype.kind] if dl_code is None else dl_code, dtype.itemsize * 8, lanes)
    t.shape = shp
    t.strides = std if std is not None else ctypes.POINTER(ctypes.c_int64)()
    t.byte_offset = byte_offset
    m.deleter = _deleter
    m.manager_ctx = next(_TOKENS)
    if versioned:
        m.version = DLPackVersion(*version)
        m.flags = flags
    address = ctypes.addressof(m)
    _LIVE[address] = (m, shp, std, keep, on_delete)
    return _new(address, VERSIONED if versioned else LEGACY, _DESTRUCTOR)


def live() -> int:
    """Managed tensors whose deleter has not run."""
    return len(_LIVE)


class Producer:
    """A DLPack producer over memory at `ptr` (host memory playing the device's):
    every __dlpack__ builds a fresh capsule (versioned when max_version >= 1.0 is
    asked, as the spec says), records the stream it was asked for, and counts the
    deleter's calls (`deleted`) against the exports (`exports`)."""

    def __init__(self, ptr: int, shape, dtype, strides=None, *, device=(DL_CUDA, 0), keep=None, **capsule_kw):
        self.ptr, self.shape, self.dtype, self.strides = ptr, tuple(shape), np.dtype(dtype), strides
        self.device, self.keep, self.capsule_kw = device, keep, capsule_kw
        self.streams, self.exports, self.deleted = [], 0, 0

    @classmethod
    def over(cls, a: np.ndarray, **kw):
        """A producer over a numpy array's memory (it is kept while exported)."""
        it = a.dtype.itemsize
        return cls(a.ctypes.data, a.shape, a.dtype, tuple(s // it for s in a.strides), keep=a, **kw)

    def _deleted(self):
        self.deleted += 1

    def _export(self, stream, versioned: bool):
        self.streams.append(stream)
        self.exports += 1
        return capsule(self.ptr, self.shape, self.dtype, self.strides, device=self.device, versioned=versioned,
                       on_delete=self._deleted, keep=self.keep, **self.capsule_kw)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._export(stream, max_version is not None and tuple(max_version) >= (1, 0))

    def __dlpack_device__(self):
        return self.device


class LegacyProducer(Producer):
    """A producer from before DLPack 1.0: __dlpack__(stream=None) only (another
    keyword is a TypeError, counted in `refused`); legacy capsules."""

    refused = 0

    def __dlpack__(self, stream=None, **unexpected):
        if unexpected:
            type(self).refused += 1
            raise TypeError(f"__dlpack__() got an unexpected keyword argument {next(iter(unexpected))!r}")
        return self._export(stream, False)


# --- cupy.from_dlpack, up to its array -------------------------------------------------

_NUMPY = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64", (1, 8): "uint8",
          (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64", (2, 16): "float16", (2, 32): "float32",
          (2, 64): "float64", (5, 64): "complex64", (5, 128): "complex128", (6, 8): "bool"}


def from_dlpack(x, current_stream: int, pointer_device=lambda ptr: 0, take_over: bool = True):
    """(ptr, shape, byte strides, dtype, device id, capsule) as cupy.from_dlpack
    reads a CUDA DLPack object before it builds its array: __dlpack_device__ (CPU
    and other devices refused with CuPy's errors); the stream handed to the
    producer is CuPy's current one, the legacy default stream (1) for the null
    stream; max_version=(1, 0), and without it where the producer raises a
    TypeError; the capsule's version, device, lanes and dtype checked as CuPy
    checks them; no strides: CuPy's C-contiguous strides.  The last item owns the
    tensor: as CuPy does, the capsule renamed "used_..." and the deleter called
    when the owner goes (TakenOver); with take_over=False, the capsule itself, left
    as it is (its destructor calls the deleter: a producer may then hand the same
    capsule again, as the light stand-in's benchmark producer does)."""
    dev_type, dev_id = x.__dlpack_device__()
    if dev_type == DL_CPU:
        raise TypeError("CPU arrays cannot be directly imported to CuPy. "
                        "Use `cupy.array(numpy.from_dlpack(input))` instead.")
    if dev_type not in (DL_CUDA, DL_CUDA_MANAGED):
        raise TypeError(f"Unsupported array type: {dev_type}")
    stream = current_stream or 1
    try:
        cap = x.__dlpack__(stream=stream, max_version=(1, 0), copy=None)
    except TypeError:
        cap = x.__dlpack__(stream=stream)
    owner = TakenOver(cap) if take_over else cap
    t = owner.tensor if take_over else _tensor_of(cap)
    if t.device.device_type not in (DL_CUDA, DL_CUDA_MANAGED):
        raise RuntimeError("CuPy is built against CUDA, different from the backend that backs the incoming "
                           "DLPack tensor")
    ptr = t.data or 0
    device = pointer_device(ptr) if t.device.device_type == DL_CUDA_MANAGED else t.device.device_id
    if t.dtype.lanes != 1:
        raise ValueError(f"vector dtypes (lanes={t.dtype.lanes}) is not supported")
    name = _NUMPY.get((t.dtype.code, t.dtype.bits))
    if name is None:
        raise TypeError(f"Unsupported dtype. dtype code: {t.dtype.code}")
    dtype = np.dtype(name)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
    else:
        strides, acc = [], dtype.itemsize
        for n in reversed(shape):
            strides.append(acc)
            acc *= n if n > 1 else 1
        strides = tuple(reversed(strides))
    return ptr + t.byte_offset, shape, strides, dtype, device, owner


def _tensor_of(cap) -> DLTensor:
    for name, struct in ((VERSIONED, DLManagedTensorVersioned), (LEGACY, DLManagedTensor)):
        try:
            m = struct.from_address(_get_obj(cap, name))
        except ValueError:
            continue
        if struct is DLManagedTensorVersioned and m.version.major > 1:
            raise BufferError("DLPack exported too new major version.")
        return m.dl_tensor
    raise ValueError(f"not a DLPack capsule: {cap!r}")


class TakenOver:
    """A capsule's tensor taken over by its consumer (CuPy's DLPackMemory): the
    capsule renamed "used_...", the deleter called when this object goes."""

    def __init__(self, cap):
        for name, used, struct in ((VERSIONED, USED_VERSIONED, DLManagedTensorVersioned),
                                   (LEGACY, USED_LEGACY, DLManagedTensor)):
            try:
                p = _get_obj(cap, name)
            except ValueError:
                continue
            m = struct.from_address(p)
            if struct is DLManagedTensorVersioned and m.version.major > 1:
                raise BufferError("DLPack exported too new major version.")
            _set_name(cap, used)
            self._p, self._m, self.tensor = p, m, m.dl_tensor
            return
        raise ValueError("A DLPack tensor object cannot be consumed multiple times "
                         f"(or object was not a DLPack capsule). Got: {cap!r}")

    def __del__(self):
        m = getattr(self, "_m", None)
        if m is not None:
            self._m = None
            m.deleter(self._p)
