"""CUDA event timing: the one helper the kernel driver, the cuBLAS baseline
and the roofline measurements use.

Each timed call of `fn` sits between two events recorded on the current
stream; the times are what the GPU did between them. With `hold_stream` the
calls first queue up behind a spin kernel (hold.py), so the host's launch
cost between them is not timed: the device's time alone.
"""
from __future__ import annotations

from .device import import_cupy
from .hold import hold, hold_us


def event_times(fn, repeats: int, *, warmup: int = 1, hold_stream: bool = False) -> list[float]:
    """Milliseconds of each of `repeats` calls of `fn()` (after `warmup`
    untimed calls), CUDA events on the current stream. CUDA errors propagate
    as CuPy raises them."""
    cp = import_cupy()
    stream = cp.cuda.get_current_stream()
    for _ in range(warmup):
        fn()
    stream.synchronize()
    events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(repeats)]
    if hold_stream:
        hold(hold_us(repeats))
    for start, stop in events:
        start.record(stream)
        fn()
        stop.record(stream)
    stream.synchronize()
    return [cp.cuda.get_elapsed_time(a, b) for a, b in events]


def call_times(fn, repeats: int, *, warmup: int = 1) -> list[float]:
    """Milliseconds of each of `repeats` calls of `fn()` timed as a user times
    one call: the stream drained, an event, the call, an event, a sync; so the
    host's time up to the call's last launch and the idle GPU's start are in it
    (what bench-shape-classes' *_call_ms rows measure of whole matmul calls)."""
    cp = import_cupy()
    stream = cp.cuda.get_current_stream()
    for _ in range(warmup):
        fn()
    stream.synchronize()
    out = []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(repeats):
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop))
    return out
