"""Timing GL work: the GL timer query where it is believable, else wall time; and
the GPU's clock brought up before anything is timed.

llvmpipe's timer query misses part of its deferred rasterisation (by up to 2x,
and not the same part each run), so on a CPU renderer the wall time around
finish() is used.  NVIDIA's query saturates at 2**32 ns (4.29 s), so a query
outside [0.5, 1.05] x the wall time is not trusted either; on a real GPU the
two agree for draws of more than a few milliseconds.

The clock: a GPU left without work drops to an idle clock and needs a stretch of
back-to-back work to come back (the H200 under NVIDIA's GL driver: 345 MHz after
about a second idle, 0.3 s of continuous work to 1980 MHz; work with 50 ms gaps
never brings it up; notes/gl.md, "The clock").  A kernel timed after an idle gap
(a compile, a verification) ran up to 5.7x slower than the same kernel timed
warm.  So the timing paths call ClockKeeper.ensure() first: where the context
has done no work for IDLE_S, a heater (a compute shader of FMA chains) runs back
to back for RAMP_S; and a search heats while a kernel compiles (heat_while), so
that the compile's gap does not let the clock fall.  A software renderer has no
such clock: nothing is heated there.
"""
from __future__ import annotations

import time

from . import glraw
from .context import software_renderer, state_of
from .uninterrupted import uninterrupted

IDLE_S = 0.5          # no work for this long: the clock may have fallen
RAMP_S = 0.4          # back-to-back work that brings it up (0.3 s measured)
HEATER_ITERS = 1 << 15
_HEATER = """#version 430 core
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Sink { float sink[]; };
uniform int u_iters;
void main() {
    float a = float(gl_GlobalInvocationID.x) * 1e-9, b = 1.0 + a;
    for (int i = 0; i < u_iters; ++i) { a = fma(a, 0.9999, 1e-4); b = fma(b, 0.9999, 2e-4); }
    if (a + b == -1.0) sink[0] = a;      // never true: keeps the loop, stores nothing
}
"""


class ClockKeeper:
    """Keeps a GPU context's clock up while something is being timed (the module
    docstring).  `busy_until` is when the work queued so far is expected to end
    (perf_counter seconds)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.busy_until = 0.0
        self.dispatch_s = None         # one heater dispatch at the warm clock, once measured
        self._program = self._sink = None

    def _heater(self):
        if self._program is None:
            with uninterrupted():
                self._program = self.ctx.compute_shader(_HEATER)
            self._program["u_iters"].value = HEATER_ITERS
            self._sink = self.ctx.buffer(reserve=16)
        return self._program

    def _dispatch(self) -> None:
        self._sink.bind_to_storage_buffer(0)
        with uninterrupted():
            self._program.run(512, 1, 1)

    def worked(self) -> None:
        """Work just finished (a timed run): the clock is up."""
        self.busy_until = max(self.busy_until, time.perf_counter())

    def ensure(self) -> None:
        """Bring the clock up unless the context worked within IDLE_S."""
        now = time.perf_counter()
        if now - self.busy_until <= IDLE_S:
            return
        self._heater()
        t0 = now
        while True:
            s = time.perf_counter()
            self._dispatch()
            self.ctx.finish()
            e = time.perf_counter()
            if e - t0 >= RAMP_S:
                self.dispatch_s = e - s          # the last one ran warm
                break
        self.busy_until = time.perf_counter()

    def heat_while(self, seconds: float) -> None:
        """Queue about `seconds` of heater work and return at once: the GPU stays busy
        while the host compiles (nothing waits for it until the next finish())."""
        if self.dispatch_s is None:
            self.ensure()
            return
        n = max(1, int(seconds / self.dispatch_s))
        self._heater()
        for _ in range(n):
            self._dispatch()
        glraw.flush()
        self.busy_until = max(self.busy_until, time.perf_counter()) + n * self.dispatch_s


def clock_of(ctx) -> ClockKeeper | None:
    """The context's ClockKeeper, or None on a software renderer (no clock to keep)."""
    if software_renderer(ctx):
        return None
    st = state_of(ctx)
    if st.clock is None:
        st.clock = ClockKeeper(ctx)
    return st.clock


def ensure_clock(ctx) -> None:
    """Bring the GPU's clock up before timing (a no-op on a software renderer)."""
    keeper = clock_of(ctx)
    if keeper is not None:
        keeper.ensure()


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
    clock_of(ctx).worked()
    q = query.elapsed / 1e6
    if 0.5 * wall <= q <= 1.05 * wall:
        return q, "query"
    return wall, "wall"
