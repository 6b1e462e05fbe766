"""Compute programs compiled ahead, on the GL driver's own threads, while the search's
thread times the configs before them.

NVIDIA's GL driver takes 0.2-0.5 s to compile one of the compute family's shaders (tens
of KB of unrolled GLSL): most of a GL evaluation, on the one thread that also times.
Where the driver compiles in parallel (GL_KHR_parallel_shader_compile, raw_program.py),
the configs a search announces are started together and each build takes its own
program, waiting for that one alone: 16 programs report done in 0.3 s on an H200,
against 4.4 s one after another.  NVIDIA's driver still links
(its back end) in the thread that first asks for the link status, 100-200 ms a program:
that part stays on the build's thread (asking from threads with contexts of the same
share group made the driver hold the search's thread meanwhile; notes/gl.md).

The programs stay in the process and context that compiled them.  A driver binary
does not carry them elsewhere: NVIDIA's holds its intermediate code, and loading it in
another process costs nearly the compile again (notes/gl.md, "Compiles").  So in a
cluster every worker compiles the configs it may time (cluster/compiles.py).

All of it runs in the context's thread: GLBackend.precompile (any thread) only queues
the sources, and the next build starts them (start); take() gives a build its program;
drop() gives back the ones the search never reached.  On GPUs by default (on a CPU
renderer the driver's threads are the timing thread's own cores);
$SHADERTUNE_GL_COMPILE_AHEAD=1 or 0 says always or never.
"""
from __future__ import annotations

import os

from . import raw_program
from .context import software_renderer, state_of
from .uninterrupted import uninterrupted

AHEAD_ENV = "SHADERTUNE_GL_COMPILE_AHEAD"


def ahead_setting() -> bool | None:
    """$SHADERTUNE_GL_COMPILE_AHEAD: True (1), False (0), None (unset or empty: on GPUs);
    ValueError for anything else (read where a search starts, before it stores anything)."""
    said = os.environ.get(AHEAD_ENV, "").strip()
    if not said:
        return None
    if said not in ("0", "1"):
        raise ValueError(f"{AHEAD_ENV} must be 0 or 1 (or unset: on GPUs), got {said!r}")
    return said == "1"


def wanted(ctx) -> bool:
    """Whether ctx compiles ahead: $SHADERTUNE_GL_COMPILE_AHEAD, else on a GPU; and only
    where its driver compiles in parallel (asked once a context)."""
    st = state_of(ctx)
    if st.parallel_compile is None:
        try:
            said = ahead_setting()
        except ValueError:          # refused where the search started (search_session)
            said = False
        want = said if said is not None else not software_renderer(ctx)
        st.parallel_compile = bool(want and raw_program.parallel_available(ctx))
    return st.parallel_compile


def start(ctx, sources) -> None:
    """Start compiling the `sources` that ctx neither keeps nor compiles already, in order."""
    st = state_of(ctx)
    for source in sources:
        if source not in st.programs and source not in st.compiling:
            with uninterrupted():         # Ctrl-C inside the driver's compile crashed it
                st.compiling[source] = raw_program.start(source)


def ready(ctx, source: str) -> bool:
    """Whether the program of `source` is at hand without waiting for the driver: kept
    by the context, or compiled ahead and done."""
    st = state_of(ctx)
    if source in st.programs:
        return True
    job = st.compiling.get(source)
    return job is not None and job.done()


def take(ctx, source: str):
    """The program of `source` compiled ahead (waiting for the driver to finish it), or
    None where it was not started; BuildError with the driver's log where it failed."""
    job = state_of(ctx).compiling.pop(source, None)
    if job is None:
        return None
    with uninterrupted():
        return job.finish()


def drop(ctx) -> None:
    """Give back the programs compiled ahead that no build took (configs the search
    did not reach)."""
    st = state_of(ctx)
    jobs, st.compiling = list(st.compiling.values()), {}
    for job in jobs:
        job.discard()
