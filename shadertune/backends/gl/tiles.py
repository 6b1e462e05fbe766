"""How a GL product past what one kernel holds is cut: tiles of at most the device's
max texture size in M, N and K (for the compute family, no side past what a storage
buffer holds square); K tiles accumulate.  calls.py cuts host products,
array_calls.py products of GL arrays (a tile is a view: no copy)."""
from __future__ import annotations

import math

from ...core.problem import Problem


def tile_limit(limits: dict) -> int:
    """The largest side of a product's tile: the max texture size, and where the device
    has the compute family, no side past what a storage buffer holds square."""
    limit = int(limits.get("max_texture_size", 4096))
    ssbo = int(limits.get("max_ssbo_bytes", 0))
    if limits.get("compute") and ssbo:
        limit = min(limit, math.isqrt(ssbo // 4))
    return limit


def tiles(n: int, size: int) -> list[tuple[int, int]]:
    """[start, stop) pieces of at most `size` covering 0 .. n - 1."""
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def main_tile(M: int, N: int, K: int, limit: int, trans_a: bool = False, trans_b: bool = False) -> Problem:
    """The problem of a product's main tile (the whole product when it fits the limit)."""
    return Problem(min(M, limit), min(N, limit), min(K, limit), trans_a=trans_a, trans_b=trans_b)
