"""How CUDABackend executes one matmul call (Backend.run_call), behind
shadertune.matmul's front door.

Today: on the backend's device (device_index = CUDA device id), operands
through the host, one launch per 2-D product.  A CUDAKernel keeps the
arguments of its last launch, so calls on one backend are serialised.
A process forked after this one used CUDA cannot use it (CUDA does not
survive fork()): such a child gets a ContextError, not a driver error.
"""
from __future__ import annotations

import os
import threading
import weakref

from ...errors import ContextError
from ..base import Backend
from .device import import_cupy

_cuda_pid: int | None = None     # the process that first ran a CUDA call here
_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def _lock_of(backend) -> threading.RLock:
    with _locks_lock:
        lock = _locks.get(backend)
        if lock is None:
            lock = _locks[backend] = threading.RLock()
        return lock


def check_not_forked() -> None:
    if _cuda_pid is not None and _cuda_pid != os.getpid():
        raise ContextError(f"CUDA cannot be used in this process (pid {os.getpid()}): it was forked "
                           f"from pid {_cuda_pid} after that process had used CUDA, which does not "
                           "survive fork(). Start worker processes with multiprocessing's 'spawn' "
                           "or 'forkserver' method")


def _device(cupy, device_id: int):
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        raise ContextError(f"no CUDA GPU is usable: {e}") from None
    if device_id >= n:
        raise ContextError(f"device_index={device_id}, but {n} CUDA device(s) are visible")
    return cupy.cuda.Device(device_id)


def run_call(backend, call, plan):
    """Execute a checked call on `backend`'s device; a numpy result (see Backend.run_call)."""
    global _cuda_pid
    check_not_forked()
    if call.M and call.N and call.K and 0 not in call.batch:
        plan.config(call.problem)    # a bad config is the caller's error, GPU or not
    cupy = import_cupy()
    with _lock_of(backend), _device(cupy, backend.device_id):
        if _cuda_pid is None:
            _cuda_pid = os.getpid()
        return Backend.run_call(backend, call, plan)


PRESETS = {
    "fast": "the default config (the cost model's pick; what matmul runs untuned)",
    "ffma": "the cost model's best FFMA kernel (MMA = 0: plain float32/float64 FMAs, no "
            "tensor cores)",
}


def preset_config(backend, name: str, problem):
    if name == "ffma":
        for cfg in backend.candidates(problem, 8):
            if cfg.get("MMA", 0) == 0:
                return cfg
        return {"MMA": 0}          # filled from the default, its other knobs moved to fit
    return Backend.preset_config(backend, name, problem)


def _forget_after_fork() -> None:
    global _locks, _locks_lock
    _locks = weakref.WeakKeyDictionary()
    _locks_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def matmul(A, B, out=None, **options):
    """shadertune.matmul(..., backend='cuda')."""
    from ...api import matmul as _matmul
    return _matmul(A, B, out, **{"backend": "cuda", **options})
