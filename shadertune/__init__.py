"""shadertune: an ATLAS-for-GPU matmul autotuner (GLSL fragment shaders and CUDA).

    >>> import numpy as np, shadertune
    >>> C = shadertune.matmul(np.ones((3, 4)), np.ones((4, 5)))   # GL, float32
"""
from .config import Config
from .problem import Problem
from .result import Result

__version__ = "0.1.0"


def matmul(A, B, out=None, *, backend="gl", config="auto", alpha=1.0, beta=0.0, device_index=None,
           db=None, tune=None):
    """C = alpha * A @ B + beta * out, with numpy.matmul semantics; see shadertune.api.matmul."""
    from .api import matmul as _matmul
    return _matmul(A, B, out, backend=backend, config=config, alpha=alpha, beta=beta,
                   device_index=device_index, db=db, tune=tune)


def explain(A, B, *, backend="gl", db=None, device_index=None):
    """Which config matmul(A, B, config="auto") runs for these operands, and why
    (exact / model with its predicted GFLOP/s / nearest / default); see shadertune.select.explain."""
    from .select import explain as _explain
    return _explain(A, B, backend=backend, db=db, device_index=device_index)


__all__ = ["Config", "Problem", "Result", "explain", "matmul", "__version__"]
