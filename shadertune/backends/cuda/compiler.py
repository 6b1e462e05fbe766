"""NVRTC compilation to a cubin, with an on-disk cache keyed by the source
hash, the architecture, the options and the NVRTC version (so a new toolkit
recompiles).  Safe to call from several processes: files land atomically."""
from __future__ import annotations

import hashlib
import os
import pathlib
import tempfile

from ...errors import BuildError
from .device import import_cupy

# No fast-math: plain IEEE fp32/fp64 FMA, like cuBLAS with TF32 off.
OPTIONS = ("--std=c++17",)


def cache_dir() -> pathlib.Path:
    root = os.environ.get("SHADERTUNE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shadertune")
    return pathlib.Path(root) / "cuda"


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
    """Path of the cubin for `source` on `arch`, compiling it if not cached."""
    arch = arch_for(source, arch)
    path = _cubin_path(source, arch)
    if path.exists():
        return path
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
    return path


def compile_many(sources: list[str], arch: str, workers: int | None = None) -> list[BaseException | None]:
    """Compile many sources into the cache in parallel processes (NVRTC is
    slow and holds the GIL); returns None or the exception for each."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    todo = [s for s in dict.fromkeys(sources) if not _cubin_path(s, arch_for(s, arch)).exists()]
    errors = {}
    if todo:
        workers = workers or min(len(todo), os.cpu_count() or 1)
        # spawn, not fork: the parent may hold a CUDA context a child must not inherit
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            for s, fut in [(s, ex.submit(_compile_quiet, s, arch)) for s in todo]:
                errors[s] = fut.result()
    return [errors.get(s) for s in sources]


def _compile_quiet(source: str, arch: str):
    try:
        compile_cubin(source, arch)
        return None
    except BaseException as e:  # returned, not raised: one bad source must not stop the rest
        return BuildError(str(e))
