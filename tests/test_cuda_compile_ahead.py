"""A search's compiles on the CUDA backend (issue 38 item 5's CUDA part): inside a
search session, precompile compiles the batch's first config (a search's first
batch leads with the default) at once and starts the rest in a pool, so that
the first evaluation waits for its own compile alone; a build waits for the
compile started for it instead of compiling again; the compiles a search did
not reach are cancelled when it ends. NVRTC is the CuPy stand-in's
(tests/fake_cupy.py: a 'cubin' is the source's bytes) and the pool threads."""
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import fake_cupy
from shadertune.backends.cuda import CUDABackend, codegen, compiler
from shadertune.core.problem import Problem


class GatedPool(ThreadPoolExecutor):
    """One thread; nothing it runs starts before `gate` is set."""

    def __init__(self, workers):
        super().__init__(max_workers=1)
        self.gate = threading.Event()
        GatedPool.last = self

    def submit(self, fn, *a, **kw):
        return super().submit(lambda: self.gate.wait(30) and fn(*a, **kw))


@pytest.fixture
def nvrtc(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setenv("SHADERTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "_pool_factory", GatedPool)
    fake_cupy._NVRTC.compiled = []
    yield fake_cupy._NVRTC
    compiler.stop_ahead()


def test_outside_a_search_precompile_compiles_everything_first(nvrtc, monkeypatch):
    be = CUDABackend()
    p = Problem(64, 48, 80)
    cfgs = be.candidates(p, 3)
    monkeypatch.setattr(compiler, "compile_many", lambda srcs, arch, workers=None: [compiler.compile_cubin(s, arch)
                                                                                    for s in srcs] and None)
    be.precompile(p, cfgs)
    assert nvrtc.compiled == [codegen.source(p, c) for c in cfgs]


def test_in_a_search_the_first_compiles_at_once_and_the_rest_ahead(nvrtc):
    be = CUDABackend()
    p = Problem(64, 48, 80)
    cfgs = be.candidates(p, 4)
    assert cfgs[0] == be.default_config(p)
    srcs = [codegen.source(p, c) for c in cfgs]
    with be.search_session():
        be.precompile(p, cfgs)
        assert nvrtc.compiled == [srcs[0]]                 # the first alone, before precompile returned
        assert compiler.compile_cubin(srcs[0], be.arch()).read_bytes() == srcs[0].encode()
        GatedPool.last.gate.set()
        path = compiler.compile_cubin(srcs[2], be.arch())  # waits for the compile started for it
        assert path.read_bytes() == srcs[2].encode()
        compiler.compile_cubin(srcs[1], be.arch())
        assert compiler.compile_cubin(srcs[3], be.arch()).exists()
    assert sorted(nvrtc.compiled) == sorted(srcs)            # each once: a build waited, never compiled again


def test_a_search_that_ends_cancels_what_it_did_not_reach(nvrtc):
    be = CUDABackend()
    p = Problem(64, 48, 80)
    cfgs = be.candidates(p, 4)
    srcs = [codegen.source(p, c) for c in cfgs]
    with be.search_session():
        be.precompile(p, cfgs)
        pool = GatedPool.last
    assert compiler._ahead == {} and compiler._ahead_pool is None
    pool.gate.set()
    pool.shutdown(wait=True)
    assert nvrtc.compiled[0] == srcs[0] and len(nvrtc.compiled) <= 2    # at most the one already started
    assert compiler.compile_cubin(srcs[3], be.arch()).read_bytes() == srcs[3].encode()   # compiled now


def test_a_config_that_fails_to_compile_is_reported_by_its_build(nvrtc):
    be = CUDABackend()
    p = Problem(64, 48, 80)
    bad = codegen.source(p, be.default_config(p)) + "\n#error broken\n"
    with be.search_session():
        compiler.compile_ahead([bad], be.arch())
        GatedPool.last.gate.set()
        from shadertune.errors import BuildError
        with pytest.raises(BuildError, match="NVRTC failed"):
            compiler.compile_cubin(bad, be.arch())


def test_a_search_that_ends_ends_the_compiles_still_running():
    """Compiles running when a search ends are for configs it did not reach: their
    processes end at once instead of taking the host's cores from the calls after it."""
    import time
    pool = compiler._pool_factory(2)
    running = [pool.submit(time.sleep, 60) for _ in range(2)]
    deadline = time.monotonic() + 60
    while not all(f.running() for f in running) and time.monotonic() < deadline:
        time.sleep(0.05)
    procs = list(pool._processes.values())
    assert len(procs) == 2 and all(p.is_alive() for p in procs)
    compiler._ahead_pool = pool
    compiler.stop_ahead()
    # ended, not left to sleep out their 60 s (a loaded 2-core machine once took more
    # than 10 s to report both gone: the bound is generous).  Asked of the system, not
    # of is_alive(): a reaper of any child in this test process (a cluster test's, run
    # before it) leaves is_alive() true for good once it took the exit status
    deadline = time.monotonic() + 30
    while any(_running(p.pid) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_running(p.pid) for p in procs)
    assert compiler._ahead_pool is None


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):   # gone (ESRCH: while being read)
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"

