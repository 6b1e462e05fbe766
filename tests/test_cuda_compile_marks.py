"""A compile in progress is marked in the cubin cache (core/compile_marks.py): a
build in another process of the host waits for that compile instead of compiling the
kernel again; a leftover mark (its process gone, or too old) is taken over; a compile
ahead that was ended leaves no mark behind.  NVRTC is the CuPy stand-in's
(tests/fake_cupy.py: a 'cubin' is the source's bytes); the other process is a real one."""
import os
import subprocess
import sys
import threading
import time

import pytest

import fake_cupy
from shadertune.backends.cuda import CUDABackend, codegen, compiler
from shadertune.core import compile_marks
from shadertune.core.problem import Problem


@pytest.fixture
def nvrtc(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setenv("SHADERTUNE_CACHE", str(tmp_path / "cache"))
    fake_cupy._NVRTC.compiled = []
    yield fake_cupy._NVRTC
    compiler.stop_ahead()
    # a held pool's thread that had taken a compile runs it to its end after stop_ahead:
    # joined here, or it compiles into the next test's list (seen on a fast GPU host)
    while _POOLS:
        _POOLS.pop().shutdown(wait=True)


_POOLS: list = []


@pytest.fixture
def other_process():
    """A live process of this host that is not this one (the other worker)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _source_and_path():
    be = CUDABackend()
    p = Problem(64, 48, 80)
    src = codegen.source(p, be.default_config(p))
    arch = compiler.arch_for(src, be.arch())
    return src, arch, compiler._cubin_path(src, arch)


def _mark(path, host, pid, when):
    mark = compile_marks.mark_of(path)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(f"{host} {pid} {when}")
    return mark


def _build_beside(other_process):
    """A build started on a thread while `other_process` holds the kernel's mark: (source,
    cubin path, the mark, the thread, the list its result lands in)."""
    src, arch, path = _source_and_path()
    mark = _mark(path, compile_marks._HOST, other_process.pid, time.time())
    got = []
    t = threading.Thread(target=lambda: got.append(compiler.compile_cubin(src, arch)))
    t.start()
    time.sleep(0.3)
    return src, path, mark, t, got


def test_a_build_waits_for_another_process_compiling_the_same_kernel(nvrtc, other_process):
    src, path, mark, t, got = _build_beside(other_process)
    assert t.is_alive() and nvrtc.compiled == []        # waiting, not compiling
    path.write_bytes(src.encode())                      # the other process's cubin lands
    mark.unlink()
    t.join(10)
    assert got == [path] and nvrtc.compiled == []       # compiled once, by the other


def test_a_build_compiles_itself_when_the_other_compile_ends_without_a_cubin(nvrtc, other_process):
    src, path, mark, t, got = _build_beside(other_process)
    mark.unlink()                                       # it failed (its build reports why)
    t.join(10)
    assert got == [path] and nvrtc.compiled == [src] and not mark.exists()


@pytest.mark.parametrize("leftover", ["process gone", "too old"])
def test_a_leftover_mark_is_taken_over(nvrtc, leftover):
    src, arch, path = _source_and_path()
    if leftover == "process gone":
        done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
        mark = _mark(path, compile_marks._HOST, int(done.stdout), time.time())
    else:
        mark = _mark(path, compile_marks._HOST, os.getpid(),
                     time.time() - compile_marks.STALE_SECONDS - 1)
    t0 = time.monotonic()
    assert compiler.compile_cubin(src, arch) == path
    assert time.monotonic() - t0 < 5 and nvrtc.compiled == [src] and not mark.exists()


def test_a_mark_from_another_host_is_judged_by_its_age(tmp_path):
    cubin = tmp_path / "k.cubin"
    mark = _mark(cubin, "elsewhere", 1, time.time())
    assert compile_marks.live(mark) and not compile_marks.claim(cubin)
    _mark(cubin, "elsewhere", 1, time.time() - compile_marks.STALE_SECONDS - 1)
    assert not compile_marks.live(mark) and compile_marks.claim(cubin)
    assert mark.read_text().split()[:2] == [compile_marks._HOST, str(os.getpid())]
    compile_marks.release(cubin)
    assert not mark.exists()


def _held_pool(monkeypatch, threads: int) -> threading.Event:
    """compile_ahead's pool: `threads` threads, none of whose compiles starts before the
    returned gate is set."""
    from concurrent.futures import ThreadPoolExecutor
    gate = threading.Event()

    class HeldPool(ThreadPoolExecutor):
        def __init__(self, workers):
            super().__init__(max_workers=threads)
            _POOLS.append(self)

        def submit(self, fn, *a, **kw):
            return super().submit(lambda: gate.wait(30) and fn(*a, **kw))
    monkeypatch.setattr(compiler, "_pool_factory", HeldPool)
    return gate


def _three_kernels():
    be = CUDABackend()
    p = Problem(64, 48, 80)
    srcs = [codegen.source(p, c) for c in be.candidates(p, 3)]
    return be, srcs, [compiler._cubin_path(s, compiler.arch_for(s, be.arch())) for s in srcs]


def test_compile_ahead_marks_what_it_starts_and_leaves_what_another_process_compiles(
        nvrtc, monkeypatch, other_process):
    gate = _held_pool(monkeypatch, 2)
    be, srcs, paths = _three_kernels()
    theirs = _mark(paths[2], compile_marks._HOST, other_process.pid, time.time())
    compiler.compile_ahead(srcs, be.arch())
    assert set(compiler._ahead) == set(paths[:2])        # the third is the other process's
    assert all(compile_marks.mark_of(q).exists() for q in paths[:2])
    gate.set()
    for q in paths[:2]:
        assert compiler.compile_cubin(srcs[paths.index(q)], be.arch()) == q
    assert not any(compile_marks.mark_of(q).exists() for q in paths[:2])   # released once written
    assert theirs.exists() and sorted(nvrtc.compiled) == sorted(srcs[:2])


def test_compiles_ended_before_they_ran_leave_no_mark(nvrtc, monkeypatch):
    gate = _held_pool(monkeypatch, 1)
    be, srcs, paths = _three_kernels()
    compiler.compile_ahead(srcs, be.arch())
    assert all(compile_marks.mark_of(q).exists() for q in paths)
    compiler.stop_ahead()                 # the search ended: none of them reached
    gate.set()                            # (the one a thread had taken runs to its end)
    deadline = time.monotonic() + 10
    while any(compile_marks.mark_of(q).exists() for q in paths) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(compile_marks.mark_of(q).exists() for q in paths)


def test_a_cache_that_takes_no_mark_still_compiles(nvrtc, monkeypatch):
    # a full (or read-only) cache: no mark can be written; the compiles run unmarked and
    # nothing raises out of compile ahead or a build (a cubin it cannot write is the
    # build's own error, as before)
    def full(cubin):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(compile_marks, "claim", full)
    gate = _held_pool(monkeypatch, 2)
    be, srcs, paths = _three_kernels()
    compiler.compile_ahead(srcs[1:], be.arch())
    assert set(compiler._ahead) == set(paths[1:])
    gate.set()
    assert [compiler.compile_cubin(s, be.arch()) for s in srcs] == paths
    assert sorted(nvrtc.compiled) == sorted(srcs)


def test_a_pool_child_that_dies_mid_compile_frees_the_kernel_at_once(nvrtc, tmp_path):
    # compile ahead marks a kernel in the parent; the child that runs it names itself on
    # the mark; that child dying (no release) leaves a mark of a dead process: taken over
    from subproc import run_python
    src, arch, path = _source_and_path()
    assert compile_marks.claim(path)                    # the parent's mark
    r = run_python(None, "-c", "import pathlib, sys; from shadertune.core import "
                   "compile_marks; compile_marks.restamp(pathlib.Path(sys.argv[1]))", str(path))
    assert r.returncode == 0, r.stderr
    host, pid, _ = compile_marks.mark_of(path).read_text().split()
    assert host == compile_marks._HOST and int(pid) != os.getpid()
    t0 = time.monotonic()
    assert compiler.compile_cubin(src, arch) == path    # no wait for the dead child
    assert time.monotonic() - t0 < 5 and nvrtc.compiled == [src]
