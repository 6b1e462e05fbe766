"""shadertune: an ATLAS-for-GPU matmul autotuner (GLSL shaders and CUDA).

    >>> import numpy as np, shadertune
    >>> C = shadertune.matmul(np.ones((3, 4)), np.ones((4, 5)))   # GL, float32
    >>> r = shadertune.tune((256, 256, 256), seconds=30)           # stored: "auto" runs it
    >>> print(shadertune.explain(np.ones((256, 256)), np.ones((256, 256))))

matmul, tune and explain are the front door (shadertune/front/: matmul.py, tuning.py,
explanation.py), imported on first use so that ``import shadertune`` stays light;
so is ``shadertune.gl``, the GL arrays that stay on the GPU between products.
The library speaks through the ``shadertune`` logger (and its children).
"""
from typing import TYPE_CHECKING, Any

from . import errors                  # shadertune.errors.PrecisionWarning after `import shadertune`
from .core.config import Config
from .core.problem import Problem
from .core.result import Result

from .core.version import __version__

if TYPE_CHECKING:                      # what type checkers see; at run time, __getattr__
    from .front.matmul import matmul
    from .front.explanation import explain
    from .front.tuning import TuneResult, tune

_FRONT = {"matmul": "front.matmul", "explain": "front.explanation", "tune": "front.tuning",
          "TuneResult": "front.tuning"}
_MODULES = ("gl",)                     # front-door modules, imported on first use


def __getattr__(name: str) -> Any:
    """The front door's functions, imported on first use (PEP 562)."""
    if name in _FRONT or name in _MODULES:
        import importlib
        if name in _MODULES:
            value = importlib.import_module(f".{name}", __name__)
        else:
            value = getattr(importlib.import_module(f".{_FRONT[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'shadertune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FRONT) | set(_MODULES))     # each name once, imported or not


__all__ = ["Config", "Problem", "Result", "TuneResult", "explain", "matmul", "tune", "__version__"]
