"""Problem: the shape and type of one C = alpha * op(A) @ op(B) + beta * C."""
from __future__ import annotations

import re
from dataclasses import dataclass

_DTYPES = ("float32", "float64")


@dataclass(frozen=True, order=True)
class Problem:
    M: int
    N: int
    K: int
    dtype: str = "float32"
    trans_a: bool = False
    trans_b: bool = False

    def __post_init__(self):
        for name in ("M", "N", "K"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Problem.{name} must be a non-negative int, got {v!r}")
        if self.dtype not in _DTYPES:
            raise TypeError(f"Problem.dtype must be one of {_DTYPES}, got {self.dtype!r}")

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 8

    @property
    def bytes(self) -> int:
        """Fewest bytes a kernel must move: A and B read once, C written once."""
        return self.itemsize * (self.M * self.K + self.K * self.N + self.M * self.N)

    @property
    def stored_shapes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Shapes of A and B as stored: (K, M) for a transposed A, (N, K) for a transposed B."""
        a = (self.K, self.M) if self.trans_a else (self.M, self.K)
        b = (self.N, self.K) if self.trans_b else (self.K, self.N)
        return a, b

    @property
    def key(self) -> str:
        t = ("T" if self.trans_a else "N") + ("T" if self.trans_b else "N")
        return f"{self.M}x{self.N}x{self.K}:{self.dtype}:{t}"

    def to_dict(self) -> dict:
        return {"M": self.M, "N": self.N, "K": self.K, "dtype": self.dtype,
                "trans_a": self.trans_a, "trans_b": self.trans_b}

    @classmethod
    def from_dict(cls, d: dict) -> "Problem":
        return cls(int(d["M"]), int(d["N"]), int(d["K"]), d.get("dtype", "float32"),
                   bool(d.get("trans_a", False)), bool(d.get("trans_b", False)))

    @classmethod
    def parse(cls, text: str, dtype: str = "float32") -> "Problem":
        """'N' (square) or 'M,N,K' (also 'MxNxK')."""
        parts = re.split(r"[,x]", str(text).strip())
        try:
            vals = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"size must be N or M,N,K with integers, got {text!r}") from None
        if len(vals) == 1:
            vals = vals * 3
        if len(vals) != 3:
            raise ValueError(f"size must be N or M,N,K, got {text!r}")
        return cls(*vals, dtype=dtype)
