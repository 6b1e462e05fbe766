"""Driver calls that compile (or may: a draw or dispatch), run with Ctrl-C held back on
the calling thread.

A SIGINT delivered to the thread while Mesa's llvmpipe compiles a program (LLVM's
JIT under moderngl's ctx.program / compute_shader, or an assembly program string)
crashed the process with a segmentation fault in about 1 of 30 interrupted searches
on llvmpipe 22.3.6 (3 of 87 here; 0 of 72 with the signal held back: notes/gl.md).
Blocking SIGINT on this thread for the length of the call leaves it pending (or lets
the kernel hand it to another thread of the process, whose Python handler only sets
a flag); Python raises KeyboardInterrupt as soon as the call returns.  A compile
takes milliseconds to a second, so Ctrl-C waits at most that long.  llvmpipe also
compiles at a program's first draw or dispatch in a new state (its shader variants),
so every draw and dispatch the backend issues (a kernel's execute, the packing and
copy programs, the clock heater) runs held back too.  Ctrl-C then waits at most one
execution of a kernel (notes/gl.md, "Ctrl-C and the driver").
"""
from __future__ import annotations

import _signal
import contextlib
import signal


@contextlib.contextmanager
def uninterrupted():
    """Hold SIGINT back on the calling thread for the block (a no-op where the platform
    has no per-thread signal masks)."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    old = mask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, old)


def hold_sigint():
    """uninterrupted() as two plain calls for a hot path: the mask to give restore_sigmask
    (None where the platform has no per-thread signal masks).  The C function itself
    (signal.pthread_sigmask wraps it in Python and converts the sets)."""
    return None if _MASK is None else _MASK(signal.SIG_BLOCK, _SIGINT)


def restore_sigmask(old) -> None:
    """Set the mask hold_sigint returned back (a pending Ctrl-C raises now)."""
    if old is not None:
        _MASK(signal.SIG_SETMASK, old)


_MASK = getattr(_signal, "pthread_sigmask", None)
_SIGINT = (signal.SIGINT,)


__all__ = ["uninterrupted", "hold_sigint", "restore_sigmask"]
