"""CUDA microbenchmarks through CuPy: FP32/FP64 FMA peak and device-memory bandwidth,
the ceilings of the CUDA roofline (roofline.py).

Skips cleanly: available() says why not when CuPy or a GPU is absent, and
measure_cuda() raises CudaUnavailable (a ContextError) with that reason.
"""
from __future__ import annotations

import statistics

from ...errors import ContextError
from ...core.roofline import store
from .timing import event_times

# CHAINS independent FMA chains per thread (ILP, Volkov); `iters` is a kernel
# argument so nvcc cannot fold the loop; every chain reaches the output.
_FMA_SRC = r"""
extern "C" __global__ void fma_peak(REAL* out, int iters, REAL a, REAL b) {
    REAL x[CHAINS];
    #pragma unroll
    for (int c = 0; c < CHAINS; ++c) x[c] = (REAL)(threadIdx.x * 1e-3) + (REAL)c;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            #pragma unroll
            for (int c = 0; c < CHAINS; ++c) x[c] = x[c] * a + b;
        }
    }
    REAL s = 0;
    #pragma unroll
    for (int c = 0; c < CHAINS; ++c) s += x[c];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


class CudaUnavailable(ContextError):
    """No CuPy or no CUDA GPU: the CUDA ceilings cannot be measured here."""


def available() -> tuple[bool, str]:
    try:
        import cupy
    except Exception as e:            # ImportError, or a CUDA library that fails to load
        return False, f"CuPy is not importable ({e.__class__.__name__}: {e}); pip install cupy-cuda13x"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return False, f"no CUDA device ({e.__class__.__name__}: {e})"
    if n < 1:
        return False, "no CUDA device"
    return True, ""


def _cupy():
    ok, why = available()
    if not ok:
        raise CudaUnavailable(why)
    import cupy
    return cupy


def device_info() -> dict:
    cp = _cupy()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    drv = cp.cuda.runtime.driverGetVersion()
    return {"backend": "cuda", "vendor": "NVIDIA", "renderer": name,
            "driver": f"CUDA driver {drv // 1000}.{drv % 1000 // 10}",
            "sms": props["multiProcessorCount"], "cc": f"{props['major']}.{props['minor']}"}


def _time(fn, repeats) -> list[float]:
    """One warm-up call (module load, first touch), then `repeats` event-timed calls."""
    return event_times(fn, repeats, warmup=1)


def fma_peak(dtype="float32", chains=16, unroll=8, blocks_per_sm=8, threads=256, iters=256,
             target_ms=20.0, max_iters=1 << 20, repeats=5) -> dict:
    cp = _cupy()
    ctype = {"float32": "float", "float64": "double"}[dtype]
    kern = cp.RawKernel(_FMA_SRC, "fma_peak",
                        options=(f"-DREAL={ctype}", f"-DCHAINS={chains}", f"-DUNROLL={unroll}"))
    sms = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"]
    grid = sms * blocks_per_sm
    out = cp.empty(grid * threads, dtype=dtype)
    a, b = cp.dtype(dtype).type(0.9999), cp.dtype(dtype).type(1e-4)
    n = iters
    while True:
        launch = lambda: kern((grid,), (threads,), (out, cp.int32(n), a, b))  # noqa: E731
        ms = statistics.median(_time(launch, 2))
        if ms >= target_ms or n * 2 > max_iters:
            break
        n = min(max_iters, n * (2 if ms * 8 > target_ms else 8))
    times = _time(launch, repeats)
    if not bool(cp.isfinite(out).all()):
        raise RuntimeError("CUDA FMA benchmark produced non-finite values")
    ms = statistics.median(times)
    flops = grid * threads * n * unroll * chains * 2
    return {"gflops": flops / (ms * 1e-3) / 1e9, "median_ms": ms, "times_ms": times,
            "dtype": dtype, "grid": grid, "threads": threads, "iters": n,
            "chains": chains, "unroll": unroll}


def dram_bandwidth(mbytes=1024, repeats=5) -> dict:
    """Device-to-device copy of `mbytes` MiB: GB/s counting the read and the write."""
    cp = _cupy()
    n = mbytes * (1 << 20)
    src = cp.ones(n // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    times = _time(lambda: dst.data.copy_from_device_async(src.data, n), repeats)
    if not bool((dst[:: max(1, dst.size // 1024)] == 1).all()):
        raise RuntimeError("bandwidth benchmark copied the wrong data")
    ms = statistics.median(times)
    del src, dst
    cp.get_default_memory_pool().free_all_blocks()
    return {"gbs": 2 * n / (ms * 1e-3) / 1e9, "median_ms": ms, "times_ms": times, "mbytes": mbytes}


PRESETS = {
    "full": dict(target_ms=50.0, repeats=7, mbytes=2048),
    "quick": dict(target_ms=20.0, repeats=5, mbytes=512),
    "tiny": dict(target_ms=1.0, repeats=3, mbytes=8),
}


def measure_cuda(quick=False, *, preset: str | None = None, fp64=True) -> dict:
    """Measure the CUDA ceilings of the current device; raises CudaUnavailable if there is none."""
    p = dict(PRESETS[preset or ("quick" if quick else "full")])
    dev = device_info()
    mbytes = p.pop("mbytes")
    f32 = fma_peak("float32", **p)
    bw = dram_bandwidth(mbytes, p["repeats"])
    ceilings = {"cuda_fma_gflops": f32["gflops"], "cuda_dram_gbs": bw["gbs"]}
    details = {"cuda_fma": f32, "cuda_dram": bw}
    if fp64:
        f64 = fma_peak("float64", **p)
        ceilings["cuda_fma64_gflops"] = f64["gflops"]
        details["cuda_fma64"] = f64
    return store.new(dev, ceilings, details)
