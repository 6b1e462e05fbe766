"""Problem: the shape and type of one C = alpha * op(A) @ op(B) + beta * C,
or of `batch` such products of one shape run as one strided-batched launch."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_DTYPES = ("float32", "float64")


@dataclass(frozen=True, order=True)
class Problem:
    M: int
    N: int
    K: int
    dtype: str = "float32"
    trans_a: bool = False
    trans_b: bool = False
    batch: int = 1          # products of this shape in one launch (stacked inputs)

    def __post_init__(self) -> None:
        for name in ("M", "N", "K"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Problem.{name} must be a non-negative int, got {v!r}")
        b = self.batch
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"Problem.batch must be a positive int, got {b!r}")
        if self.dtype not in _DTYPES:
            raise TypeError(f"Problem.dtype must be one of {_DTYPES}, got {self.dtype!r}")

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K * self.batch

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 8

    @property
    def bytes(self) -> int:
        """Fewest bytes a kernel must move: A and B read once, C written once
        (per product of a batch)."""
        return self.itemsize * (self.M * self.K + self.K * self.N + self.M * self.N) * self.batch

    @property
    def stored_shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Shapes of A and B as stored: (K, M) for a transposed A, (N, K) for a
        transposed B; with a leading batch axis when batch > 1."""
        a = (self.K, self.M) if self.trans_a else (self.M, self.K)
        b = (self.N, self.K) if self.trans_b else (self.K, self.N)
        if self.batch > 1:
            return (self.batch,) + a, (self.batch,) + b
        return a, b

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape of C: (M, N), with a leading batch axis when batch > 1."""
        return ((self.batch,) if self.batch > 1 else ()) + (self.M, self.N)

    @property
    def key(self) -> str:
        # The batch is part of the key only when > 1: keys (and so stores)
        # written before batches existed stay valid.
        t = ("T" if self.trans_a else "N") + ("T" if self.trans_b else "N")
        b = f":b{self.batch}" if self.batch > 1 else ""
        return f"{self.M}x{self.N}x{self.K}:{self.dtype}:{t}{b}"

    @property
    def label(self) -> str:
        """How every table, report and message writes a problem: the shape as the
        command lines take it (MxNxK; BxMxNxK for a batch of B products), the dtype,
        and the BLAS operation letters (NT: B transposed) when an operand is
        transposed: '64x48x32 float32', '8x64x48x32 float64 TN'.  (`key` is the
        store's spelling of the same problem.)"""
        shape = f"{self.M}x{self.N}x{self.K}"
        if self.batch > 1:
            shape = f"{self.batch}x{shape}"
        ops = ("T" if self.trans_a else "N") + ("T" if self.trans_b else "N")
        return f"{shape} {self.dtype}" + ("" if ops == "NN" else f" {ops}")

    def to_dict(self) -> dict[str, Any]:
        d = {"M": self.M, "N": self.N, "K": self.K, "dtype": self.dtype,
             "trans_a": self.trans_a, "trans_b": self.trans_b}
        if self.batch > 1:
            d["batch"] = self.batch
        return d

    @staticmethod
    def batch_of_key(key: str) -> int:
        """The batch count a key states (its ':b{n}' part; 1 without one)."""
        last = key.rsplit(":", 1)[-1]
        return int(last[1:]) if last[:1] == "b" and last[1:].isdigit() else 1

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Problem":
        return cls(int(d["M"]), int(d["N"]), int(d["K"]), d.get("dtype", "float32"),
                   bool(d.get("trans_a", False)), bool(d.get("trans_b", False)), int(d.get("batch", 1)))

    @classmethod
    def parse(cls, text: str, dtype: str = "float32") -> "Problem":
        """'N' (square), 'MxNxK' (also 'M,N,K') or 'BxMxNxK' (a batch of B products): the
        size syntax of every command line (shadertune.cli.args)."""
        parts = re.split(r"[,x]", str(text).strip())
        try:
            vals = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"size must be N, MxNxK or BxMxNxK (or M,N,K) in integers, "
                             f"got {text!r}") from None
        if len(vals) == 1:
            vals = vals * 3
        if len(vals) == 4:
            return cls(vals[1], vals[2], vals[3], dtype=dtype, batch=vals[0])
        if len(vals) != 3:
            raise ValueError(f"size must be N, MxNxK or BxMxNxK (or M,N,K) in integers, "
                             f"got {text!r}")
        return cls(vals[0], vals[1], vals[2], dtype=dtype)


def shape_distance(a: Problem, b: Problem) -> float:
    """How far apart two shapes are for tuning: the sum of |log2| ratios of M, N, K and
    the batch counts (dimensions of 0 count as 1).  `auto`'s nearest-shape rule and the
    model's validation rank stored problems by it."""
    return sum(abs(math.log2(max(x, 1) / max(y, 1)))
               for x, y in ((a.M, b.M), (a.N, b.N), (a.K, b.K), (a.batch, b.batch)))
