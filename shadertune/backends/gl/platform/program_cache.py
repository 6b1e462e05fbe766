"""Compute programs compiled once a host, ahead of the search that times them.

NVIDIA's GL driver takes about 0.35 s to compile one of the compute family's shaders
(tens of KB of unrolled GLSL): 85% of a GL evaluation at 1024^3 on an H200, on the
one thread that also times.  Two things take it off that thread:

- A cache of program binaries on the host's disk (cache_root()/gl/<driver and GPU>/),
  keyed by the source: a program compiled once, by any process of the user, loads in
  about a millisecond (program_binary.py); a binary the driver refuses (a new driver)
  is removed and the source compiled again.
- compile_ahead(sources): a pool of processes (spawned, each with an EGL context on the
  same GPU, at most the process's compile share of the host's cores and MAX_PROCESSES)
  compiles the configs a search announces into the cache while its thread times the
  ones before them; a build waits for the compile of its own source alone.  Each compile
  is marked in the cache first (core/compile_marks.py), so that a build in another
  process of the host (a cluster's worker) waits for it instead of compiling it again.

Ahead compiles run where the device is a GPU (on a CPU renderer the compile is the
timing thread's own cores anyway); $SHADERTUNE_GL_COMPILE_AHEAD=1 or 0 says always or
never.  Every binary is a file written whole (core/atomic.py).
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import struct
import threading
from concurrent.futures import CancelledError

from ....core import atomic, compile_marks
from ....core.cache_root import cache_root
from ....core.children import end_pool, exit_with_parent, leave_ctrl_c_to_the_parent
from ....core.cpus import compile_share
from . import program_binary
from .context import state_of

AHEAD_ENV = "SHADERTUNE_GL_COMPILE_AHEAD"
MAX_PROCESSES = 16           # each holds a GL context on the GPU
_MAGIC = b"STGLPB1\0"


def cache_dir() -> pathlib.Path:
    return cache_root() / "gl"


def driver_tag(ctx) -> str:
    """The folder of ctx's driver and GPU: a binary loads only where both match."""
    info = ctx.info
    text = "\0".join(str(info.get(k, "")) for k in ("GL_VENDOR", "GL_RENDERER", "GL_VERSION"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def folder_of(ctx) -> str | None:
    """ctx's tag in the cache, or None where its driver keeps no program binaries."""
    state = state_of(ctx)
    if state.binaries is None:
        state.binaries = driver_tag(ctx) if program_binary.available(ctx) else False
    return state.binaries or None


def path_of(tag: str, source: str) -> pathlib.Path:
    return cache_dir() / tag / f"{hashlib.sha256(source.encode()).hexdigest()[:32]}.bin"


def ahead_wanted(software_renderer: bool) -> bool:
    """Whether compiles go ahead to a pool: $SHADERTUNE_GL_COMPILE_AHEAD, else on GPUs only."""
    said = os.environ.get(AHEAD_ENV, "").strip()
    if said in ("0", "1"):
        return said == "1"
    return not software_renderer


# --- the cache ---------------------------------------------------------------------------

def load(ctx, source: str):
    """The program of `source` from the cache (waiting for a compile of it that this
    process's pool or another process of the host has under way), or None: not cached."""
    tag = folder_of(ctx)
    if tag is None:
        return None
    path = path_of(tag, source)
    _wait_ahead(path)
    if not path.exists():
        compile_marks.await_other(path)
    got = _read(path)
    if got is None:
        return None
    program = program_binary.BinaryProgram.load(*got)
    if program is None:                      # the driver refuses it now: compiled again
        _remove(path)
    return program


def ready(ctx, source: str) -> bool:
    """Whether the program of `source` is at hand without a compile: kept by the context,
    or its binary in the cache."""
    if source in state_of(ctx).programs:
        return True
    tag = folder_of(ctx)
    return tag is not None and path_of(tag, source).exists()


def save(ctx, source: str, program) -> None:
    """Keep `program` (compiled from `source` in ctx) in the cache; a cache that takes
    nothing (full, read-only) keeps nothing, and the build goes on."""
    tag = folder_of(ctx)
    if tag is None:
        return
    got = program_binary.binary_of(program.glo)
    if got is not None:
        _write(path_of(tag, source), *got)


def _read(path: pathlib.Path) -> tuple[int, bytes] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 4
    if len(data) <= head or not data.startswith(_MAGIC):
        _remove(path)
        return None
    (fmt,) = struct.unpack("<I", data[len(_MAGIC):head])
    return fmt, data[head:]


def _write(path: pathlib.Path, fmt: int, data: bytes) -> bool:
    try:
        atomic.write_bytes(path, _MAGIC + struct.pack("<I", fmt) + data)
        return True
    except OSError:              # atomic's OutputError too: a full or read-only cache
        return False


def _remove(path: pathlib.Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


# --- compiles ahead ----------------------------------------------------------------------

_ahead: dict = {}            # binary path -> the Future of its compile
_ahead_pool = None
_ahead_lock = threading.Lock()


def compile_ahead(sources, tag: str, device_index: int | None) -> None:
    """Start compiling the `sources` not cached (in this order) into the cache, in a pool
    of processes with contexts on EGL device `device_index`, and return at once."""
    global _ahead_pool
    with _ahead_lock:
        todo = []
        for s in dict.fromkeys(sources):
            path = path_of(tag, s)
            if path not in _ahead and not path.exists():
                todo.append((s, path))
        if not todo:
            return
        if _ahead_pool is None:
            _ahead_pool = _pool(min(MAX_PROCESSES, compile_share()), device_index)
        for s, path in todo:
            try:
                mine = compile_marks.claim(path)
            except OSError:                  # a cache that takes no mark takes no binary
                return
            if mine:                          # else another process compiles it: a build waits
                _ahead[path] = _ahead_pool.submit(_compile_in_child, s, tag, str(path))


def _pool(workers: int, device_index: int | None):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    # spawned: a forked child would inherit the parent's GL context, which it must not use
    return ProcessPoolExecutor(max_workers=max(1, workers), mp_context=multiprocessing.get_context("spawn"),
                               initializer=_child_start, initargs=(device_index,))


def _wait_ahead(path: pathlib.Path) -> None:
    """Wait for this process's ahead compile of `path`, if it started one."""
    fut = _ahead.get(path)
    if fut is None:
        return
    try:
        fut.result()
    except (CancelledError, Exception):      # noqa: BLE001 - the build compiles it and says why
        compile_marks.release(path)          # its process died or it never ran: nobody else will
    with _ahead_lock:
        if _ahead.get(path) is fut:
            del _ahead[path]


def stop_ahead() -> None:
    """End the pool: compiles not started are cancelled, running ones ended (they were
    for configs the search did not reach; left running they take the host's cores from
    what runs next).  Their marks go, so that other processes compile those themselves."""
    global _ahead_pool
    with _ahead_lock:
        pool, _ahead_pool = _ahead_pool, None
        started = list(_ahead)
        _ahead.clear()
    if pool is None:
        return
    try:
        end_pool(pool)
    finally:
        for path in started:
            if not path.exists():
                compile_marks.release(path)


# --- in a pool's process -----------------------------------------------------------------

_child_tag = None


def _child_start(device_index: int | None) -> None:
    global _child_tag
    exit_with_parent()
    leave_ctrl_c_to_the_parent()
    from .context import create_egl_context
    try:
        ctx = create_egl_context(device_index)
        _child_tag = folder_of(ctx) or False
    except Exception:                        # noqa: BLE001 - no context: its compiles say so
        _child_tag = False


def _compile_in_child(source: str, tag: str, path: str) -> str | None:
    """Compile `source` into the cache at `path`; None, or why not (the build that needs
    it then compiles it itself and reports the driver's own error)."""
    target = pathlib.Path(path)
    try:
        compile_marks.restamp(target)
        if _child_tag != tag:
            return "this process's context is not on the searched GPU's driver"
        try:
            got = program_binary.compile_binary(source)
        except Exception as e:               # noqa: BLE001 - returned, the build says it again
            return str(e)[:500]
        return None if _write(target, *got) else "the cache took no binary"
    finally:
        compile_marks.release(target)
