"""Kernel launches with prebuilt parameters: the host's cost of one launch.

CuPy's RawKernel call converts every argument on every launch (function.pyx
`_pointer`: a CScalar or CIntptr object per argument, a vector of their
addresses) before it calls cuLaunchKernel through `cupy.cuda.driver.launchKernel`.
A KernelLaunch builds that parameter array once per thread instead: one ctypes
value of the parameter's exact CUDA type per slot (pointers uint64, `int`
int32, `long long` int64, float, double) and an array of void* to them. A
launch overwrites the address slots (every launch: the operands move) and the
other slots only when the caller passes another tuple of them than its last
launch on this thread, then calls launchKernel with the function's handle.

cuLaunchKernel copies the parameter values before it returns, so a buffer is
free again after each launch; the buffers are per thread because one kernel
object may be launched from two threads at once (a kernel from
shadertune.front.matmul.kernel is under no lock; matmul's calls hold the backend's run
lock, but that is the caller's business, not this class's).

A driver-API launch needs a CUDA context current on the calling thread; a
thread that has none (no runtime call made there yet) gets its device's
primary context bound by one runtime call and the launch once more, so no
launch pays for a query it does not need (and none is made while a stream
captures a graph).

The launch goes through the RawKernel call instead (the arguments as numpy
scalars of the same types, as before) where CuPy has no driver.launchKernel,
where the function has no loaded handle (`function.kernel.ptr`: a stand-in),
and where the current device is not the one the function was loaded on (the
RawKernel loads the module there; a handle is valid in its own context only).

Signatures are strings of one code per kernel parameter, in order:
    P  a device pointer (T*, int*: 8 bytes)    i  int (32 bits)
    q  long long (64 bits)                     f  float    d  double
The leading run of P slots are the launch's addresses (passed every launch),
the rest its constants.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

CTYPES = {"P": ctypes.c_uint64, "i": ctypes.c_int32, "q": ctypes.c_int64,
          "f": ctypes.c_float, "d": ctypes.c_double}
_NUMPY = {"P": int, "i": np.int32, "q": np.int64, "f": np.float32, "d": np.float64}


def scalar_code(dtype: str) -> str:
    return {"float32": "f", "float64": "d"}[dtype]


def gemm_signature(problem) -> str:
    """shaders/cuda/signature.cu: A, B, C, W, counters; M, N, K, k_units;
    alpha, beta (T); a batched problem adds the strides sA, sB (long long)."""
    t = scalar_code(problem.dtype)
    return "PPPPPiiii" + t + t + ("qq" if problem.batch > 1 else "")


# shaders/cuda/pack_split.cu (PS > 0): A, B, PA, PB; M, N, K.
PACK_SIGNATURE = "PPPPiii"


def reduce_signature(problem) -> str:
    """shaders/cuda/splitk_reduce.cu: W, C; MN (long long); alpha, beta (T)."""
    t = scalar_code(problem.dtype)
    return "PPq" + t + t


def _no_context(e: BaseException) -> bool:
    """Whether a driver-API launch failed for want of a current context."""
    return "CUDA_ERROR_INVALID_CONTEXT" in str(e)


def bind_context(cp) -> None:
    """Make the current device's primary context current on this thread (a
    runtime call does it: CuPy's own launch calls one first, _ensure_context)."""
    cp.cuda.runtime.memGetInfo()


class _Params:
    """One parameter array of one kernel (a thread's, KernelLaunch; a BoundLaunch's):
    the values and the void* array pointing at them, alive together. `address` is
    valid only while this object lives: whoever passes it to the driver (or keeps
    a graph node made from it) must hold the object."""
    __slots__ = ("addrs", "values", "array", "address", "last", "__weakref__")

    def __init__(self, signature: str, naddr: int):
        self.addrs = (ctypes.c_uint64 * naddr)()
        self.values = [CTYPES[c]() for c in signature[naddr:]]
        base = ctypes.addressof(self.addrs)
        slots = [base + 8 * i for i in range(naddr)] + [ctypes.addressof(v) for v in self.values]
        self.array = (ctypes.c_void_p * len(slots))(*slots)
        self.address = ctypes.addressof(self.array)
        self.last = None      # the constants written last: none yet


class KernelLaunch:
    """Launches of one compiled kernel `function` (a CuPy RawKernel) whose
    parameters are `signature` (see the module docstring), with a fixed block
    and dynamic shared memory:

        k = KernelLaunch(cupy, raw_kernel, "PPq" + "ff", (256, 2))
        k.launch((gx, gy, gz), stream, (w_ptr, c_ptr), (mn, alpha, beta))

    `stream` is a CuPy stream (None: CuPy's current one); the addresses are
    ints, one per leading P slot; the constants are Python numbers, one per
    other slot, best the same tuple object while they do not change (a
    different tuple is written again, an equal one included: signed zeros
    stay exact). `fast` says whether launches go through the parameter
    array; `launch_rawkernel` is the RawKernel call, always available."""

    def __init__(self, cp, function, signature: str, block: tuple, shared_mem: int = 0):
        if any(c not in CTYPES for c in signature):
            raise ValueError(f"unknown parameter code in {signature!r} (known: {''.join(CTYPES)})")
        self.function, self.signature = function, signature
        self.naddr = len(signature) - len(signature.lstrip("P"))
        self.nconst = len(signature) - self.naddr
        self.block = tuple(block) + (1,) * (3 - len(block))
        self.shared_mem = int(shared_mem)
        self._cp = cp
        self._tls = threading.local()
        self._numpy = tuple(_NUMPY[c] for c in signature[self.naddr:])
        launch_kernel = getattr(getattr(cp.cuda, "driver", None), "launchKernel", None)
        handle = None
        if launch_kernel is not None:
            handle = getattr(getattr(function, "kernel", None), "ptr", None)
        self._launch_kernel, self._handle = launch_kernel, handle
        self.fast = bool(handle)
        if handle:
            self._get_device = cp.cuda.runtime.getDevice
            self._device = self._get_device()

    def use_rawkernel(self) -> None:
        """Launch through the RawKernel call from now on (to compare the two)."""
        self.fast = False

    def params(self) -> _Params:
        """This thread's parameter array (made on its first launch)."""
        p = getattr(self._tls, "p", None)
        if p is None:
            p = self._tls.p = _Params(self.signature, self.naddr)
        return p

    def launch(self, grid, stream, addrs, consts=()):
        """Enqueue one launch of `grid` (3 ints) on `stream` (see the class)."""
        if not self.fast or self._get_device() != self._device:
            return self.launch_rawkernel(grid, stream, addrs, consts)
        try:
            p = self._tls.p
        except AttributeError:
            p = self.params()
        p.addrs[:] = addrs         # one C call; a wrong count raises ValueError
        if consts is not p.last:
            self._write(p, consts)
        gx, gy, gz = grid
        bx, by, bz = self.block
        if stream is None:
            stream = self._cp.cuda.get_current_stream()
        args = (self._handle, gx, gy, gz, bx, by, bz, self.shared_mem, stream.ptr, p.address, 0)
        try:
            self._launch_kernel(*args)
        except Exception as e:     # noqa: BLE001 (only a missing context is handled here)
            if not _no_context(e):
                raise
            bind_context(self._cp)
            self._launch_kernel(*args)

    def _write(self, p: _Params, consts) -> None:
        """Write the constants into this thread's slots (they changed)."""
        if len(consts) != self.nconst:
            raise ValueError(f"{len(consts)} constants for signature {self.signature!r} ({self.nconst})")
        p.last = None            # a write that fails half-way is not taken for done
        for v, x, c in zip(p.values, consts, self.signature[self.naddr:]):
            v.value = x
            if c in "iqP" and v.value != x:    # ctypes wraps silently; numpy's scalars refuse
                raise OverflowError(f"{x} does not fit the kernel's {c!r} parameter ({type(v).__name__})")
        p.last = consts

    def write(self, p: _Params, consts) -> None:
        """Write `consts` into the parameter array `p` (checked as launch() checks them)."""
        self._write(p, consts)

    def launch_rawkernel(self, grid, stream, addrs, consts=()):
        """The same launch through CuPy's RawKernel call (its arguments converted
        per launch; the constants as numpy scalars of their types, kept per
        thread while the caller passes the same tuple)."""
        if len(addrs) != self.naddr:
            raise ValueError(f"{len(addrs)} addresses for signature {self.signature!r} ({self.naddr})")
        kept = getattr(self._tls, "raw", None)
        if kept is None or kept[0] is not consts:
            if len(consts) != self.nconst:
                raise ValueError(f"{len(consts)} constants for signature {self.signature!r} ({self.nconst})")
            kept = self._tls.raw = (consts, tuple(t(x) for t, x in zip(self._numpy, consts)))
        self.function(tuple(grid), self.block, tuple(addrs) + kept[1], shared_mem=self.shared_mem, stream=stream)


class BoundLaunch:
    """One launch of a KernelLaunch (`fast`: with a loaded handle) on a fixed grid,
    with a parameter array of its own instead of the thread's: for a caller that
    serialises its launches itself (matmul's express lane holds the backend's run
    lock) and has checked that the current device is the function's.

        b = BoundLaunch(kl, grid, consts)      # consts: written now, or later by b.constants
        b(stream_ptr, addrs)

    A thread with no CUDA context current (a driver-API launch needs one) gets
    its device's primary context bound and the launch once more."""

    __slots__ = ("kl", "p", "head", "fn")

    def __init__(self, kl: KernelLaunch, grid, consts=None):
        if not kl.fast:
            raise ValueError("a BoundLaunch needs a function with a loaded handle (KernelLaunch.fast)")
        self.kl = kl
        self.p = _Params(kl.signature, kl.naddr)
        gx, gy, gz = grid
        bx, by, bz = kl.block
        self.head = (kl._handle, gx, gy, gz, bx, by, bz, kl.shared_mem)
        self.fn = kl._launch_kernel
        if consts is not None:
            kl.write(self.p, consts)

    def constants(self, consts) -> None:
        self.kl.write(self.p, consts)

    def __call__(self, stream_ptr: int, addrs) -> None:
        p = self.p
        p.addrs[:] = addrs         # one C call; a wrong count raises ValueError
        try:
            self.fn(*self.head, stream_ptr, p.address, 0)
        except Exception as e:     # noqa: BLE001 (only a missing context is handled here)
            if not _no_context(e):
                raise
            bind_context(self.kl._cp)
            self.fn(*self.head, stream_ptr, p.address, 0)
