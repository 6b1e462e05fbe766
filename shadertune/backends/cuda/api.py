"""matmul() for backend="cuda": numpy.matmul semantics (shared checks in
shadertune.inputs), stacked inputs looped over, numpy result."""
from __future__ import annotations

import numpy as np

from ...config import Config
from ...inputs import check_operands, check_out
from ...problem import Problem


def _dtype_of(*xs):
    for x in xs:
        if getattr(x, "dtype", None) is not None and np.dtype(x.dtype) == np.float64:
            return np.float64
    return np.float32


def matmul(A, B, *, backend=None, config=None, alpha=1.0, beta=0.0, out=None, C=None, db=None,
           tune=None):
    """C = alpha * A @ B + beta * C (C from `C=` or `out=`), float32 unless an
    input is float64. `config`: None or "default" for the default, "auto" for
    the best stored tuning result (shadertune.select), a Config, dict or JSON."""
    from .backend import CUDABackend
    be = backend or _default_backend()
    dtype = _dtype_of(A, B)
    ops = check_operands(A, B, C if C is not None else out, alpha=alpha, beta=beta, dtype=dtype)
    check_out(out, ops.shape, dtype)
    p = Problem(int(ops.M), int(ops.N), int(ops.K), np.dtype(dtype).name)
    if isinstance(config, str) and config == "auto":
        from ...select import select_config
        config = select_config(be, p, db=db, tune=tune)[0]
    elif isinstance(config, str) and config == "default":
        config = None
    elif isinstance(config, str):
        config = Config.from_json(config)
    cfg = Config(config) if config is not None else be.default_config(p)
    res = np.empty(ops.batch + (ops.M, ops.N), dtype=dtype)
    if ops.M and ops.N:
        if ops.K == 0:   # an empty sum: beta * C
            res[...] = 0 if ops.C is None else ops.beta * ops.C
        else:
            kern = be._kernel(p, cfg)
            for idx in np.ndindex(*ops.batch):
                c = None if ops.C is None else ops.C[idx]
                res[idx] = kern.run(ops.A[idx], ops.B[idx], c, alpha=ops.alpha, beta=ops.beta)
    res = res.reshape(ops.shape)
    if out is not None:
        out[...] = res
        return out
    return res


_BACKEND = []


def _default_backend():
    from .backend import CUDABackend
    if not _BACKEND:
        _BACKEND.append(CUDABackend())
    return _BACKEND[0]
