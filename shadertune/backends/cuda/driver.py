"""Load a compiled GEMM, launch it through CuPy, time it with CUDA events."""
from __future__ import annotations

import time

import numpy as np

from ...config import Config
from ...errors import InvalidConfig, RunError
from ...problem import Problem
from .codegen import KERNEL, reduce_shape
from .compiler import compile_cubin
from .device import import_cupy
from .launch import PACK_SIGNATURE, KernelLaunch, gemm_signature, reduce_signature
from .timing import event_times
from .space import derive
from . import streamk
from ..base import Kernel

DEFAULT_SMEM = 48 * 1024   # above this a kernel must opt in
MAX_GRID_Y = 65535         # grid.y holds M tiles x products: longer batches launch in chunks
PACK_THREADS = 256         # pack_split.cu's block: one thread per 4 floats of both halves
# The K_G workspace is kept per stream up to this size (bytes); a larger one comes
# from CuPy's pool per call, as every one did before: a kept buffer stays
# allocated for the kernel's life on every stream it ran on, and a workspace
# this large goes with a product whose launch costs far more than the pool's
# few microseconds.
WORKSPACE_KEEP = 8 << 20
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
        self._cnt = {}    # stream handle -> KR / SK counters
        self._ws = {}     # stream handle -> K_G workspace
        self._sms = sms   # the stream-K grid's SMs
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
        for small products: issue 16 item 4)."""
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
                alpha: float, beta: float, stream=None) -> None:
        """Enqueue C = alpha * op(A) op(B) + beta * C on `stream` (CuPy's
        current one by default) for `batch` products of the problem's shape:
        A and B are device addresses of stored row-major matrices `sa`, `sb`
        elements apart (0: broadcast), C is contiguous. Nothing is
        synchronised; the K_G workspace is the stream's own (_workspace), so
        it is not reused before the launches queued before are done. The
        launches go through prebuilt parameter arrays (launch.py)."""
        p, d = self.problem, self.d
        if batch == 0 or self._mn == 0:
            return
        if batch > 1 and p.batch == 1:
            raise ValueError(f"a kernel for one product ({p.key}) was given a batch of {batch}")
        mtiles = self._mtiles
        scales = self._scales
        if scales[0] != (alpha, beta):
            scales = self._scales = self._scales_of(alpha, beta)
        try:
            if self._sk:
                self._enqueue_streamk(a_ptr, b_ptr, c_ptr, scales, stream)
                return
            if self._pack is not None:
                self._enqueue_packed(a_ptr, b_ptr, c_ptr, scales, stream)
                return
            if self._kg == 1 and mtiles * batch <= MAX_GRID_Y:   # one launch, nothing to allocate
                if p.batch > 1:
                    self._launch_main.launch((d.grid[0], mtiles * batch, 1), stream,
                                             (a_ptr, b_ptr, c_ptr, c_ptr, 0), scales[1] + (sa, sb))
                else:
                    self._launch_main.launch(self._grid1, stream, (a_ptr, b_ptr, c_ptr, c_ptr, 0), scales[1])
                return
            if p.batch == 1 and mtiles <= MAX_GRID_Y:
                # one product split K_G ways (the common split call): _enqueue_chunks' one chunk
                st = stream if stream is not None else self._cp.cuda.get_current_stream()
                ws = self._workspace(st, self._w1)     # held (ws[1]) until the launches are queued
                self._launch_main.launch(self._grid_kg, st, (a_ptr, b_ptr, c_ptr, ws[0], self._counters(st)),
                                         scales[1])
                if self._reduce is not None:
                    self._launch_reduce.launch(self._rgrid1, st, (ws[0], c_ptr), scales[3])
                return
            self._enqueue_chunks(a_ptr, b_ptr, c_ptr, sa, sb, batch, scales, stream)
        except _cuda_errors(self._cp) as e:
            # Launch-time refusals (too many resources) are the config's fault.
            if "OUT_OF_RESOURCES" in str(e) or "INVALID_VALUE" in str(e):
                raise InvalidConfig(f"the device cannot launch this config: {e}") from None
            raise RunError(f"launch failed: {e}") from None

    def _enqueue_chunks(self, a_ptr, b_ptr, c_ptr, sa, sb, batch, scales, stream):
        """enqueue() with a K_G workspace and/or a batch longer than one grid
        (grid.y = M tiles x products <= MAX_GRID_Y): launches of `chunk` products."""
        p, d, cp, mtiles, mn = self.problem, self.d, self._cp, self._mtiles, self._mn
        chunk = min(batch, MAX_GRID_Y // mtiles)
        it = p.itemsize
        st = stream if stream is not None else cp.cuda.get_current_stream()
        ws = self._workspace(st, chunk * mn * self._kg) if self._kg > 1 else (0,)   # held until queued
        w = ws[0]
        cnt = self._counters(st)
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

    def _workspace(self, stream, n: int) -> tuple:
        """(address, array, elements) of a K_G workspace of at least n elements
        for launches on `stream`. Launches on one stream run in order, so one
        buffer serves every launch queued there: a call's main kernel writes it
        only after the previous call's reduction (or last blocks) read it.
        Another stream gets its own. A buffer dropped (a larger one needed, more
        than WORKSPACE_STREAMS streams, or release()) goes back to CuPy's pool
        in the arena of the stream it was allocated on, which hands it out to
        later allocations on that stream only, ordered after the launches that
        used it. Above WORKSPACE_KEEP bytes: one from the pool per call. The
        caller holds the returned array until its launches are queued (one
        not kept here goes back to the pool when dropped)."""
        cp, p = self._cp, self.problem
        if n * p.itemsize > WORKSPACE_KEEP:
            with stream:
                W = cp.empty((n,), dtype=p.dtype)
            return W.data.ptr, W, n
        key = stream.ptr
        ws = self._ws.get(key)
        if ws is None or ws[2] < n:
            if ws is None and len(self._ws) >= WORKSPACE_STREAMS:
                del self._ws[next(iter(self._ws))]
            with stream:
                W = cp.empty((n,), dtype=p.dtype)
            ws = self._ws[key] = (W.data.ptr, W, n)
        return ws

    def _enqueue_packed(self, a_ptr, b_ptr, c_ptr, scales, stream):
        """PS > 0 (one product, no split-K): the pack kernel splits A and B into
        a workspace of packed tiles (the stream's own, as K_G's: _workspace),
        then the GEMM reads them."""
        st = stream if stream is not None else self._cp.cuda.get_current_stream()
        if self._pack_grid[0] == 0:      # K = 0: nothing to pack; C = beta * C
            ws, pa, pb = None, a_ptr, b_ptr
        else:
            ws = self._workspace(st, sum(self._packed))     # held until the launches are queued
            pa = ws[0]
            pb = pa + 4 * self._packed[0]
            self._launch_pack.launch(self._pack_grid, st, (a_ptr, b_ptr, pa, pb), self._dims[:3])
        self._launch_main.launch(self._grid1, st, (pa, pb, c_ptr, c_ptr, 0), scales[1])

    def _enqueue_streamk(self, a_ptr, b_ptr, c_ptr, scales, stream):
        """SK > 0 (one product, no K_G): the persistent grid, its partials in the
        stream's workspace (after the packed operands with PS, whose pack kernel
        runs first), the tiles' counters."""
        st = stream if stream is not None else self._cp.cuda.get_current_stream()
        packed = sum(self._packed) if self._pack is not None else 0
        ws = self._workspace(st, packed + self._w_sk)      # held until the launches are queued
        a, b, w = a_ptr, b_ptr, ws[0] + packed * self.problem.itemsize
        if packed:
            a, b = ws[0], ws[0] + self.problem.itemsize * self._packed[0]
            self._launch_pack.launch(self._pack_grid, st, (a_ptr, b_ptr, a, b), self._dims[:3])
        self._launch_main.launch(self._grid_sk, st, (a, b, c_ptr, w, self._counters(st)), scales[1])

    def _counters(self, stream):
        """KR's and SK's arrival counters, one per C tile: zero between launches
        (the last block of a tile resets its own), so one set serves every launch
        queued on one stream; launches on another stream get their own."""
        if not (self.config["KR"] or self._sk):
            return 0
        key = stream.ptr
        cnt = self._cnt.get(key)
        if cnt is None:
            with stream:
                arr = self._cp.zeros((self.d.grid[0] * self.d.grid[1],), dtype=np.int32)
            cnt = self._cnt[key] = (arr.data.ptr, arr)
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

    def time(self, repeats: int = 10, warmup: int = 2, hold_stream: bool = True) -> list[float]:
        """Milliseconds of `repeats` event-timed launches. The launches queue
        up behind a spin kernel first (`hold_stream`), so host launch overhead
        is not timed: the device's time alone (hold.py)."""
        if self._args is None:
            raise RunError("time() needs a run() first (it times the last inputs)")
        try:
            return event_times(self.launch, repeats, warmup=warmup, hold_stream=hold_stream)
        except _cuda_errors(self._cp) as e:
            raise RunError(f"kernel failed: {e}") from None

    def release(self) -> None:
        self._args = self._keep = None
        self._cnt, self._ws = {}, {}
        self._module = self._main = self._reduce = self._launch_main = self._launch_reduce = None
        self._pack = self._launch_pack = None
