"""Timing GL work: the GL timer query where it is believable, else wall time.

llvmpipe's timer query misses its deferred rasterisation, and NVIDIA's
saturates at 2**32 ns (4.29 s), so a query outside [0.5, 1.05] x the wall
time around finish() is not trusted; on a real GPU the two agree for draws
of more than a few milliseconds.
"""
from __future__ import annotations

import time


def timed(ctx, query, fn) -> tuple[float, str]:
    """(milliseconds of fn(), 'query' or 'wall')."""
    ctx.finish()
    t0 = time.perf_counter()
    with query:
        fn()
    ctx.finish()
    wall = (time.perf_counter() - t0) * 1e3
    q = query.elapsed / 1e6
    if 0.5 * wall <= q <= 1.05 * wall:
        return q, "query"
    return wall, "wall"
