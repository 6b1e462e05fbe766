"""shadertune: an ATLAS-for-GPU matmul autotuner (GLSL fragment shaders and CUDA).

    >>> import numpy as np, shadertune
    >>> C = shadertune.matmul(np.ones((3, 4)), np.ones((4, 5)))   # GL, float32
"""
from .config import Config
from .problem import Problem
from .result import Result

__version__ = "0.1.0"


def matmul(A, B, *, backend="gl", config="auto", alpha=1.0, beta=0.0, out=None, **options):
    """C = alpha * A @ B + beta * out, with numpy.matmul semantics; see shadertune.api."""
    from .api import matmul as _matmul
    return _matmul(A, B, backend=backend, config=config, alpha=alpha, beta=beta, out=out, **options)


__all__ = ["Config", "Problem", "Result", "matmul", "__version__"]
