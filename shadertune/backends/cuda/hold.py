"""Hold a CUDA stream so that event timing measures the device alone.

CUDA events time what the GPU does between them, gaps included. A kernel
launched from Python costs the host several microseconds (8-22 us on the H200
machine, notes/cuda.md "Host-bound timing"); when that is longer than the
kernel, the GPU waits between launches and the wait is timed too.

`hold(us)` enqueues a one-thread kernel that spins for `us` microseconds; the
launches enqueued behind it while it spins then run back to back, so their
event times exclude the host (the "blocking kernel" of NVIDIA's nvbench).
CUDAKernel.time and cublas_time hold by default; the search's evaluator and
the benchmarks therefore compare device times.
"""
from __future__ import annotations

import functools

import numpy as np

from .device import import_cupy

_SOURCE = r'''
extern "C" __global__ void st_hold(const long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
'''
# Host time allowed per timed launch pair while the stream is held; the hold
# is capped so a mistaken repeat count cannot stall the GPU for long.
HOST_US_PER_REPEAT = 100.0
MAX_HOLD_US = 50_000.0


@functools.lru_cache(maxsize=None)
def _kernel_and_clock(device_id: int):
    cupy = import_cupy()
    khz = cupy.cuda.runtime.getDeviceProperties(device_id)["clockRate"]
    return cupy.RawKernel(_SOURCE, "st_hold"), khz


def hold_us(repeats: int) -> float:
    """How long to hold the stream for `repeats` timed launches."""
    return min(MAX_HOLD_US, 200.0 + HOST_US_PER_REPEAT * repeats)


def hold(microseconds: float, stream=None) -> None:
    """Enqueue a spin of about `microseconds` on `stream` (the current one)."""
    cupy = import_cupy()
    kernel, khz = _kernel_and_clock(cupy.cuda.runtime.getDevice())
    cycles = int(microseconds * khz / 1000.0)
    kernel((1,), (1,), (np.int64(cycles),), stream=stream)
