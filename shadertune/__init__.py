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


__all__ = ["Config", "Problem", "Result", "matmul", "__version__"]
