"""The Backend protocol: what the search core and matmul() need of a backend.

Backends never see the search; strategies never see backends (they only call
evaluate(config) -> Result).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..config import Config
from ..problem import Problem
from ..space import Space


@dataclass(frozen=True)
class DeviceInfo:
    backend: str
    vendor: str
    renderer: str           # e.g. 'llvmpipe (LLVM 15.0.6, 256 bits)' or 'NVIDIA H200'
    driver: str             # GL_VERSION string / CUDA driver version
    limits: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        """What identifies a device in the store: renderer + driver version."""
        return f"{self.renderer} | {self.driver}"

    def to_dict(self) -> dict:
        return {"backend": self.backend, "vendor": self.vendor, "renderer": self.renderer,
                "driver": self.driver, "limits": dict(self.limits)}


@runtime_checkable
class Kernel(Protocol):
    problem: Problem
    config: Config
    compile_ms: float

    def run(self, A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *,
            alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
        """Upload inputs, poison the output, compute, return C (host array).

        A and B are given as op(A), op(B) are meant: the problem's trans
        flags say how they are stored."""

    def time(self, repeats: int = 10, warmup: int = 2) -> list[float]:
        """Milliseconds of `repeats` device-timed runs on the last inputs (warm-up excluded)."""

    def release(self) -> None:
        """Free device resources now."""


@runtime_checkable
class Backend(Protocol):
    name: str

    def device(self) -> DeviceInfo: ...

    def space(self, problem: Problem) -> Space: ...

    def default_config(self, problem: Problem) -> Config: ...

    def build(self, problem: Problem, config: Config) -> Kernel:
        """Compile; raises InvalidConfig or BuildError (never crashes the caller)."""

    def source(self, problem: Problem, config: Config) -> str:
        """The generated kernel source for `config`."""

    def template_hash(self) -> str:
        """Hash of the templates the kernels come from (a store key part)."""


def template_names_hash(names: list[str]) -> str:
    from ..templates import template_hash
    return template_hash(*names)


