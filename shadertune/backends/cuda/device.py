"""Device limits for the CUDA backend: read from the GPU through CuPy, or the
sm_90 (H100/H200) defaults when no GPU or no CuPy is present, so that the
space and the generated source stay available for codegen and nvcc tests."""
from __future__ import annotations

import functools

from ...core.optional import optional_import
from ...errors import ContextError

# Hopper SXM (H100 / H200), compute capability 9.0.
DEFAULT_LIMITS = {
    "arch": "sm_90",
    "max_threads_per_block": 1024,
    "max_smem_per_block": 48 * 1024,          # without the opt-in attribute
    "max_smem_per_block_optin": 227 * 1024,   # 232448 bytes on sm_90
    "regs_per_block": 65536,
    "max_regs_per_thread": 255,
    "num_sms": 132,
    "warp_size": 32,
    "max_smem_per_sm": 228 * 1024,
    "max_threads_per_sm": 2048,
}


def import_cupy():
    """CuPy, or a ContextError that says how to get it."""
    # Any exception counts as missing: importing CuPy also loads CUDA libraries, which may fail.
    return optional_import("cupy", "the CUDA backend needs CuPy; install it with `pip install shadertune[cuda]` "
                           "(cupy-cuda13x) on a machine with an NVIDIA GPU", error=ContextError, catch=Exception)


def has_gpu() -> bool:
    try:
        cupy = import_cupy()
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@functools.lru_cache(maxsize=None)
def _read_limits(device_id: int) -> dict:
    cupy = import_cupy()
    p = cupy.cuda.runtime.getDeviceProperties(device_id)
    return {
        "arch": f"sm_{p['major']}{p['minor']}",
        "max_threads_per_block": int(p["maxThreadsPerBlock"]),
        "max_smem_per_block": int(p["sharedMemPerBlock"]),
        "max_smem_per_block_optin": int(p.get("sharedMemPerBlockOptin", p["sharedMemPerBlock"])),
        "regs_per_block": int(p["regsPerBlock"]),
        "max_regs_per_thread": 255,   # every architecture since Kepler GK110
        "num_sms": int(p["multiProcessorCount"]),
        "warp_size": int(p["warpSize"]),
        "max_smem_per_sm": int(p.get("sharedMemPerMultiprocessor", DEFAULT_LIMITS["max_smem_per_sm"])),
        "max_threads_per_sm": int(p.get("maxThreadsPerMultiProcessor", DEFAULT_LIMITS["max_threads_per_sm"])),
        "name": p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"]),
    }


def limits(device_id: int = 0) -> dict:
    """The limits the space is pruned by: the GPU's when one is there, else DEFAULT_LIMITS."""
    if has_gpu():
        return dict(_read_limits(device_id))
    return dict(DEFAULT_LIMITS)
