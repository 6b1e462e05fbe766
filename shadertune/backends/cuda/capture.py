"""Stream capture (CUDA graphs): what a launch captured into a graph needs for
as long as the graph may be replayed.

A call made while its stream is capturing (torch.cuda.graph, a CuPy
Stream.begin_capture) is recorded into a graph, not run: every replay launches
the same functions on the same addresses.  So what the call's launches read
or write besides the caller's arrays must live as long as the graph, which
the library cannot see end:

- the kernel's module (a function of an unloaded module would be replayed):
  never unloaded while the process lives (CUDAKernel.release keeps it; CuPy
  keeps a loaded module for the process anyway), so a call of one launch and no
  buffer of the kernel's needs nothing here, and the express lane does not even
  ask whether its stream captures;
- its K_G / stream-K workspace and tile counters: a captured call takes fresh
  ones (never the kept per-stream buffers, which a later call on another
  stream or a larger product may drop), allocated by the caller's framework
  (its graph-aware caching allocator: PyTorch's graph pool, CuPy's pool) and
  pinned with the kernel (whose release then keeps its buffers).

Pinned memory stays allocated for the life of the process: a program that
captures a call once per shape keeps one set per captured call (at most a
workspace of the problem's size each).
"""
from __future__ import annotations

import threading

_pinned: list = []            # what captured graphs may replay: kept for the life of the process
_lock = threading.Lock()


def capturing(cp, stream_ptr: int) -> bool:
    """Whether the stream `stream_ptr` is capturing a graph now.  A query the
    driver refuses (the legacy stream while another stream captures in global
    mode, an invalidated capture) answers False: the launch that follows meets
    the same refusal and reports it."""
    try:
        return bool(cp.cuda.runtime.streamIsCapturing(stream_ptr))
    except Exception:        # noqa: BLE001 (see the docstring: the launch reports it)
        return False


def pin(*things) -> None:
    """Keep `things` alive for the life of the process (a graph may replay them)."""
    with _lock:
        _pinned.extend(things)


def pinned() -> int:
    """How many things are pinned (tests)."""
    return len(_pinned)
