"""shadertune.matmul: numpy.matmul semantics on a tuned GPU kernel.

C = alpha * A @ B + beta * out.  GL computes in float32 (float64 and integer
inputs are converted; the result is float32); CUDA computes float32 inputs
in float32 and float64 inputs in float64.  Compiled kernels and their
textures are cached (a small LRU) and released on eviction, so repeated
calls reuse them and leak nothing.
"""
from __future__ import annotations

import itertools
import threading
from collections import OrderedDict

import numpy as np

from .config import Config
from .inputs import check_operands, check_out
from .problem import Problem

_CACHE_SIZE = 8
_kernels: "OrderedDict[tuple, object]" = OrderedDict()
_backends: dict = {}
_lock = threading.RLock()


def clear_cache() -> None:
    """Release every cached kernel (textures, programs)."""
    with _lock:
        while _kernels:
            _, k = _kernels.popitem()
            k.release()


def cached_kernels() -> int:
    return len(_kernels)


def _backend(name: str, device_index):
    key = (name, device_index)
    b = _backends.get(key)
    if b is None:
        from .backends import get_backend
        b = get_backend(name, **({"device_index": device_index} if device_index is not None else {}))
        _backends[key] = b
    return b


def _resolve_config(backend, problem: Problem, config, db, tune=None) -> Config:
    if config is None or (isinstance(config, str) and config == "default"):
        return backend.default_config(problem)
    if isinstance(config, str) and config == "auto":
        try:
            from .select import select_config
        except ImportError:      # the tuner is optional at this level
            return backend.default_config(problem)
        return select_config(backend, problem, db=db, tune=tune)[0]
    if isinstance(config, str):
        config = Config.from_json(config)
    if not isinstance(config, (Config, dict)):
        raise TypeError(f"matmul: config must be 'auto', None, a dict, a Config or JSON text, "
                        f"got {type(config).__name__}")
    cfg = Config(config)
    why = backend.space(problem).why_invalid(cfg)
    if why:
        raise ValueError(f"matmul: config {cfg.to_dict()} is not valid for {problem.key} on "
                         f"{backend.name}: {why}")
    return cfg


def _kernel(backend, problem: Problem, config: Config):
    key = (backend.name, id(backend), problem, config)
    with _lock:
        k = _kernels.get(key)
        if k is not None:
            _kernels.move_to_end(key)
            return k
        k = backend.build(problem, config)
        _kernels[key] = k
        while len(_kernels) > _CACHE_SIZE:
            _, old = _kernels.popitem(last=False)
            old.release()
        return k


def _tiles(n: int, size: int):
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def _gl_2d(backend, A, B, C, alpha, beta, config, db, tune=None) -> np.ndarray:
    """One 2-D product on the GL backend, tiled when a texture would exceed the device limit."""
    from .backends.gl.codegen import plan_layout
    M, K = A.shape
    N = B.shape[1]
    limit = int(backend.device().limits.get("max_texture_size", 4096))
    tile = limit
    while True:
        tm, tn, tk = min(M, tile), min(N, tile), min(K, tile)
        problem = Problem(tm, tn, tk)
        cfg = _resolve_config(backend, problem, config, db, tune)
        if plan_layout(tm, tn, tk, cfg).largest_texture() <= limit:
            break
        if tile <= 64:
            raise ValueError(f"matmul: cannot tile {M}x{K} @ {K}x{N} under the device's "
                             f"max texture size {limit} with config {cfg.to_dict()}")
        tile //= 2
    out = np.empty((M, N), np.float32)
    for (m0, m1), (n0, n1) in itertools.product(_tiles(M, tm), _tiles(N, tn)):
        acc_beta = beta
        acc = C[m0:m1, n0:n1] if beta != 0.0 else None
        for k0, k1 in _tiles(K, tk):
            problem = Problem(m1 - m0, n1 - n0, k1 - k0)
            cfg_t = cfg if (problem.M, problem.N, problem.K) == (tm, tn, tk) else \
                _resolve_config(backend, problem, config, db, tune)
            kern = _kernel(backend, problem, cfg_t)
            # K chunks accumulate: later chunks add onto the running result (beta = 1).
            acc = kern.run(A[m0:m1, k0:k1], B[k0:k1, n0:n1], acc, alpha=alpha, beta=acc_beta)
            acc_beta = 1.0
        out[m0:m1, n0:n1] = acc
    return out


def matmul(A, B, *, backend: str = "gl", config="auto", alpha=1.0, beta=0.0, out=None,
           device_index: int | None = None, db=None, tune=None) -> np.ndarray:
    """C = alpha * A @ B + beta * out with numpy.matmul semantics.

    A, B: real arrays (1-D, 2-D or stacked, broadcast like numpy.matmul; any
    strides or order).  backend: 'gl' (default; float32) or 'cuda'.
    config: 'auto' (best stored tuning result for this device and shape, else
    the nearest tuned shape, else a safe default), 'default', or a dict /
    Config / JSON text of knobs.  beta != 0 needs `out`, which also receives
    the result.  Complex, string and object inputs raise TypeError;
    mismatched shapes raise ValueError naming both shapes.
    tune: None (default) or 'first-use' (with config='auto'): the first call for a
    shape the store has no result for times the model's top configs, verified
    and stored, within a bounded time (shadertune.perfmodel.firstuse).
    """
    if tune is not None:
        from .perfmodel.firstuse import check
        check(tune, config)
    if backend not in ("gl", "cuda"):
        raise ValueError(f"matmul: backend must be 'gl' or 'cuda', got {backend!r}")
    if backend == "cuda":
        from .backends.cuda import matmul as cuda_matmul
        return cuda_matmul(A, B, config=config, alpha=alpha, beta=beta, out=out, db=db, tune=tune)
    ops = check_operands(A, B, out, alpha=alpha, beta=beta, dtype=np.float32)
    check_out(out, ops.shape, np.float32)
    full = ops.batch + (ops.M, ops.N)
    result = np.zeros(full, np.float32)
    if ops.M and ops.N:
        if ops.K == 0:
            if ops.beta != 0.0:
                result[...] = ops.beta * ops.C
        else:
            be = _backend("gl", device_index)
            for idx in np.ndindex(*ops.batch):
                C = ops.C[idx] if ops.C is not None else None
                result[idx] = _gl_2d(be, ops.A[idx], ops.B[idx], C, ops.alpha, ops.beta, config, db,
                                     tune)
    result = result.reshape(ops.shape)
    if out is not None:
        out[...] = result
        return out
    return result
