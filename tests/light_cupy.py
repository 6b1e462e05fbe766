"""A CuPy stand-in whose every call costs as little as Python allows, for timing
shadertune's own Python on the steady path of a call (scripts/bench-host-overhead
--stand-in light): its arrays keep `.data.ptr`, `.shape`, `.strides`, `.dtype` as
plain attributes, its allocation hands out a fresh address without memory, its
launch, streams and device queries do nothing.  Nothing here computes: the
numbers it gives are our Python's share of a call, which the GPU run adds CuPy's
C-level costs to (scripts/bench-cuda-call).  tests/fake_cupy.py is the stand-in
that computes (the tests').
"""
from __future__ import annotations

import itertools
import types

import numpy as np

_addresses = itertools.count(1 << 32, 1 << 20)     # 1 MiB apart, 16-byte aligned


class _MemPtr:
    __slots__ = ("ptr", "device_id")

    def __init__(self, ptr, device_id=0):
        self.ptr, self.device_id = ptr, device_id


_LAYOUTS: dict = {}     # (shape, dtype) -> (shape, C strides, dtype): an allocation costs a lookup


def _layout(shape, dtype, strides):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dtype = np.dtype(dtype)
    if strides is None:
        st, acc = [], dtype.itemsize
        for n in reversed(shape):
            st.append(acc)
            acc *= n
        strides = tuple(reversed(st))
    return shape, tuple(strides), dtype


class ndarray:
    """shape, strides (bytes), dtype and .data.ptr; no memory behind it."""
    __slots__ = ("shape", "strides", "dtype", "data", "__weakref__")

    def __init__(self, shape, dtype=np.float32, memptr=None, strides=None):
        kept = _LAYOUTS.get((shape, dtype)) if strides is None else None
        if kept is None:
            kept = _layout(shape, dtype, strides)
            if strides is None:
                _LAYOUTS[(shape, dtype)] = kept
        self.shape, self.strides, self.dtype = kept
        self.data = memptr if memptr is not None else _MemPtr(next(_addresses))

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


ndarray.__module__ = "cupy"


def empty(shape, dtype=np.float32):
    return ndarray(shape, dtype)


def from_dlpack(x):
    """cupy.from_dlpack's reading of a producer's capsule (tests/dlpack_capsules.py),
    the capsule left as it is (not taken over: a benchmark producer hands the same
    capsule each call, so that its export costs nothing)."""
    import dlpack_capsules
    ptr, shape, strides, dtype, device, _ = dlpack_capsules.from_dlpack(x, 0, take_over=False)
    return ndarray(shape, dtype, _MemPtr(ptr, device), strides)


zeros = empty


class Stream:
    __slots__ = ("ptr",)

    def __init__(self, ptr=0):
        self.ptr = ptr

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def synchronize(self):
        pass


_NULL = Stream(0)


def get_current_stream():
    return _NULL


class _Runtime:
    CUDARuntimeError = type("CUDARuntimeError", (Exception,), {})

    @staticmethod
    def getDevice():
        return 0

    @staticmethod
    def getDeviceCount():      # none: the backend keeps its default limits (the caller marks device 0 usable)
        return 0

    @staticmethod
    def streamIsCapturing(stream):
        return False

    @staticmethod
    def memGetInfo():
        return 1 << 30, 1 << 30

    @staticmethod
    def graphLaunch(graph_exec, stream):
        pass


class Driver:
    """graphs.Driver's calls at no cost (bench-host-overhead's lane_graphs): handles
    from a counter, updates that do nothing."""

    def __init__(self):
        self._ids = iter(range(1, 1 << 62))

    def check(self, rc, what):
        pass

    def create(self):
        return next(self._ids)

    def add_kernel_node(self, graph, after, params):
        return next(self._ids)

    def instantiate(self, graph):
        return next(self._ids)

    def set_params(self, ex, node, params):
        return 0

    def destroy_exec(self, e):
        pass

    def destroy(self, graph, execs):
        pass


def launchKernel(*args):
    pass


class Function:
    """A compiled function with a loaded handle (RawKernel.kernel.ptr)."""

    def __init__(self):
        self.kernel = types.SimpleNamespace(ptr=1)

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        pass


cuda = types.SimpleNamespace(
    Stream=Stream, get_current_stream=get_current_stream, runtime=_Runtime,
    Device=lambda i=0: types.SimpleNamespace(__enter__=lambda s: s, __exit__=lambda s, *e: None),
    driver=types.SimpleNamespace(CUDADriverError=type("CUDADriverError", (Exception,), {}),
                                 launchKernel=launchKernel),
    ExternalStream=lambda ptr, device_id=-1: Stream(ptr),
)
__name__ = "cupy"
