"""A host-memory stand-in for the part of CuPy that the CUDA front door
(backends/cuda/call.py) and the kernel driver's launch path use, for tests on
machines without a GPU. The real thing runs in tests/test_cuda_gpu*.py.

'Device' arrays are numpy arrays (the `ndarray` subclass below, which says it
comes from cupy) in host memory; their addresses play the device pointers.
FakeFunction stands in for a compiled GEMM: it computes, in numpy, exactly
what the CUDA kernels' contract says they compute from the pointers, element
strides, trans flags and grid they are launched with, so the tests check that
contract between call.py, driver.enqueue and the kernels.

Inside `with recording() as log:` the list `log` receives what reaches the
'device', in order: every launch (any FakeFunction, the RawKernel of hold.py),
every allocation (empty, zeros, full and what builds on them) with the stream
current at the time, and every event recorded: tests compare the sequences two
paths enqueue. Outside it nothing is kept (the host-overhead script times the
stand-in's calls).

DLPack as CuPy does it: an array exports a CUDA capsule (device 0) over its
memory; from_dlpack asks a producer on the current stream, takes the capsule
over and reads it (tests/dlpack_capsules.py).

Stream capture as CUDA does it: between Stream.begin_capture() and
end_capture() a FakeFunction launched on the stream is recorded, not run; the
Graph end_capture() returns runs the recorded launches on every launch()
(their buffers must still be alive then: `alive`); synchronising a capturing
stream or an event recorded on it raises, as the driver refuses it
(cudaErrorStreamCaptureUnsupported); runtime.streamIsCapturing answers.
"""
from __future__ import annotations

import ctypes
import itertools
import math
import types
import weakref

import numpy as np

ALIGN = 256   # CuPy's allocations are 256-byte aligned


class _Mem:
    def __init__(self, ptr, size=0, owner=None, device_id=0):
        self.ptr, self.size, self._owner, self.device_id = ptr, size, owner, device_id


class _MemPtr:
    def __init__(self, mem, offset=0):
        self.mem, self.ptr, self.device_id = mem, mem.ptr + offset, mem.device_id


def _from_address(addr: int, shape, dtype, strides_bytes):
    """A numpy view of `shape` with byte strides whose element 0 is at `addr`."""
    dtype = np.dtype(dtype)
    if 0 in shape:
        return np.empty(shape, dtype)
    lo = sum((n - 1) * s for n, s in zip(shape, strides_bytes) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides_bytes) if s > 0)
    buf = (ctypes.c_char * (hi - lo + dtype.itemsize)).from_address(addr + lo)
    return np.ndarray(shape, dtype, buffer=buf, offset=-lo, strides=strides_bytes)


_LIVE = weakref.WeakValueDictionary()    # allocation number -> its memory, while alive
_ALLOCS = itertools.count()
LOG = None          # while recording(): ('launch', name, grid, block, shared_mem, stream, args)
                    # | ('alloc', bytes, stream, ptr) | ('event', stream), in order


class recording:
    """`with recording() as log:` log lists what reaches the device meanwhile."""

    def __enter__(self):
        global LOG
        LOG = []
        return LOG

    def __exit__(self, *exc):
        global LOG
        LOG = None


def _log(entry) -> None:
    if LOG is not None:
        LOG.append(entry)


def _aligned_empty(shape, dtype):
    dtype = np.dtype(dtype)
    n = math.prod(shape) * dtype.itemsize
    raw = np.empty(n + ALIGN, np.uint8)
    _LIVE[next(_ALLOCS)] = raw
    off = (-raw.ctypes.data) % ALIGN
    _log(("alloc", n, get_current_stream().ptr, raw.ctypes.data + off))
    return raw[off:off + n].view(dtype).reshape(shape)


def alive(ptr: int, nbytes: int) -> bool:
    """Whether [ptr, ptr + nbytes) lies in one allocation of this stand-in that
    is still alive (a kernel given freed memory is a use after free)."""
    for raw in list(_LIVE.values()):
        lo = raw.__array_interface__["data"][0]
        if lo <= ptr and ptr + nbytes <= lo + raw.nbytes:
            return True
    return False


class ndarray(np.ndarray):
    """A CuPy array stand-in: numpy memory, CuPy's `.data.ptr` and `.device`."""

    def __new__(cls, shape, dtype=float, memptr=None, strides=None):
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        if memptr is None:
            return _aligned_empty(shape, dtype).view(cls)
        dtype = np.dtype(dtype)
        if strides is None:
            strides, acc = [], dtype.itemsize
            for n in reversed(shape):
                strides.append(acc)
                acc *= n
            strides = tuple(reversed(strides))
        a = _from_address(memptr.ptr, shape, dtype, tuple(strides)).view(cls)
        a._memptr = memptr      # keeps the memory's owner alive, as CuPy's MemoryPointer does
        return a

    @property
    def data(self):
        return _MemPtr(_Mem(self.ctypes.data))

    @property
    def device(self):
        return types.SimpleNamespace(id=0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A CuPy array's export: a CUDA capsule (device 0) over its memory,
        versioned where max_version >= (1, 0) is asked."""
        import dlpack_capsules
        it = self.dtype.itemsize
        return dlpack_capsules.capsule(self.ctypes.data, self.shape, self.dtype, tuple(s // it for s in self.strides),
                                       versioned=max_version is not None and tuple(max_version) >= (1, 0),
                                       keep=self)

    def __dlpack_device__(self):
        return 2, 0


ndarray.__module__ = "cupy"


def _dev(a) -> ndarray:
    return a.view(ndarray)


def empty(shape, dtype=float):
    return _aligned_empty(tuple(shape) if not isinstance(shape, int) else (shape,), dtype).view(ndarray)


def zeros(shape, dtype=float):
    a = empty(shape, dtype)
    a[...] = 0
    return a


def full(shape, value, dtype=float):
    a = empty(shape, dtype)
    a[...] = value
    return a


def asarray(x, dtype=None):
    if isinstance(x, ndarray) and (dtype is None or x.dtype == np.dtype(dtype)):
        return x
    src = np.asarray(x, dtype=dtype)
    a = empty(src.shape, src.dtype)       # an 'upload': a copy in fresh memory
    a[...] = src
    return a


def ascontiguousarray(x, dtype=None):
    x = asarray(x, dtype)
    if x.flags.c_contiguous and x.ctypes.data % 16 == 0:
        return x
    a = empty(x.shape, x.dtype)
    a[...] = x
    return a


def broadcast_to(x, shape):
    return np.broadcast_to(x, shape).view(ndarray)


def asnumpy(x, stream=None):
    return np.array(np.asarray(x).view(np.ndarray), copy=True)


def from_dlpack(x):
    """cupy.from_dlpack: the producer asked on the current stream (the legacy
    default stream's 1 for the null stream), the capsule taken over (renamed,
    its deleter called when the array goes: tests/dlpack_capsules.py)."""
    import dlpack_capsules
    ptr, shape, strides, dtype, _, owner = dlpack_capsules.from_dlpack(x, get_current_stream().ptr)
    a = _from_address(ptr, shape, dtype, strides).view(ndarray)
    a._dlpack_owner = owner
    return a


# --- cupy.cuda ---------------------------------------------------------------

class Stream:
    _next = [1000]

    def __init__(self, non_blocking=False, ptr=None):
        if ptr is None:
            Stream._next[0] += 1
            ptr = Stream._next[0]
        self.ptr, self.done, self.waited = ptr, True, []

    def __enter__(self):
        _STACK.append(self)
        return self

    def __exit__(self, *exc):
        _STACK.pop()

    def synchronize(self):
        if self.ptr in _CAPTURING:
            raise cuda.runtime.CUDARuntimeError("cudaErrorStreamCaptureUnsupported: a capturing stream "
                                                "was synchronised")

    def begin_capture(self, mode=None):
        if self.ptr in (0, 1):
            raise RuntimeError("cannot capture on the default (legacy) stream")
        _CAPTURING[self.ptr] = []

    def end_capture(self):
        return Graph(_CAPTURING.pop(self.ptr))

    def is_capturing(self):
        return self.ptr in _CAPTURING

    def wait_event(self, ev):
        self.waited.append(ev.stream_ptr)

    @classmethod
    def from_external(cls, obj):
        """CuPy 14's wrapper of a foreign stream: an object of the CUDA stream protocol."""
        version, ptr = obj.__cuda_stream__()
        if version != 0:
            raise TypeError(f"__cuda_stream__() returned unsupported version {version}")
        return _EXTERNAL.setdefault(ptr, cls(ptr=ptr))


_NULL = Stream(ptr=0)
_STACK = [_NULL]
_EXTERNAL: dict = {}


def ExternalStream(ptr, device_id=-1):
    """What CuPy before 14 offers instead of Stream.from_external."""
    return _EXTERNAL.setdefault(ptr, Stream(ptr=ptr))


def get_current_stream():
    return _STACK[-1]


_CAPTURING: dict = {}     # stream handle -> the launches recorded while it captures


class Graph:
    """What a capture recorded: launch() runs it again (on its recorded streams)."""

    def __init__(self, launches):
        self.launches = launches

    def launch(self, stream=None):
        for fn, grid, block, args, shared_mem, stream_ptr in self.launches:
            fn.launch(grid, block, args, shared_mem, stream_ptr, via="graph")


class Event:
    def __init__(self, disable_timing=False):
        self.stream_ptr = None

    def record(self, stream=None):
        self.stream_ptr = (stream or get_current_stream()).ptr
        _log(("event", self.stream_ptr))

    def synchronize(self):
        if self.stream_ptr in _CAPTURING:
            raise cuda.runtime.CUDARuntimeError("cudaErrorStreamCaptureUnsupported: an event of a "
                                                "capturing stream was synchronised")


def get_elapsed_time(start, stop):
    """Milliseconds between two recorded events: a fixed positive time here."""
    assert start.stream_ptr is not None and stop.stream_ptr is not None, "an event never recorded"
    return 1.0


class RawKernel:
    """A kernel compiled from source (hold.py's spin kernel): its launches are logged."""

    def __init__(self, code, name, **kw):
        self.name = name

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        _log(("launch", self.name, tuple(grid), tuple(block), shared_mem,
              (stream or get_current_stream()).ptr, tuple(args)))


class Device:
    def __init__(self, device_id=0):
        self.id = device_id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class _Runtime:
    @staticmethod
    def pointerGetAttributes(ptr):
        return types.SimpleNamespace(device=0)

    @staticmethod
    def getDeviceCount():
        return 0

    @staticmethod
    def getDevice():
        return 0

    @staticmethod
    def memGetInfo():
        return 1 << 30, 1 << 30

    @staticmethod
    def streamIsCapturing(stream):
        return stream in _CAPTURING

    @staticmethod
    def graphLaunch(graph_exec, stream):
        _graph_launch(graph_exec, stream)

    @staticmethod
    def deviceSynchronize():
        if _CAPTURING:
            raise cuda.runtime.CUDARuntimeError("cudaErrorStreamCaptureUnsupported: a device sync while "
                                                "a stream captures")

    @staticmethod
    def getDeviceProperties(device_id):
        return {"clockRate": 1980000, "multiProcessorCount": 132}


# Parameter arrays (launch._Params) alive now, by address, while `tracking_params`
# is on (the tests' `cp` fixture): a launch or a graph node given an array no live
# _Params owns reads freed host memory (the bug bench-cuda-call's first GPU run
# hit), and the check says so instead of reading it.
PARAM_ARRAYS = weakref.WeakValueDictionary()
TRACK_PARAMS = {0: False}

_SIZES = {"P": 8, "i": 4, "q": 8, "f": 4, "d": 8}


def tracking_params(monkeypatch) -> None:
    """Register every launch._Params made from now on (this test), and check each
    launch's parameter array against them (see PARAM_ARRAYS)."""
    from shadertune.backends.cuda import launch
    real = launch._Params.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        PARAM_ARRAYS[self.address] = self
    monkeypatch.setattr(launch._Params, "__init__", init)
    monkeypatch.setitem(TRACK_PARAMS, 0, True)


def _params_of(sig: str, kernel_params: int) -> tuple:
    """The arguments at the void* array `kernel_params` read by the kernel's own
    signature `sig`; with tracking, first checked: the array belongs to a live
    _Params, and each slot points at a value of the size the kernel reads."""
    if TRACK_PARAMS[0]:
        p = PARAM_ARRAYS.get(kernel_params)
        assert p is not None, f"a launch was given a parameter array at {kernel_params:#x} that no live _Params owns"
        naddr = len(p.addrs)
        assert naddr + len(p.values) == len(sig), (sig, naddr, len(p.values))
        base = ctypes.addressof(p.addrs)
        for i, c in enumerate(sig):
            slot = p.array[i]
            if i < naddr:
                assert c == "P" and slot == base + 8 * i, (sig, i)
            else:
                v = p.values[i - naddr]
                assert slot == ctypes.addressof(v) and ctypes.sizeof(v) == _SIZES[c], (sig, i, type(v).__name__)
    slots = (ctypes.c_void_p * len(sig)).from_address(kernel_params)
    return tuple(_READ[c](slot) for c, slot in zip(sig, slots))


def launchKernel(f, gx, gy, gz, bx, by, bz, shared_mem, stream, kernel_params, extra):
    """cupy.cuda.driver.launchKernel (cuLaunchKernel) on a FakeFunction's
    handle: its arguments are read back from the void* array at
    `kernel_params` by the parameter types of the kernel's CUDA signature
    (FakeFunction.signature), then the launch runs as a RawKernel call."""
    fn = _FUNCTIONS[f]
    args = _params_of(fn.signature(), kernel_params)
    fn.launch((gx, gy, gz), (bx, by, bz), args, shared_mem, stream, via="launchKernel")


class FakeDriver:
    """graphs.Driver over the stand-in: a graph is a chain of kernel nodes; a
    node's arguments are read from its parameter array when the node is made or
    an executable graph's node is updated (the driver copies them then), and an
    executable graph's launch runs the copies it holds, in order. `updates` and
    `instantiated` count those driver calls."""

    def __init__(self):
        self.graphs, self.execs, self.ids = {}, {}, itertools.count(0x9000)
        self.updates = self.instantiated = 0

    @staticmethod
    def _node(params):
        from shadertune.backends.cuda.graphs import KernelNodeParams
        prm = params if isinstance(params, KernelNodeParams) else KernelNodeParams.from_address(params)
        fn = _FUNCTIONS[prm.func]
        args = _params_of(fn.signature(), prm.kernelParams)
        return (fn, (prm.gridDimX, prm.gridDimY, prm.gridDimZ), (prm.blockDimX, prm.blockDimY, prm.blockDimZ),
                args, prm.sharedMemBytes)

    def check(self, rc, what):
        if rc:
            raise RuntimeError(f"{what}: {rc}")

    def create(self):
        g = next(self.ids)
        self.graphs[g] = []
        return g

    def add_kernel_node(self, graph, after, params):
        nodes = self.graphs[graph]
        assert after == (nodes[-1][0] if nodes else None), "a node not after the last one"
        node = next(self.ids)
        nodes.append((node, self._node(params)))
        return node

    def instantiate(self, graph):
        e = next(self.ids)
        self.execs[e] = dict(self.graphs[graph])
        self.instantiated += 1
        return e

    def set_params(self, ex, node, params_address):
        assert node in self.execs[ex]
        self.execs[ex][node] = self._node(params_address)
        self.updates += 1
        return 0

    def destroy_exec(self, e):
        del self.execs[e]

    def destroy(self, graph, execs):
        for e in execs:
            del self.execs[e]
        del self.graphs[graph]

    def launch(self, ex, stream_ptr):
        """cudaGraphLaunch (CuPy's runtime.graphLaunch)."""
        for fn, grid, block, args, shared_mem in self.execs[ex].values():
            fn.launch(grid, block, args, shared_mem, stream_ptr, via="graph")


DRIVER = FakeDriver()


def _graph_launch(graph_exec, stream_ptr):
    DRIVER.launch(graph_exec, stream_ptr)


def _read(ctype, to):
    return lambda addr: to(ctype.from_address(addr).value)


# how a kernel reads each parameter: pointers as ints (as CuPy's RawKernel call
# passes them), scalars as the numpy types the RawKernel call is given
_READ = {"P": _read(ctypes.c_uint64, int), "i": _read(ctypes.c_int32, np.int32),
         "q": _read(ctypes.c_int64, np.int64), "f": _read(ctypes.c_float, np.float32),
         "d": _read(ctypes.c_double, np.float64)}

class _NVRTC:
    """NVRTC as compiler.py calls it: a 'cubin' is the source's bytes; a source
    with '#error' fails to compile; `compiled` lists the sources compiled, in order."""
    NVRTCError = type("NVRTCError", (Exception,), {})
    compiled: list = []

    @staticmethod
    def getVersion():
        return (13, 0)

    @staticmethod
    def createProgram(source, name, headers, includes):
        return [source]

    @classmethod
    def compileProgram(cls, prog, options):
        if "#error" in prog[0]:
            raise cls.NVRTCError("NVRTC_ERROR_COMPILATION")
        cls.compiled.append(prog[0])

    @staticmethod
    def getCUBIN(prog):
        return prog[0].encode()

    @staticmethod
    def getProgramLog(prog):
        return "error: #error"

    @staticmethod
    def destroyProgram(prog):
        pass


cuda = types.SimpleNamespace(
    Stream=Stream, nvrtc=_NVRTC, ExternalStream=ExternalStream, get_current_stream=get_current_stream, Event=Event,
    get_elapsed_time=get_elapsed_time,
    Device=Device, UnownedMemory=_Mem, MemoryPointer=_MemPtr, runtime=_Runtime,
    driver=types.SimpleNamespace(CUDADriverError=type("CUDADriverError", (Exception,), {}),
                                 launchKernel=launchKernel),
)
cuda.runtime.CUDARuntimeError = type("CUDARuntimeError", (Exception,), {})
__name__ = "cupy"


# --- kernels -------------------------------------------------------------------

def host_view(ptr: int, shape, dtype) -> np.ndarray:
    """A C-contiguous numpy view of `shape` at address `ptr`."""
    dtype = np.dtype(dtype)
    n = math.prod(shape) * dtype.itemsize
    return np.frombuffer((ctypes.c_char * max(n, 1)).from_address(ptr), dtype, math.prod(shape)).reshape(shape)


def _ptr(x) -> int:
    return x.ctypes.data if isinstance(x, np.ndarray) else int(x)


_FUNCTIONS = weakref.WeakValueDictionary()   # handle -> FakeFunction
_HANDLES = itertools.count(0x7000)
PACKED: dict = {}     # a packed buffer's address -> the operand's address the pack read


class FakeFunction:
    """A launch of st_gemm (or st_gemm_reduce) computed in numpy from its
    arguments as the CUDA kernels read them (shaders/cuda/*.cu): A, B stored
    row-major per the problem's trans flags, product b at A + b * sA (sA, sB
    the two trailing arguments of a batched kernel), C contiguous; grid.y =
    M tiles x products, grid.z = K_G. With K_G > 1 and the separate
    reduction, each split's partial goes to W (split z's slice M * N *
    products apart; here all of the sum in split 0) and the reduce launch
    applies alpha, beta. The pack kernel of a pre-split config (pack=True,
    st_gemm_pack(A, B, PA, PB, M, N, K)) stands for what it writes by noting
    which operand each packed buffer holds (PACKED); the GEMM reads A, B
    through that note, so a GEMM given buffers no pack wrote fails."""

    def __init__(self, problem, config, d, reduce=False, pack=False):
        self.p, self.c, self.d, self.reduce, self.pack = problem, config, d, reduce, pack
        self.name = "st_gemm_reduce" if reduce else "st_gemm_pack" if pack else "st_gemm"
        self.calls = []
        handle = next(_HANDLES)
        _FUNCTIONS[handle] = self
        self.kernel = types.SimpleNamespace(ptr=handle)   # RawKernel.kernel: the loaded Function

    def signature(self) -> str:
        """The kernel's parameters as this stand-in reads them, written out from
        shaders/cuda/signature.cu and splitk_reduce.cu (the codes of launch.py)."""
        t = {"float32": "f", "float64": "d"}[self.p.dtype]
        if self.reduce:       # W, C, long long MN, alpha, beta
            return "PPq" + t + t
        if self.pack:         # A, B, PA, PB, int M, N, K (pack_split.cu)
            return "PPPPiii"
        # A, B, C, W, counters, int M, N, K, k_units, alpha, beta [, long long sA, sB]
        return "PPPPPiiii" + t + t + ("qq" if self.p.batch > 1 else "")

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        """The RawKernel call."""
        self.launch(grid, block, args, shared_mem, (stream or get_current_stream()).ptr, via="RawKernel")

    def launch(self, grid, block, args, shared_mem, stream_ptr, via):
        if stream_ptr in _CAPTURING:       # recorded into the graph, run when it is launched
            _CAPTURING[stream_ptr].append((self, grid, block, tuple(args), shared_mem, stream_ptr))
            _log(("captured", self.name, tuple(grid), tuple(block), shared_mem, stream_ptr, tuple(args)))
            return
        self.calls.append({"grid": grid, "block": block, "args": args, "stream": stream_ptr, "via": via,
                           "shared_mem": shared_mem})
        _log(("launch", self.name, tuple(grid), tuple(block), shared_mem, stream_ptr, tuple(args)))
        p, dt = self.p, np.dtype(self.p.dtype)
        if self.pack:
            A, B, PA, PB = (_ptr(x) for x in args[:4])
            assert alive(PA, 4) and alive(PB, 4), "the packed operands' workspace was freed before the pack"
            PACKED[PA], PACKED[PB] = A, B
            return
        if self.reduce:
            W, C, mn, alpha, beta = args
            kg = self.c["KG"]
            assert alive(_ptr(W), kg * int(mn) * dt.itemsize), "the K_G workspace was freed before its launch"
            w = host_view(_ptr(W), (kg, int(mn)), dt)
            c = host_view(_ptr(C), (int(mn),), dt)
            c[...] = alpha * w.sum(0) + (beta * c if beta != 0 else 0)
            return
        A, B, C, W, cnt, M, N, K, k_units, alpha, beta = args[:11]
        if self.c.get("PS", 0):      # the packed operands: what the pack wrote there
            assert alive(_ptr(A), 4) and alive(_ptr(B), 4), "the packed operands were freed before the GEMM"
            A, B = PACKED[_ptr(A)], PACKED[_ptr(B)]
        sa, sb = (int(args[11]), int(args[12])) if p.batch > 1 else (0, 0)
        assert (int(M), int(N), int(K)) == (p.M, p.N, p.K) and len(args) == (13 if p.batch > 1 else 11)
        mtiles = -(-p.M // self.c["BM"])
        if self.c.get("SK", 0):
            # stream-K: a persistent grid (streamk.py), partials in 2 G slots, a counter a tile
            from shadertune.backends.cuda import streamk
            tiles, _, units = streamk.shape(p, self.c["BM"], self.c["BN"], self.d.KT)
            assert grid[1:] == (1, 1) and grid[0] == streamk.grid(units, self.c["SK"], 132) and p.batch == 1
            assert alive(_ptr(W), streamk.workspace(grid[0], self.c["BM"], self.c["BN"]) * dt.itemsize), \
                "the stream-K workspace was freed before its launch"
            assert alive(_ptr(cnt), 4 * tiles), "the stream-K counters were freed before the launch"
            grid = (-(-p.N // self.c["BN"]), mtiles, 1)      # computed below as one launch of the tiles
        assert grid[0] == -(-p.N // self.c["BN"]) and grid[1] % mtiles == 0 and grid[2] == self.c["KG"]
        assert grid[1] <= 65535
        nb = grid[1] // mtiles
        sa_shape, sb_shape = ((p.K, p.M) if p.trans_a else (p.M, p.K)), ((p.N, p.K) if p.trans_b else (p.K, p.N))
        it = dt.itemsize
        split = self.c["KG"] > 1 and not self.c["KR"]
        if self.c["KG"] > 1:
            assert alive(_ptr(W), self.c["KG"] * nb * p.M * p.N * it), "the K_G workspace was freed before its launch"
        for b in range(nb):
            a = host_view(_ptr(A) + b * sa * it, sa_shape, dt)
            bm = host_view(_ptr(B) + b * sb * it, sb_shape, dt)
            prod = (a.T if p.trans_a else a).astype(np.float64) @ (bm.T if p.trans_b else bm)
            if split:
                w = host_view(_ptr(W), (self.c["KG"], nb, p.M, p.N), dt)
                w[:, b] = 0
                w[0, b] = prod
            else:
                c = host_view(_ptr(C) + b * p.M * p.N * it, (p.M, p.N), dt)
                c[...] = alpha * prod + (beta * c if beta != 0 else 0)


class FakeKernel:
    """What call.execute needs of a kernel: enqueue(...) as CUDAKernel.enqueue,
    and release() (matmul's kernel cache releases what it drops)."""

    def __init__(self, problem):
        from shadertune.core.config import Config
        self.problem = problem
        self.config = Config(BM=32, BN=32, KG=1, KR=0)
        self.fn = FakeFunction(problem, self.config, None)
        self.calls = []

    released = False

    def release(self):
        self.released = True

    def enqueue(self, a_ptr, b_ptr, c_ptr, sa, sb, batch, alpha, beta, stream=None, alloc=None):
        assert batch == self.problem.batch and not self.released
        self.calls.append((a_ptr, b_ptr, c_ptr, sa, sb, batch, stream.ptr if stream else None))
        p = self.problem
        mt = -(-p.M // 32)
        args = (a_ptr, b_ptr, c_ptr, 0, 0, p.M, p.N, p.K, 0, alpha, beta) + ((sa, sb) if p.batch > 1 else ())
        self.fn((-(-p.N // 32), mt * batch, 1), (128,), args, stream=stream)
