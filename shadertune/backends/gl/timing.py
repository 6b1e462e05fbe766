"""Timing GL work: the GL timer query where it is believable, else wall time.

llvmpipe's timer query misses part of its deferred rasterisation (by up to 2x,
and not the same part each run), so on a CPU renderer the wall time around
finish() is used.  NVIDIA's query saturates at 2**32 ns (4.29 s), so a query
outside [0.5, 1.05] x the wall time is not trusted either; on a real GPU the
two agree for draws of more than a few milliseconds.
"""
from __future__ import annotations

import time

from .context import state_of


def software_renderer(ctx) -> bool:
    """Whether ctx renders on the CPU (llvmpipe and kin); read once per context."""
    st = state_of(ctx)
    v = st.software
    if v is None:
        from .device import is_software_renderer
        renderer = getattr(ctx, "renderer", None)      # the assembly path's own context
        if renderer is None:
            renderer = ctx.info.get("GL_RENDERER", "")
            for _ in range(8):   # ctx.info probes queries a driver may reject: clear their errors
                if ctx.error == "GL_NO_ERROR":
                    break
        v = st.software = is_software_renderer(renderer)
    return v


def timed(ctx, query, fn) -> tuple[float, str]:
    """(milliseconds of fn(), 'query' or 'wall')."""
    ctx.finish()
    t0 = time.perf_counter()
    with query:
        fn()
    ctx.finish()
    wall = (time.perf_counter() - t0) * 1e3
    if software_renderer(ctx):
        return wall, "wall"
    q = query.elapsed / 1e6
    if 0.5 * wall <= q <= 1.05 * wall:
        return q, "query"
    return wall, "wall"
