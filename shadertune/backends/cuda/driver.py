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
from .timing import event_times
from .space import derive
from ..base import Kernel

DEFAULT_SMEM = 48 * 1024   # above this a kernel must opt in
MAX_GRID_Y = 65535         # grid.y holds M tiles x products: longer batches launch in chunks
PACK_THREADS = 256         # pack_split.cu's block: one thread per 4 floats of both halves


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
        self._args = self._keep = None
        self._cnt = {}    # stream handle -> KR counters
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
        self._dims = (np.int32(p.M), np.int32(p.N), np.int32(p.K), np.int32(d.k_units))
        self._kg = self.config["KG"]
        self._rshape = reduce_shape(p, self.config) if self._reduce is not None else None
        self._grid1 = (d.grid[0], self._mtiles, 1)   # one launch of one product (the common call)
        self._block = (d.threads,)
        self._scales = (None, None, None)          # (alpha, beta) -> their scalars, the last pair
        if self._pack is not None:   # PS: the packed operands' floats and the pack kernel's blocks
            c, ktiles = self.config, -(-p.K // self.config["BK"])
            self._packed = (-(-p.M // c["BM"]) * c["BM"] * ktiles * c["BK"] * 2,
                            -(-p.N // c["BN"]) * c["BN"] * ktiles * c["BK"] * 2)
            self._pack_blocks = -(-sum(self._packed) // (8 * PACK_THREADS))   # a thread: 4 floats of each half

    def enqueue(self, a_ptr: int, b_ptr: int, c_ptr: int, sa: int, sb: int, batch: int,
                alpha: float, beta: float, stream=None) -> None:
        """Enqueue C = alpha * op(A) op(B) + beta * C on `stream` (CuPy's
        current one by default) for `batch` products of the problem's shape:
        A and B are device addresses of stored row-major matrices `sa`, `sb`
        elements apart (0: broadcast), C is contiguous. Nothing is
        synchronised; the K_G workspace comes from CuPy's pool on the stream,
        so it is not reused before the launch that needs it is done."""
        p, d = self.problem, self.d
        if batch == 0 or self._mn == 0:
            return
        if batch > 1 and p.batch == 1:
            raise ValueError(f"a kernel for one product ({p.key}) was given a batch of {batch}")
        mtiles = self._mtiles
        scales = self._scales
        if scales[0] != (alpha, beta):
            T = self._T
            scales = self._scales = ((alpha, beta), T(alpha), T(beta))
        _, alpha, beta = scales
        try:
            if self._pack is not None:
                self._enqueue_packed(a_ptr, b_ptr, c_ptr, alpha, beta, stream)
                return
            if self._kg == 1 and mtiles * batch <= MAX_GRID_Y:   # one launch, nothing to allocate
                if p.batch > 1:
                    args = (a_ptr, b_ptr, c_ptr, c_ptr, 0) + self._dims + (alpha, beta, np.int64(sa), np.int64(sb))
                    grid = (d.grid[0], mtiles * batch, 1)
                else:
                    args = (a_ptr, b_ptr, c_ptr, c_ptr, 0) + self._dims + (alpha, beta)
                    grid = self._grid1
                self._main(grid, self._block, args, shared_mem=d.smem_bytes, stream=stream)
                return
            strides = (np.int64(sa), np.int64(sb)) if p.batch > 1 else ()
            self._enqueue_chunks(a_ptr, b_ptr, c_ptr, sa, sb, batch, alpha, beta, strides, stream)
        except _cuda_errors(self._cp) as e:
            # Launch-time refusals (too many resources) are the config's fault.
            if "OUT_OF_RESOURCES" in str(e) or "INVALID_VALUE" in str(e):
                raise InvalidConfig(f"the device cannot launch this config: {e}") from None
            raise RunError(f"launch failed: {e}") from None

    def _enqueue_chunks(self, a_ptr, b_ptr, c_ptr, sa, sb, batch, alpha, beta, strides, stream):
        """enqueue() with a K_G workspace and/or a batch longer than one grid
        (grid.y = M tiles x products <= MAX_GRID_Y): launches of `chunk` products."""
        p, d, cp, mtiles, mn = self.problem, self.d, self._cp, self._mtiles, self._mn
        chunk = min(batch, MAX_GRID_Y // mtiles)
        it = p.itemsize
        st = stream if stream is not None else cp.cuda.get_current_stream()
        W = None
        if self._kg > 1:
            with st:
                W = cp.empty((chunk * mn * self._kg,), dtype=p.dtype)
        cnt = self._counters(st)
        for b0 in range(0, batch, chunk):
            nb = min(chunk, batch - b0)
            c0 = c_ptr + b0 * mn * it
            self._main((d.grid[0], mtiles * nb, d.grid[2]), (d.threads,),
                       (a_ptr + b0 * sa * it, b_ptr + b0 * sb * it, c0, W if W is not None else c0, cnt)
                       + self._dims + (alpha, beta) + strides, shared_mem=d.smem_bytes, stream=st)
            if self._reduce is not None:   # RX elements x RZ lanes of z per block
                rx, rz = self._rshape
                self._reduce((-(-(nb * mn) // rx),), (rx, rz), (W, c0, np.int64(nb * mn), alpha, beta), stream=st)

    def _enqueue_packed(self, a_ptr, b_ptr, c_ptr, alpha, beta, stream):
        """PS = 1 (one product, no split-K): the pack kernel splits A and B into
        a workspace of packed tiles, then the GEMM reads them. The workspace
        comes from CuPy's pool on the stream, like K_G's (free for reuse only
        behind this launch)."""
        cp, p, d = self._cp, self.problem, self.d
        st = stream if stream is not None else cp.cuda.get_current_stream()
        if self._pack_blocks == 0:      # K = 0: nothing to pack; C = beta * C
            P, pa, pb = None, a_ptr, b_ptr
        else:
            with st:
                P = cp.empty((sum(self._packed),), dtype=np.float32)
            pa = P.data.ptr
            pb = pa + 4 * self._packed[0]
            self._pack((self._pack_blocks,), (PACK_THREADS,), (a_ptr, b_ptr, pa, pb) + self._dims[:3], stream=st)
        self._main(self._grid1, self._block, (pa, pb, c_ptr, c_ptr, 0) + self._dims + (alpha, beta),
                   shared_mem=d.smem_bytes, stream=st)

    def _counters(self, stream):
        """KR's arrival counters, one per C tile: zero between launches (the
        last block of a tile resets its own), so one set serves every launch
        queued on one stream; launches on another stream get their own."""
        if not self.config["KR"]:
            return 0
        key = stream.ptr
        cnt = self._cnt.get(key)
        if cnt is None:
            with stream:
                cnt = self._cnt[key] = self._cp.zeros((self.d.grid[0] * self.d.grid[1],), dtype=np.int32)
        return cnt

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
        self._cnt = {}
        self._module = self._main = self._reduce = self._pack = None
