"""Load a compiled GEMM, launch it through CuPy, time it with CUDA events."""
from __future__ import annotations

import logging
import time

import numpy as np

from ...core.config import Config
from ...errors import InvalidConfig, RunError
from ...core.problem import Problem
from .codegen import KERNEL, reduce_shape
from .compiler import compile_cubin
from .device import import_cupy
from .launch import PACK_SIGNATURE, BoundLaunch, KernelLaunch, gemm_signature, reduce_signature
from .timing import call_times, event_times
from .space import derive
from . import capture, device_check, graphs, streamk
from ..base import Kernel

log = logging.getLogger("shadertune.cuda")

DEFAULT_SMEM = 48 * 1024   # above this a kernel must opt in
MAX_GRID_Y = 65535         # grid.y holds M tiles x products: longer batches launch in chunks
PACK_THREADS = 256         # pack_split.cu's block: one thread per 4 floats of both halves
# The K_G workspace is kept per stream up to this size (bytes); a larger one comes
# from CuPy's pool per call: a kept buffer stays allocated for the kernel's life on
# every stream it ran on. A call with a workspace not kept takes enqueue's way (no
# steady launch, no graph) and costs 12-15 us more on the H200 host: the untuned pick
# ranks it so (call_workspace, tuning.CALL_WORKSPACE). 32 MiB: the workspace PyTorch
# gives cuBLAS on Hopper, and what the split configs of mid-size products need (K_G 4
# at 1024^3: 16 MiB, at 1200^3: 23 MiB), the products whose calls the 12-15 us
# weigh on; matmul keeps 8 CUDA kernels (kernels_kept), so a stream holds at most
# 256 MiB of kept workspaces, released with their kernels.
WORKSPACE_KEEP = 32 << 20
WORKSPACE_STREAMS = 8      # streams a kernel keeps a workspace for (the oldest is dropped)


def _cuda_errors(cupy):
    return (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError)


class CUDAKernel(Kernel):
    """One compiled config for one problem (see backends.base.Kernel)."""

    def __init__(self, problem: Problem, config: Config, source: str, arch: str, limits: dict):
        cupy = self._cp = import_cupy()
        self.problem, self.config, self.source = problem, config, source
        self.d = derive(problem, config)
        t0 = time.perf_counter()
        path = compile_cubin(source, arch)
        try:
            self._module = cupy.RawModule(path=str(path))
            self._main = self._module.get_function(KERNEL)
            split_kernel = config["KG"] > 1 and not config["KR"]
            self._reduce = self._module.get_function(KERNEL + "_reduce") if split_kernel else None
            self._pack = self._module.get_function(KERNEL + "_pack") if config.get("PS", 0) else None
            attrs = self._main.attributes
        except _cuda_errors(cupy) as e:
            raise RunError(f"loading the module failed: {e}") from None
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self.regs, self.local_bytes = attrs["num_regs"], attrs["local_size_bytes"]
        # The device's answer, after register allocation, is what decides.
        if attrs["max_threads_per_block"] < self.d.threads:
            raise InvalidConfig(f"{self.d.threads} threads but the device launches at most "
                                f"{attrs['max_threads_per_block']} with {self.regs} registers each")
        if self.d.smem_bytes > limits["max_smem_per_block_optin"]:
            raise InvalidConfig(f"{self.d.smem_bytes} B of shared memory > {limits['max_smem_per_block_optin']}")
        if self.d.smem_bytes > DEFAULT_SMEM:
            try:
                self._main.max_dynamic_shared_size_bytes = self.d.smem_bytes
            except _cuda_errors(cupy) as e:
                raise InvalidConfig(f"cannot opt in to {self.d.smem_bytes} B of shared memory: {e}") from None
        self._init_state(limits["num_sms"])

    # How time() times this kernel by default: its device time held behind a spin
    # kernel, or (True) as a call runs it, events around each call and a sync after
    # it, host launch cost included (CUDABackend.build decides per problem).
    call_timed = False

    @classmethod
    def from_functions(cls, cp, problem: Problem, config: Config, main, reduce=None, pack=None,
                       sms: int = 132) -> "CUDAKernel":
        """A kernel over compiled functions given as they are (stand-ins for a
        module: the tests' fake CuPy, bench-host-overhead's stubs): the launch
        path, no compile and no device."""
        k = object.__new__(cls)
        k._cp, k.problem, k.config, k.source = cp, problem, config, ""
        k.d = derive(problem, config)
        k._main, k._reduce, k._pack = main, reduce, pack
        k._init_state(sms)
        return k

    def _init_state(self, sms: int) -> None:
        self._args = self._keep = None
        self._timed_go = None   # the launches time(mode='call') runs (_call)
        self._held = None       # a released kernel's per-call counters, until the next call
        self._cnt = {}    # stream handle -> KR / SK counters
        self._ws = {}     # stream handle -> K_G workspace
        self._sms = sms   # the stream-K grid's SMs
        self.released = False   # release() ran: the cache dropped it, nothing may launch it
        self._pinned = False    # launched in a stream capture: a graph may replay it (capture.py)
        self._launch_constants()

    # --- device-side -----------------------------------------------------
    def _to_device(self, x, shape, name):
        cp = self._cp
        x = cp.asarray(x)
        if x.shape != shape:
            raise ValueError(f"{name} has shape {x.shape}, expected {shape} (stored layout of {self.problem.key})")
        x = cp.ascontiguousarray(x, dtype=self.problem.dtype)
        if x.data.ptr % 16:   # a view at an odd offset: vector loads need 16-byte alignment
            x = x.copy()
        return x

    def prepare(self, A, B, C=None, *, alpha=1.0, beta=0.0):
        """Put the operands on the device (CuPy arrays are used in place when
        contiguous); C's buffer is poisoned with NaN when beta == 0. A batch
        (problem.batch > 1) is stored as contiguous stacks."""
        cp, p = self._cp, self.problem
        sa, sb = p.stored_shapes
        dA, dB = self._to_device(A, sa, "A"), self._to_device(B, sb, "B")
        if beta != 0.0:
            if C is None:
                raise ValueError("beta != 0 needs C")
            dC = self._to_device(C, p.out_shape, "C").copy()
        else:
            dC = cp.full(p.out_shape, np.nan, dtype=p.dtype)
        self._args = (dA.data.ptr, dB.data.ptr, dC.data.ptr, p.M * p.K, p.K * p.N, p.batch, alpha, beta)
        self._keep = (dA, dB, dC)    # launch() and time() write C again after run() returned it
        return dC

    def launch(self, stream=None):
        """Enqueue the kernel(s) on the arguments of the last prepare()."""
        self.enqueue(*self._args, stream=stream)

    def _launch_constants(self) -> None:
        """What every launch passes, computed once (a call's host cost matters
        for small products: notes/cuda.md)."""
        p, d = self.problem, self.d
        self._T = np.float32 if p.dtype == "float32" else np.float64
        self._mtiles = d.grid[1] // p.batch
        self._mn = p.M * p.N
        self._dims = (p.M, p.N, p.K, d.k_units)
        self._kg = self.config["KG"]
        self._rshape = reduce_shape(p, self.config) if self._reduce is not None else None
        self._grid1 = (d.grid[0], self._mtiles, 1)   # one launch of one product (the common call)
        self._block = (d.threads,)
        self._grid_kg = (d.grid[0], self._mtiles, d.grid[2])   # ... of one product split K_G ways
        self._w1 = self._mn * self._kg                        # its workspace (elements)
        self._rgrid1 = (-(-self._mn // self._rshape[0]), 1, 1) if self._reduce is not None else None
        self._scales = (None,)                     # (alpha, beta) -> their constants, the last pair
        # the parameter arrays built once (launch.py); the RawKernel call where CuPy cannot
        self._launch_main = KernelLaunch(self._cp, self._main, gemm_signature(p), self._block, d.smem_bytes)
        self._launch_reduce = (KernelLaunch(self._cp, self._reduce, reduce_signature(p), self._rshape)
                               if self._reduce is not None else None)
        if self._pack is not None:   # PS: the packed operands' floats and the pack kernel's grid
            c, ktiles = self.config, -(-p.K // self.config["BK"])
            self._packed = (-(-p.M // c["BM"]) * c["BM"] * ktiles * c["BK"] * 2,
                            -(-p.N // c["BN"]) * c["BN"] * ktiles * c["BK"] * 2)
            self._pack_grid = (-(-sum(self._packed) // (8 * PACK_THREADS)), 1, 1)   # a thread: 4 floats of each half
            self._launch_pack = KernelLaunch(self._cp, self._pack, PACK_SIGNATURE, (PACK_THREADS,))
        self._sk = self.config.get("SK", 0)
        if self._sk:   # stream-K: the persistent grid and its partials' workspace (streamk.py)
            tiles, _, units = streamk.shape(p, self.config["BM"], self.config["BN"], d.KT)
            g = streamk.grid(units, self._sk, self._sms)
            self._grid_sk = (g, 1, 1)
            self._w_sk = streamk.workspace(g, self.config["BM"], self.config["BN"])

    def _scales_of(self, alpha, beta) -> tuple:
        """((alpha, beta), the main kernel's constants, (alpha, beta) rounded to
        T, the reduction's constants for one product): one tuple each while the
        pair does not change, so the launches write them once."""
        T = self._T
        a, b = float(T(alpha)), float(T(beta))
        return ((alpha, beta), self._dims + (a, b), (a, b), (self._mn, a, b))

    def enqueue(self, a_ptr: int, b_ptr: int, c_ptr: int, sa: int, sb: int, batch: int,
                alpha: float, beta: float, stream=None, alloc=None) -> None:
        """Enqueue C = alpha * op(A) op(B) + beta * C on `stream` (CuPy's
        current one by default) for `batch` products of the problem's shape:
        A and B are device addresses of stored row-major matrices `sa`, `sb`
        elements apart (0: broadcast), C is contiguous. Nothing is
        synchronised; the K_G workspace is the stream's own (_workspace), so
        it is not reused before the launches queued before are done. The
        launches go through prebuilt parameter arrays (launch.py).

        `alloc(n, dtype, zero)` -> (address, owner) is the caller's framework's
        allocator (call.py), used for a workspace made for this call alone (above
        WORKSPACE_KEEP) and for every buffer of a call made while `stream` is
        capturing a graph (capture.py: those are fresh and pinned, as is the
        kernel); None: CuPy's pool."""
        p, d = self.problem, self.d
        if batch == 0 or self._mn == 0:
            return
        if batch > 1 and p.batch == 1:
            raise ValueError(f"a kernel for one product ({p.key}) was given a batch of {batch}")
        st = stream if stream is not None else self._cp.cuda.get_current_stream()
        fresh = capture.capturing(self._cp, st.ptr)
        if fresh:
            self._pin()
        mtiles = self._mtiles
        scales = self._scales
        if scales[0] != (alpha, beta):
            scales = self._scales = self._scales_of(alpha, beta)
        try:
            if self._sk:
                self._enqueue_streamk(a_ptr, b_ptr, c_ptr, scales, st, fresh, alloc)
                return
            if self._pack is not None:
                self._enqueue_packed(a_ptr, b_ptr, c_ptr, scales, st, fresh, alloc)
                return
            if self._kg == 1 and mtiles * batch <= MAX_GRID_Y:   # one launch, nothing to allocate
                if p.batch > 1:
                    self._launch_main.launch((d.grid[0], mtiles * batch, 1), st,
                                             (a_ptr, b_ptr, c_ptr, c_ptr, 0), scales[1] + (sa, sb))
                else:
                    self._launch_main.launch(self._grid1, st, (a_ptr, b_ptr, c_ptr, c_ptr, 0), scales[1])
                return
            if p.batch == 1 and mtiles <= MAX_GRID_Y:
                # one product split K_G ways (the common split call): _enqueue_chunks' one chunk
                ws = self._workspace(st, self._w1, fresh, alloc)     # held (ws[1]) until the launches are queued
                self._launch_main.launch(self._grid_kg, st,
                                         (a_ptr, b_ptr, c_ptr, ws[0], self._counters(st, fresh, alloc)), scales[1])
                if self._reduce is not None:
                    self._launch_reduce.launch(self._rgrid1, st, (ws[0], c_ptr), scales[3])
                return
            self._enqueue_chunks(a_ptr, b_ptr, c_ptr, sa, sb, batch, scales, st, fresh, alloc)
        except _cuda_errors(self._cp) as e:
            raise _launch_error(e) from None

    def launcher(self, sa: int, sb: int, batch: int, graphs: bool = False):
        """The launches of a call of `batch` products (operands `sa`, `sb` elements
        apart) as one callable with parameter arrays of its own (SteadyLaunch), for
        matmul's express lane; `graphs`: through executable CUDA graphs where the
        driver's graph entry points are there (graphs.py); None where this kernel's
        launches cannot go through prebuilt parameters (enqueue serves it)."""
        if not self._launch_main.fast or batch < 1 or (batch > 1 and self.problem.batch == 1):
            return None
        return SteadyLaunch(self, sa, sb, batch, graphs=graphs)

    def _pin(self) -> None:
        """A graph may replay this kernel's launches: its module stays loaded."""
        if not self._pinned:
            self._pinned = True
            capture.pin(self)

    def _enqueue_chunks(self, a_ptr, b_ptr, c_ptr, sa, sb, batch, scales, st, fresh, alloc):
        """enqueue() with a K_G workspace and/or a batch longer than one grid
        (grid.y = M tiles x products <= MAX_GRID_Y): launches of `chunk` products."""
        p, d, mtiles, mn = self.problem, self.d, self._mtiles, self._mn
        chunk = min(batch, MAX_GRID_Y // mtiles)
        it = p.itemsize
        ws = self._workspace(st, chunk * mn * self._kg, fresh, alloc) if self._kg > 1 else (0,)   # held until queued
        w = ws[0]
        cnt = self._counters(st, fresh, alloc)
        consts = scales[1] + (sa, sb) if p.batch > 1 else scales[1]
        main, grid_x, grid_z = self._launch_main.launch, d.grid[0], d.grid[2]
        for b0 in range(0, batch, chunk):
            nb = min(chunk, batch - b0)
            c0 = c_ptr + b0 * mn * it
            main((grid_x, mtiles * nb, grid_z), st, (a_ptr + b0 * sa * it, b_ptr + b0 * sb * it, c0, w or c0, cnt),
                 consts)
            if self._reduce is not None:   # RX elements x RZ lanes of z per block
                self._launch_reduce.launch((-(-(nb * mn) // self._rshape[0]), 1, 1), st, (w, c0),
                                           scales[3] if nb == 1 else (nb * mn,) + scales[2])

    def _workspace(self, stream, n: int, fresh: bool = False, alloc=None) -> tuple:
        """(address, array, elements) of a K_G workspace of at least n elements
        for launches on `stream`. Launches on one stream run in order, so one
        buffer serves every launch queued there: a call's main kernel writes it
        only after the previous call's reduction (or last blocks) read it.
        Another stream gets its own. A buffer dropped (a larger one needed, more
        than WORKSPACE_STREAMS streams, or release()) goes back to CuPy's pool
        in the arena of the stream it was allocated on, which hands it out to
        later allocations on that stream only, ordered after the launches that
        used it. Above WORKSPACE_KEEP bytes, and on a released kernel (a call that
        raced the cache's release: nothing is kept on it any more): one from the
        caller's allocator (CuPy's pool by default) per call; `fresh` (a capture):
        one for this call, pinned.
        The caller holds the returned array until its launches are queued (one
        not kept here goes back to the pool when dropped)."""
        p = self.problem
        if fresh or n * p.itemsize > WORKSPACE_KEEP or self.released:
            ptr, W = self._alloc(stream, n, p.dtype, False, alloc)
            if fresh:
                capture.pin(W)
            return ptr, W, n
        key = stream.ptr
        ws = self._ws.get(key)
        if ws is None or ws[2] < n:
            if ws is None and len(self._ws) >= WORKSPACE_STREAMS:
                del self._ws[next(iter(self._ws))]
            ptr, W = self._alloc(stream, n, p.dtype, False, None)
            ws = self._ws[key] = (ptr, W, n)
        return ws

    def _alloc(self, stream, n: int, dtype: str, zero: bool, alloc) -> tuple:
        """(address, owner) of n elements of `dtype` for launches on `stream`:
        from `alloc` (the caller's framework) or CuPy's pool, zeroed on the stream
        if asked."""
        if alloc is not None:
            return alloc(n, dtype, zero)
        cp = self._cp
        with stream:
            a = (cp.zeros if zero else cp.empty)((n,), dtype=dtype)
        return a.data.ptr, a

    def _enqueue_packed(self, a_ptr, b_ptr, c_ptr, scales, st, fresh, alloc):
        """PS > 0 (one product, no split-K): the pack kernel splits A and B into
        a workspace of packed tiles (the stream's own, as K_G's: _workspace),
        then the GEMM reads them."""
        if self._pack_grid[0] == 0:      # K = 0: nothing to pack; C = beta * C
            ws, pa, pb = None, a_ptr, b_ptr
        else:
            ws = self._workspace(st, sum(self._packed), fresh, alloc)     # held until the launches are queued
            pa = ws[0]
            pb = pa + 4 * self._packed[0]
            self._launch_pack.launch(self._pack_grid, st, (a_ptr, b_ptr, pa, pb), self._dims[:3])
        self._launch_main.launch(self._grid1, st, (pa, pb, c_ptr, c_ptr, 0), scales[1])

    def _enqueue_streamk(self, a_ptr, b_ptr, c_ptr, scales, st, fresh, alloc):
        """SK > 0 (one product, no K_G): the persistent grid, its partials in the
        stream's workspace (after the packed operands with PS, whose pack kernel
        runs first), the tiles' counters."""
        packed = sum(self._packed) if self._pack is not None else 0
        ws = self._workspace(st, packed + self._w_sk, fresh, alloc)      # held until the launches are queued
        a, b, w = a_ptr, b_ptr, ws[0] + packed * self.problem.itemsize
        if packed:
            a, b = ws[0], ws[0] + self.problem.itemsize * self._packed[0]
            self._launch_pack.launch(self._pack_grid, st, (a_ptr, b_ptr, a, b), self._dims[:3])
        self._launch_main.launch(self._grid_sk, st, (a, b, c_ptr, w, self._counters(st, fresh, alloc)), scales[1])

    def _counters(self, stream, fresh: bool = False, alloc=None):
        """KR's and SK's arrival counters, one per C tile: zero between launches
        (the last block of a tile resets its own), so one set serves every launch
        queued on one stream; launches on another stream get their own; `fresh`
        (a capture): a set for this call, zeroed on the stream (the graph zeroes
        them before every replay), pinned."""
        if not (self.config["KR"] or self._sk):
            return 0
        n = self.d.grid[0] * self.d.grid[1]
        if fresh or self.released:
            ptr, arr = self._alloc(stream, n, "int32", True, alloc)
            if fresh:
                capture.pin(arr)
            else:                # a released kernel's call: held until its launches are queued
                self._held = arr
            return ptr
        key = stream.ptr
        cnt = self._cnt.get(key)
        if cnt is None:
            cnt = self._cnt[key] = self._alloc(stream, n, "int32", True, None)
        return cnt[0]

    def _sync(self):
        try:
            self._cp.cuda.get_current_stream().synchronize()
        except _cuda_errors(self._cp) as e:
            raise RunError(f"kernel failed: {e}") from None

    # --- Kernel protocol -------------------------------------------------
    def run(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
        dC = self.prepare(A, B, C, alpha=alpha, beta=beta)
        self.launch()
        self._sync()
        return self._cp.asnumpy(dC)

    def checked_compare(self, A, B, ref, *, cache=None):
        """run() on the search's inputs kept on the device, C compared with the
        float64 reference there (device_check.py): nothing copied per config."""
        inputs = device_check.device_inputs(self._cp, cache, A, B, ref)
        if inputs is None:
            return None
        dA, dB, dref = inputs
        dC = self.prepare(dA, dB)
        self.launch()
        self._sync()
        if dC.shape != dref.shape:       # the evaluator says so (a wrong output shape)
            return dC.shape, 0, 0.0
        try:
            bad, sq = device_check.compare(self._cp, dC, dref)
        except _cuda_errors(self._cp) as e:
            raise RunError(f"comparing the output failed: {e}") from None
        return dC.shape, bad, sq

    def time(self, repeats: int = 10, warmup: int = 2, hold_stream: bool = True,
             mode: str | None = None) -> list[float]:
        """Milliseconds of `repeats` event-timed calls on the last prepare()'s
        operands. mode 'held': the launches queue up behind a spin kernel first,
        so host launch overhead is not timed: the device's time alone (hold.py);
        'unheld': the same without the spin; 'call': as a call runs them, a
        result allocated as matmul allocates it and the call's launches between
        two events, a sync after each (host launch cost and the idle GPU's start
        included: what a user timing one call sees). None: 'call' where the
        backend marked the problem call-timed (call_timed: kernels whose host
        cost is not small beside them), else 'held' (or 'unheld' without
        `hold_stream`)."""
        if self._args is None:
            raise RunError("time() needs a run() first (it times the last inputs)")
        if mode is None:
            mode = "call" if self.call_timed and hold_stream else "held" if hold_stream else "unheld"
        if mode not in ("held", "unheld", "call"):
            raise ValueError(f"time(mode=...) is 'held', 'unheld' or 'call', got {mode!r}")
        try:
            if mode == "call":
                return call_times(self._call, repeats, warmup=warmup)
            return event_times(self.launch, repeats, warmup=warmup, hold_stream=mode == "held")
        except _cuda_errors(self._cp) as e:
            raise RunError(f"kernel failed: {e}") from None

    def _call(self) -> None:
        """What a repeated matmul call on CuPy arrays does on the last prepare()'s
        operands (the express lane, express.py): its result allocated as the lane
        allocates it (a fresh C where beta == 0; else C in place, as out=), then its
        launches through the lane's launch means (the key's SteadyLaunch: parameter
        arrays of its own, or graphs where graphs.wanted())."""
        a, b, c, sa, sb, batch, alpha, beta = self._args
        go = self._timed_go
        if go is None or go.args != (sa, sb, batch):
            go = self._timed_go = self.launcher(sa, sb, batch, graphs=graphs.wanted()) or _Enqueue(self, sa, sb, batch)
        cp = self._cp
        st = cp.cuda.get_current_stream()
        if beta == 0.0:
            out = cp.ndarray(self.problem.out_shape, self.problem.dtype)
            c = out.data.ptr
        go(a, b, c, alpha, beta, st)

    def release(self) -> None:
        """Free the buffers the kernel keeps (its K_G / stream-K workspaces and tile
        counters: back to the pool of the stream each was allocated on, which hands
        them out after the launches queued there); a pinned one (capture.py) keeps
        them, a graph may still replay them. The module and the launch objects stay:
        a call that checked `released` just before the cache released the kernel
        (another thread's call, clear_cache) still launches valid code and gets
        buffers of its own (_workspace), and CuPy keeps a loaded module for the
        life of the process anyway (RawModule's cache), so dropping ours would free
        no device memory."""
        self.released = True
        self._args = self._keep = None
        if self._pinned:
            return
        self._cnt, self._ws = {}, {}


def call_workspace(problem: Problem, config, sms: int) -> int:
    """Elements of the workspace one call of `config` needs (SteadyLaunch.need, or a
    chunk's in enqueue for a batch split K_G ways): the pre-split operands (PS),
    stream-K's partials (SK) after them, or the K_G partials. Above WORKSPACE_KEEP
    bytes each call allocates it. Plain arithmetic on the knobs: the cost model
    asks it of every config it ranks as a call (tuning.call_cycles)."""
    c = config
    BM, BN, BK = c["BM"], c["BN"], c["BK"]
    packed = 0
    if c.get("PS", 0):           # _launch_constants' _packed
        ktiles = -(-problem.K // BK)
        packed = (-(-problem.M // BM) * BM + -(-problem.N // BN) * BN) * ktiles * BK * 2
    if c.get("SK", 0):
        KT = BK if c.get("MMA", 0) else BK * c["KL"]      # a stage's k (space.derive)
        units = streamk.shape(problem, BM, BN, KT)[2]
        return packed + streamk.workspace(streamk.grid(units, c["SK"], sms), BM, BN)
    if packed or c["KG"] == 1:
        return packed
    chunk = min(problem.batch, max(1, MAX_GRID_Y // -(-problem.M // BM)))   # _enqueue_chunks' products a launch
    return chunk * problem.M * problem.N * c["KG"]


def _launch_error(e) -> Exception:
    """A CUDA error of a launch as the search records it: a refusal for lack of
    resources is the config's fault (InvalidConfig), anything else a RunError."""
    if "OUT_OF_RESOURCES" in str(e) or "INVALID_VALUE" in str(e):
        return InvalidConfig(f"the device cannot launch this config: {e}")
    return RunError(f"launch failed: {e}")


class SteadyLaunch:
    """The launches of one call layout of a kernel (`batch` products, operands
    `sa`, `sb` elements apart) with parameter arrays of their own (launch.BoundLaunch),
    for matmul's express lane, whose calls hold the backend's run lock:

        go = kernel.launcher(sa, sb, batch)
        go(a_ptr, b_ptr, c_ptr, alpha, beta, stream, alloc)

    It does what enqueue() does for these arguments, without enqueue()'s
    per-call decisions: the grids, the constants and the kind of call (one
    launch; K_G split; pre-split pack + GEMM; stream-K) are fixed here. Where
    enqueue() would allocate (the stream's first call, a workspace above
    WORKSPACE_KEEP) or the stream is capturing a graph, it calls enqueue().
    A call of one launch and no buffer of the kernel's does not ask whether the
    stream captures: its launch is captured like any other, and needs nothing
    of the kernel's that a replay could outlive (the module stays loaded:
    CUDAKernel.release).

    `graphs`: the launches go as an executable CUDA graph per set of addresses
    and constants (graphs.GraphLaunch: one driver call a call where the key's
    addresses repeat, instead of one launch per kernel), where the driver's
    graph entry points are there; a graph that fails to be made or updated is
    given up for this layout (the launches go as kernels from then on)."""

    __slots__ = ("k", "sa", "sb", "batch", "kind", "main", "reduce", "pack", "need", "counters", "packed",
                 "ab", "cp", "graph", "args")

    def __init__(self, k: CUDAKernel, sa: int, sb: int, batch: int, graphs: bool = False):
        p, d = k.problem, k.d
        self.k, self.sa, self.sb, self.batch, self.cp = k, sa, sb, batch, k._cp
        self.args = (sa, sb, batch)
        self.reduce = self.pack = None
        self.need, self.counters, self.packed = 0, False, 0
        self.ab = None
        self.graph = None
        if k._sk:
            self.kind = "streamk"
            self.main = BoundLaunch(k._launch_main, k._grid_sk)
            self.packed = sum(k._packed) if k._pack is not None else 0
            self.need, self.counters = self.packed + k._w_sk, True
            if self.packed:
                self.pack = BoundLaunch(k._launch_pack, k._pack_grid, k._dims[:3])
        elif k._pack is not None:
            self.kind = "packed" if k._pack_grid[0] else "enqueue"
            self.main = BoundLaunch(k._launch_main, k._grid1)
            self.need = sum(k._packed)
            self.pack = BoundLaunch(k._launch_pack, k._pack_grid, k._dims[:3])
        elif k._kg == 1 and k._mtiles * batch <= MAX_GRID_Y:
            self.kind = "one"
            grid = (d.grid[0], k._mtiles * batch, 1) if p.batch > 1 else k._grid1
            self.main = BoundLaunch(k._launch_main, grid)
        elif p.batch == 1 and k._mtiles <= MAX_GRID_Y:
            self.kind = "split"
            self.main = BoundLaunch(k._launch_main, k._grid_kg)
            self.need, self.counters = k._w1, bool(k.config["KR"])
            if k._reduce is not None:
                self.reduce = BoundLaunch(k._launch_reduce, k._rgrid1)
        else:                              # a batch longer than one grid: enqueue's chunks
            self.kind, self.main = "enqueue", None
        if self.need * p.itemsize > WORKSPACE_KEEP:
            self.kind = "enqueue"          # a workspace per call: enqueue allocates it
        if graphs and self.kind != "enqueue":
            self.graph = _graph_of([b for b in (self.pack, self.main, self.reduce) if b is not None], self.cp)

    def _constants(self, alpha, beta) -> None:
        k = self.k
        s = k._scales_of(alpha, beta)
        self.main.constants(s[1] + ((self.sa, self.sb) if k.problem.batch > 1 else ()))
        if self.reduce is not None:
            self.reduce.constants(s[3])
        self.ab = (alpha, beta)

    def __call__(self, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float, stream, alloc=None):
        k = self.k
        sptr = stream.ptr
        kind = self.kind
        if kind == "enqueue" or ((self.need or self.graph is not None) and capture.capturing(self.cp, sptr)):
            return k.enqueue(a_ptr, b_ptr, c_ptr, self.sa, self.sb, self.batch, alpha, beta, stream=stream,
                             alloc=alloc)
        w = cnt = 0
        if self.need:
            ws = k._ws.get(sptr)
            c = k._cnt.get(sptr) if self.counters else (0,)
            if ws is None or ws[2] < self.need or c is None:    # the stream's first call: enqueue makes them
                return k.enqueue(a_ptr, b_ptr, c_ptr, self.sa, self.sb, self.batch, alpha, beta, stream=stream,
                                 alloc=alloc)
            w, cnt = ws[0], c[0]
        g = self.graph
        if g is not None:
            key = (a_ptr, b_ptr, c_ptr, w, cnt, alpha, beta)
            try:
                if key == g.last_key:      # the common loop: the same buffers as the last call
                    g.graph_launch(g.last_exec, sptr)
                    return
                if not g.hit(key):         # the arrays take this call's values; a graph is updated from them
                    self._write(a_ptr, b_ptr, c_ptr, w, cnt, alpha, beta)
                g.launch(key, sptr)
                return
            except Exception as e:         # noqa: BLE001 (a refused update or launch queues nothing: the
                self.graph = None          # kernels' way below, which reports an error of the context)
                g.close()
                log.warning("CUDA graphs given up for %s %s (its launches go as kernels from now on): %s: %s",
                            k.problem.key, k.config.key, type(e).__name__, e)
        if self.ab != (alpha, beta):
            self._constants(alpha, beta)
        try:
            if kind == "one":
                self.main(sptr, (a_ptr, b_ptr, c_ptr, c_ptr, 0))
            elif kind == "split":
                self.main(sptr, (a_ptr, b_ptr, c_ptr, w, cnt))
                if self.reduce is not None:
                    self.reduce(sptr, (w, c_ptr))
            elif kind == "packed":
                pb = w + 4 * k._packed[0]
                self.pack(sptr, (a_ptr, b_ptr, w, pb))
                self.main(sptr, (w, pb, c_ptr, c_ptr, 0))
            else:                          # stream-K (after the pack with PS)
                a, b = a_ptr, b_ptr
                if self.packed:
                    a, b = w, w + k.problem.itemsize * k._packed[0]
                    self.pack(sptr, (a_ptr, b_ptr, a, b))
                self.main(sptr, (a, b, c_ptr, w + self.packed * k.problem.itemsize, cnt))
        except _cuda_errors(self.cp) as e:
            raise _launch_error(e) from None

    def _write(self, a_ptr, b_ptr, c_ptr, w, cnt, alpha, beta) -> None:
        """This call's addresses and constants into the parameter arrays (what the
        launches below pass; a graph's nodes are updated from them)."""
        k, kind = self.k, self.kind
        if self.ab != (alpha, beta):
            self._constants(alpha, beta)
        if kind == "one":
            self.main.p.addrs[:] = (a_ptr, b_ptr, c_ptr, c_ptr, 0)
        elif kind == "split":
            self.main.p.addrs[:] = (a_ptr, b_ptr, c_ptr, w, cnt)
            if self.reduce is not None:
                self.reduce.p.addrs[:] = (w, c_ptr)
        elif kind == "packed":
            pb = w + 4 * k._packed[0]
            self.pack.p.addrs[:] = (a_ptr, b_ptr, w, pb)
            self.main.p.addrs[:] = (w, pb, c_ptr, c_ptr, 0)
        else:
            a, b = a_ptr, b_ptr
            if self.packed:
                a, b = w, w + k.problem.itemsize * k._packed[0]
                self.pack.p.addrs[:] = (a_ptr, b_ptr, a, b)
            self.main.p.addrs[:] = (a, b, c_ptr, w + self.packed * k.problem.itemsize, cnt)


def _graph_of(bound: list, cp):
    """A GraphLaunch of `bound` in order, or None where the driver's graph entry
    points are missing or refuse (the launches then go as kernels)."""
    drv = graphs.driver()
    launch = getattr(getattr(getattr(cp, "cuda", None), "runtime", None), "graphLaunch", None)
    if drv is None or launch is None:
        return None
    try:
        return graphs.GraphLaunch(drv, bound, launch)
    except graphs.DriverError:
        return None


class _Enqueue:
    """A kernel's enqueue as a SteadyLaunch is called (a kernel whose launches
    cannot go through prebuilt parameters)."""
    __slots__ = ("k", "args")

    def __init__(self, k, sa, sb, batch):
        self.k, self.args = k, (sa, sb, batch)

    def __call__(self, a_ptr, b_ptr, c_ptr, alpha, beta, stream, alloc=None):
        sa, sb, batch = self.args
        self.k.enqueue(a_ptr, b_ptr, c_ptr, sa, sb, batch, alpha, beta, stream=stream, alloc=alloc)
