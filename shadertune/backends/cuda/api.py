"""How CUDABackend executes one matmul call (Backend.run_call), behind
shadertune.matmul's front door.

On the backend's device (device_index = CUDA device id): device arrays are
read and written where they lie and the result comes back in the caller's
kind (CuPy, PyTorch; numpy for host inputs), a stack of products runs as one
strided-batched launch, on the caller's current stream (call.py).  The config
is resolved once per call for the launch's problem (its trans flags and batch
count included) through the plan.  Calls on one backend are serialised (a
kernel's KR counters and the last-run arguments are per kernel).  A process
forked after this one used CUDA cannot use it (CUDA does not survive fork()):
such a child gets a ContextError, not a driver error.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading

from ...errors import ContextError
from ..base import Backend
from .call import execute, prepare
from .device import import_cupy

_cuda_pid: int | None = None     # the process that first ran a CUDA call here
_pid = os.getpid()               # this process, set again in a forked child (no getpid() per call)
_generation = 0                  # bumped in a forked child: locks made before the fork are dropped
_locks_lock = threading.Lock()
_HERE = contextlib.nullcontext()  # already on the backend's device: nothing to switch


def _lock_of(backend) -> threading.RLock:
    """The lock serialising calls on `backend`, kept on it (made again after a fork:
    a lock held by another thread of the parent would never be released here)."""
    held = backend.__dict__.get("_run_lock")
    if held is not None and held[0] == _generation:
        return held[1]
    with _locks_lock:
        held = backend.__dict__.get("_run_lock")
        if held is None or held[0] != _generation:
            held = backend._run_lock = (_generation, threading.RLock())
        return held[1]


def check_not_forked() -> None:
    if _cuda_pid is not None and _cuda_pid != _pid:
        raise ContextError(f"CUDA cannot be used in this process (pid {os.getpid()}): it was forked "
                           f"from pid {_cuda_pid} after that process had used CUDA, which does not "
                           "survive fork(). Start worker processes with multiprocessing's 'spawn' "
                           "or 'forkserver' method")


_visible: dict = {}     # device id -> checked visible (once per process: the count does not change)


def _device(cupy, device_id: int):
    if device_id not in _visible:
        try:
            n = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:
            raise ContextError(f"no CUDA GPU is usable: {e}") from None
        if device_id >= n:
            raise ContextError(f"device_index={device_id}, but {n} CUDA device(s) are visible")
        _visible[device_id] = True
    if cupy.cuda.runtime.getDevice() == device_id:   # the common case: no switch and back
        return _HERE
    return cupy.cuda.Device(device_id)


def run_call(backend, call, plan):
    """Execute a checked call on `backend`'s device; the result in the caller's
    kind (see Backend.run_call and call.py)."""
    global _cuda_pid
    check_not_forked()
    launch = prepare(call)
    if launch.problem is not None:
        plan.config(launch.problem)    # a bad config is the caller's error, GPU or not
    cupy = sys.modules.get("cupy") or import_cupy()
    with _lock_of(backend), _device(cupy, backend.device_id):
        if _cuda_pid is None:
            _cuda_pid = _pid
        kernel = plan.kernel(launch.problem) if launch.problem is not None else None
        result = execute(launch, kernel, backend.device_id)
    if kernel is not None:
        plan.repeat = (launch, kernel, plan.config(launch.problem))   # for the express lane
    return result


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
    global _generation, _locks_lock, _pid
    _pid = os.getpid()
    _visible.clear()
    _generation += 1
    _locks_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

