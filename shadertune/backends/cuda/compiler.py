"""NVRTC compilation to a cubin, with an on-disk cache keyed by the source
hash, the architecture, the options and the NVRTC version (so a new toolkit
recompiles).  Safe to call from several processes: files land atomically, and a
compile in progress is marked in the cache (compile_marks.py), so that another
process's build of the same kernel waits for it instead of compiling it again."""
from __future__ import annotations

import hashlib
import os
import pathlib
import tempfile
import threading
from concurrent.futures import CancelledError

from ...core.cache_root import cache_root
from ...core.children import end_pool, exit_with_parent
from ...core.cpus import compile_share, usable_cpus
from ...errors import BuildError
from ...core import compile_marks
from .device import import_cupy

# No fast-math: plain IEEE fp32/fp64 FMA, like cuBLAS with TF32 off.
OPTIONS = ("--std=c++17",)


def cache_dir() -> pathlib.Path:
    return cache_root() / "cuda"


# A source that uses an architecture-specific feature (wgmma: sm_90a) says so
# on its first line; it is compiled for that variant of the device's arch.
_NEEDS = "// shadertune: needs "


def arch_for(source: str, arch: str) -> str:
    """`arch`, or its architecture-specific variant (sm_90 -> sm_90a) where
    the source's first line asks for it."""
    if source.startswith(_NEEDS):
        need = source[len(_NEEDS):].split(None, 1)[0]
        if need.rstrip("a") == arch.rstrip("a"):
            return need
    return arch


def _options(arch: str) -> tuple:
    return (f"--gpu-architecture={arch}",) + OPTIONS


def cache_key(source: str, arch: str) -> str:
    nvrtc = import_cupy().cuda.nvrtc
    h = hashlib.sha256()
    for part in (source, arch, " ".join(_options(arch)), repr(nvrtc.getVersion())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _cubin_path(source: str, arch: str) -> pathlib.Path:
    """Where the cache keeps `source` compiled for `arch` (after arch_for)."""
    return cache_dir() / f"{cache_key(source, arch)}_{arch}.cubin"


def compile_cubin(source: str, arch: str, name: str = "st_gemm.cu") -> pathlib.Path:
    """Path of the cubin for `source` on `arch`, compiling it if not cached (or
    waiting for compile_ahead's compile of it)."""
    arch = arch_for(source, arch)
    path = _cubin_path(source, arch)
    _wait_ahead(path)
    return _compiled(source, arch, path, name)


def _compiled(source: str, arch: str, path: pathlib.Path, name: str = "st_gemm.cu",
              owned: bool = False) -> pathlib.Path:
    """compile_cubin's compile (no wait for one started ahead: a pool's worker runs it).
    A compile another live process has marked is waited for, not repeated; `owned`: the
    caller marked this compile already (compile_ahead, for its pool)."""
    if path.exists():
        return path
    if owned:
        compile_marks.restamp(path)    # this process compiles it: its death frees it
    mine = owned or _claim(path)
    if mine is False:
        compile_marks.await_other(path)
        if path.exists():
            return path
        mine = _claim(path)        # the other failed or died: compiled here, its error said
    try:
        nvrtc = import_cupy().cuda.nvrtc
        prog = nvrtc.createProgram(source, name, [], [])
        try:
            try:
                nvrtc.compileProgram(prog, list(_options(arch)))
            except nvrtc.NVRTCError as e:
                log = nvrtc.getProgramLog(prog)
                raise BuildError(f"NVRTC failed ({e}):\n{log}", source=source) from None
            cubin = nvrtc.getCUBIN(prog)
        finally:
            nvrtc.destroyProgram(prog)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        os.replace(tmp, path)
    finally:
        if mine:
            compile_marks.release(path)
    return path


def compile_many(sources: list[str], arch: str, workers: int | None = None) -> list[BaseException | None]:
    """Compile many sources into the cache in parallel processes (NVRTC is
    slow and holds the GIL); returns None or the exception for each."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    todo = [s for s in dict.fromkeys(sources) if not _cubin_path(s, arch_for(s, arch)).exists()]
    errors = {}
    if todo:
        workers = workers or min(len(todo), usable_cpus())
        # spawn, not fork: the parent may hold a CUDA context a child must not inherit
        # (children that end with this process: a parent killed outright leaves none behind)
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=exit_with_parent) as ex:
            for s, fut in [(s, ex.submit(_compile_quiet, s, arch)) for s in todo]:
                errors[s] = fut.result()
    return [errors.get(s) for s in sources]


def _claim(path: pathlib.Path) -> bool | None:
    """compile_marks.claim, or None where no mark can be written (a full or read-only
    cache): the compile runs unmarked, and a cubin it cannot write is its build's error."""
    try:
        return compile_marks.claim(path)
    except OSError:
        return None


def _compile_quiet(source: str, arch: str, owned: bool = False):
    try:
        a = arch_for(source, arch)
        _compiled(source, a, _cubin_path(source, a), owned=owned)
        return None
    except BaseException as e:  # returned, not raised: one bad source must not stop the rest
        return BuildError(str(e))


# --- compiles ahead of a search's evaluations -------------------------------------------
#
# A search announces a batch of configs (Evaluator.prefetch -> CUDABackend.precompile)
# and then builds and times them one after another.  compile_many() would make the
# first evaluation wait for the whole batch; compile_ahead() instead starts the batch in
# a process pool kept for the search (CUDABackend.search_session) and returns at once:
# compile_cubin() of a source it started waits for that compile alone.  Each compile it
# starts is marked first (compile_marks.claim), so that a build in another process of the
# host waits for it too; a source another process has marked is left to that process.

_ahead: dict = {}            # cubin path -> the Future of its compile
_ahead_pool = None
_ahead_lock = threading.Lock()


def _pool_factory(workers: int):
    """The pool compile_ahead uses (spawned processes: the parent may hold a CUDA
    context a child must not inherit; tests use threads)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_parent)


def compile_ahead(sources: list[str], arch: str) -> None:
    """Start compiling the `sources` not cached (in this order) and return at once."""
    global _ahead_pool
    with _ahead_lock:
        todo = []
        for s in dict.fromkeys(sources):
            a = arch_for(s, arch)
            path = _cubin_path(s, a)
            if path not in _ahead and not path.exists():
                todo.append((s, a, path))
        if not todo:
            return
        if _ahead_pool is None:
            _ahead_pool = _pool_factory(compile_share())
        for s, a, path in todo:
            mine = _claim(path)
            if mine is not False:             # else another process compiles it: a build waits
                _ahead[path] = _ahead_pool.submit(_compile_quiet, s, a, bool(mine))


def _wait_ahead(path: pathlib.Path) -> None:
    """Wait for compile_ahead's compile of `path`, if it started one (its failure, or
    a cancel, leaves the compile to the caller, which reports it)."""
    fut = _ahead.get(path)
    if fut is None:
        return
    try:
        fut.result()
    except (CancelledError, Exception):      # noqa: BLE001 (compile_cubin compiles and reports it)
        # cancelled before it ran, or its process died: nobody else releases its mark
        compile_marks.release(path)
    with _ahead_lock:
        if _ahead.get(path) is fut:
            del _ahead[path]


def stop_ahead() -> None:
    """Cancel the compiles not started and end the running ones: they were for configs
    the search did not reach, and left running they take the host's cores from the
    calls a user makes right after a tune (a cubin is written by rename: an ended
    compile leaves at most a .tmp file beside the cache's cubins)."""
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
        # the marks of compiles ended before they wrote their cubin (an ended process
        # releases nothing): other processes' builds compile those themselves
        for path in started:
            if not path.exists():
                compile_marks.release(path)
