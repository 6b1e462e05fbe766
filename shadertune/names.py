"""The types of the front door's signatures: the closed sets of names it takes, as
Literal types, and the device arrays it returns in their own kind.

    matmul(A, B, backend="gl", config="jiang")      # BackendName, ConfigName
    tune(256, strategy="phased", dtype="float32")   # StrategyName, DTypeName

Each set is the one its registry holds (backends.available(), search.STRATEGIES,
the backends' presets(), problem._DTYPES): tests/test_types.py holds them equal, so
a name added to a registry without its Literal (or the reverse) fails the suite.
A parameter that also takes something open (a Backend object, a dict of knobs, JSON
text) says so beside the Literal in its signature.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, TypeVar

BackendName = Literal["gl", "cuda"]
StrategyName = Literal["phased", "model", "random", "exhaustive"]
# every backend's presets (GL: jiang, naive; CUDA: ffma; both: fast)
PresetName = Literal["fast", "jiang", "naive", "ffma"]
ConfigName = Literal["auto", "default", "fast", "jiang", "naive", "ffma"]
DTypeName = Literal["float32", "float64"]
TuneOnUse = Literal["first-use"]


class CudaArray(Protocol):
    """A device array as matmul takes and returns it without importing its library:
    anything with ``__cuda_array_interface__`` (a CuPy array, a PyTorch CUDA tensor).
    matmul returns the kind of its first device operand: a CuPy array for CuPy, a
    tensor for PyTorch; another such object (Numba, JAX) comes back as a CuPy array,
    which a type checker cannot tell from its type (docs/semantics.md)."""

    @property
    def __cuda_array_interface__(self) -> Mapping[str, Any]: ...


DeviceArrayT = TypeVar("DeviceArrayT", bound=CudaArray)

__all__ = ["BackendName", "ConfigName", "CudaArray", "DTypeName", "DeviceArrayT", "PresetName",
           "StrategyName", "TuneOnUse"]
