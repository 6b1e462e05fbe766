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
from .hold import hold, hold_us
from .space import derive
from ..base import Kernel

DEFAULT_SMEM = 48 * 1024   # above this a kernel must opt in


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
        self._args = None

    # --- device-side -----------------------------------------------------
    def _stored_shapes(self):
        return self.problem.stored_shapes

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
        contiguous); C's buffer is poisoned with NaN when beta == 0."""
        cp, p = self._cp, self.problem
        sa, sb = self._stored_shapes()
        dA, dB = self._to_device(A, sa, "A"), self._to_device(B, sb, "B")
        if beta != 0.0:
            if C is None:
                raise ValueError("beta != 0 needs C")
            dC = self._to_device(C, (p.M, p.N), "C").copy()
        else:
            dC = cp.full((p.M, p.N), np.nan, dtype=p.dtype)
        dW = cp.empty((p.M * p.N * self.config["KG"],), dtype=p.dtype) if self.config["KG"] > 1 else dC
        # KR: one arrival counter per C tile, zero between launches (the last
        # block of a tile resets it).
        tiles = self.d.grid[0] * self.d.grid[1]
        dCnt = cp.zeros((max(1, tiles) if self.config["KR"] else 1,), dtype=np.int32)
        T = np.float32 if p.dtype == "float32" else np.float64
        self._args = (dA, dB, dC, dW, dCnt, T(alpha), T(beta))
        return dC

    def launch(self, stream=None):
        """Enqueue the kernel(s) on the arguments of the last prepare()."""
        p, d = self.problem, self.d
        dA, dB, dC, dW, dCnt, alpha, beta = self._args
        if p.M == 0 or p.N == 0:
            return
        try:
            self._main(d.grid, (d.threads,), (dA, dB, dC, dW, dCnt, np.int32(p.M), np.int32(p.N),
                                             np.int32(p.K), np.int32(d.k_units), alpha, beta),
                       shared_mem=d.smem_bytes, stream=stream)
            if self._reduce is not None:   # RX elements x RZ lanes of z per block
                mn = p.M * p.N
                rx, rz = reduce_shape(p, self.config)
                self._reduce((-(-mn // rx),), (rx, rz), (dW, dC, np.int64(mn), alpha, beta), stream=stream)
        except _cuda_errors(self._cp) as e:
            # Launch-time refusals (too many resources) are the config's fault.
            if "OUT_OF_RESOURCES" in str(e) or "INVALID_VALUE" in str(e):
                raise InvalidConfig(f"the device cannot launch this config: {e}") from None
            raise RunError(f"launch failed: {e}") from None

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
        is not timed: the device's time alone (hold.py; run N measured it)."""
        if self._args is None:
            raise RunError("time() needs a run() first (it times the last inputs)")
        cp = self._cp
        for _ in range(warmup):
            self.launch()
        self._sync()
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(repeats)]
        if hold_stream:
            hold(hold_us(repeats))
        for start, stop in events:
            start.record()
            self.launch()
            stop.record()
        self._sync()
        return [cp.cuda.get_elapsed_time(a, b) for a, b in events]

    def release(self) -> None:
        self._args = None
        self._module = self._main = self._reduce = None
