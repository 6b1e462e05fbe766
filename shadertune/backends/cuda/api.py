"""matmul() for backend="cuda": numpy.matmul semantics (shared checks in
shadertune.inputs), device arrays in and out, stacks as one strided-batched
launch (call.py)."""
from __future__ import annotations

from ...config import Config
from ...problem import Problem
from . import call


def matmul(A, B, *, backend=None, config=None, alpha=1.0, beta=0.0, out=None, C=None, db=None):
    """C = alpha * A @ B + beta * C (C from `C=` or `out=`), float32 unless an
    input is float64. Operands of any kind (numpy, CuPy, PyTorch CUDA tensors,
    __cuda_array_interface__ or DLPack objects); the result comes back in the
    caller's kind (call.py). `config`: None or "default" for the default,
    "auto" for the best stored tuning result (shadertune.select), a Config,
    dict or JSON; resolved once per call (a stack runs as one launch)."""
    be = backend or _default_backend()
    kernel_for = (lambda p: _default_kernel(be, p)) if config is None or config == "default" else \
        (lambda p: be._kernel(p, _resolve(be, p, config, db)))
    if C is None and beta == 0.0:
        r = call.fast(A, B, alpha, be.device_id, kernel_for, out)
        if r is not None:
            return r
    c = call.prepare(A, B, out=out, C=C, alpha=alpha, beta=beta)
    return call.execute(c, kernel_for(c.problem) if c.problem is not None else None, be.device_id)


_DEFAULT_KERNELS: dict = {}   # (backend, problem) -> its default config's kernel, resolved once


def _default_kernel(be, p: Problem):
    k = _DEFAULT_KERNELS.get((be, p))
    if k is None:
        if len(_DEFAULT_KERNELS) >= 64:     # as many as be._kernel's cache keeps
            _DEFAULT_KERNELS.clear()
        k = _DEFAULT_KERNELS[(be, p)] = be._kernel(p, be.default_config(p))
    return k


def _resolve(be, p: Problem, config, db) -> Config:
    if isinstance(config, str) and config == "auto":
        from ...select import select_config
        return Config(select_config(be, p, db=db)[0])
    if config is None or (isinstance(config, str) and config == "default"):
        return be.default_config(p)
    if isinstance(config, str):
        config = Config.from_json(config)
    return Config(config)


_BACKEND = []


def _default_backend():
    from .backend import CUDABackend
    if not _BACKEND:
        _BACKEND.append(CUDABackend())
    return _BACKEND[0]
