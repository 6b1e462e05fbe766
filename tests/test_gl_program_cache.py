"""Compute programs as driver binaries (platform/program_binary.py) in the host's program
cache, compiled ahead in a pool of processes (platform/program_cache.py), on llvmpipe."""
import os
import time

import numpy as np
import pytest

from shadertune.backends.gl import GLBackend
from shadertune.backends.gl.platform import program_binary, program_cache
from shadertune.backends.gl.platform.context import state_of
from shadertune.core import compile_marks
from shadertune.core.cpus import HOST_WORKERS, compile_share, usable_cpus
from shadertune.core.problem import Problem
from shadertune.search.evaluate import Evaluator

SHADER = """#version 430
layout(local_size_x = 4) in;
layout(std430, binding = 0) buffer Out { float o[]; };
uniform int u_n;
uniform float u_scale;
uniform bool u_flip;
void main() {
    uint i = gl_GlobalInvocationID.x;
    o[i] = (u_flip ? -1.0 : 1.0) * u_scale * float(int(i) + u_n);
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHADERTUNE_CACHE", str(tmp_path / "cache"))
    yield tmp_path / "cache"
    program_cache.stop_ahead()


@pytest.fixture
def binaries(gl_backend):
    if not program_binary.available(gl_backend.ctx):
        pytest.skip("this driver keeps no program binaries (Mesa: its shader cache is off)")
    return gl_backend


def _run(ctx, program, **values):
    buf = ctx.buffer(reserve=4 * 8)
    buf.bind_to_storage_buffer(0)
    for name, v in values.items():
        program.get(name, None).value = v
    program.run(2, 1, 1)
    ctx.finish()
    out = np.frombuffer(buf.read(), dtype=np.float32).copy()
    buf.release()
    return out


def test_a_binary_runs_as_its_source_does(binaries):
    ctx = binaries.ctx
    fmt, data = program_binary.compile_binary(SHADER)
    loaded = program_binary.BinaryProgram.load(fmt, data)
    source = ctx.compute_shader(SHADER)
    try:
        values = {"u_n": 3, "u_scale": 0.5, "u_flip": True}
        got, want = _run(ctx, loaded, **values), _run(ctx, source, **values)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, -0.5 * (np.arange(8) + 3))
        assert loaded.get("u_missing") is None and loaded.get("u_missing", 7) == 7
        assert program_binary.binary_of(source.glo)[0] == fmt     # a moderngl program gives one too
    finally:
        loaded.release()
        source.release()
    assert program_binary.BinaryProgram.load(fmt, b"\0" * 64) is None     # refused, not raised


def test_a_bad_source_says_the_drivers_error(binaries):
    from shadertune.errors import BuildError
    with pytest.raises(BuildError, match="compile/link failed"):
        program_binary.compile_binary(SHADER.replace("void main", "void mian"))


def _configs(backend, problem, n=3):
    return [c for c in backend.candidates(problem, 24) if c.get("family") == "compute"][:n]


def _no_source_compiles(monkeypatch, ctx):
    def refuse(*a, **k):
        raise AssertionError("compiled from source: the cache was not used")
    monkeypatch.setattr(type(ctx), "compute_shader", refuse)


def test_a_build_keeps_its_binary_and_a_later_one_loads_it(binaries, cache, monkeypatch):
    b, p = binaries, Problem(48, 40, 24)
    cs = _configs(b, p)
    first = [Evaluator(b, p)(c) for c in cs]
    assert all(r.ok for r in first)
    files = sorted(cache.glob("gl/*/*.bin"))
    assert len(files) == len({b.source(p, c) for c in cs})
    state_of(b.ctx).programs.clear()            # as a new process: nothing kept in the context
    with monkeypatch.context() as m:
        _no_source_compiles(m, b.ctx)
        again = [Evaluator(b, p)(c) for c in cs]
    assert all(r.ok for r in again)             # verified against float64 like any build
    state_of(b.ctx).programs.clear()


def test_a_refused_or_foreign_file_is_removed_and_the_source_compiled(binaries, cache):
    b, p = binaries, Problem(40, 32, 16)
    c = _configs(b, p, 1)[0]
    source = b.source(p, c)
    path = program_cache.path_of(program_cache.folder_of(b.ctx), source)
    path.parent.mkdir(parents=True)
    for junk in (program_cache._MAGIC + b"\1\0\0\0" + b"x" * 100, b"not a binary at all"):
        path.write_bytes(junk)
        state_of(b.ctx).programs.clear()
        assert program_cache.load(b.ctx, source) is None and not path.exists()
    r = Evaluator(b, p)(c)
    assert r.ok and path.exists()               # compiled, and its own binary kept
    state_of(b.ctx).programs.clear()


def test_a_cache_that_takes_nothing_still_builds(binaries, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SHADERTUNE_CACHE", str(blocker / "cache"))     # under a file: no folder
    b, p = binaries, Problem(40, 24, 16)
    state_of(b.ctx).programs.clear()
    assert Evaluator(b, p)(_configs(b, p, 1)[0]).ok
    state_of(b.ctx).programs.clear()


def test_compiles_ahead_fill_the_cache_and_the_builds_load_them(binaries, cache, monkeypatch):
    monkeypatch.setenv(program_cache.AHEAD_ENV, "1")
    b, p = binaries, Problem(56, 40, 24)
    cs = _configs(b, p)
    sources = {b.source(p, c) for c in cs}
    with b.search_session():
        b.precompile(p, cs)
        pool = program_cache._ahead_pool
        assert pool is not None and len(program_cache._ahead) == len(sources)
        for fut in list(program_cache._ahead.values()):
            assert fut.result(timeout=120) is None
        tag = program_cache.folder_of(b.ctx)
        assert all(program_cache.path_of(tag, s).exists() for s in sources)
        assert not list(cache.glob("gl/*/*" + compile_marks.SUFFIX))
        state_of(b.ctx).programs.clear()
        with monkeypatch.context() as m:
            _no_source_compiles(m, b.ctx)
            assert all(Evaluator(b, p)(c).ok for c in cs)
        procs = list(pool._processes.values())
    # the session's end ends the pool and its processes
    assert program_cache._ahead_pool is None
    deadline = time.monotonic() + 30
    while any(pr.is_alive() for pr in procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pr.is_alive() for pr in procs)
    state_of(b.ctx).programs.clear()


def test_a_failed_compile_ahead_leaves_no_file_and_no_mark(binaries, cache):
    tag = program_cache.folder_of(binaries.ctx)
    bad = SHADER.replace("void main", "void mian")
    program_cache.compile_ahead([bad], tag, None)
    path = program_cache.path_of(tag, bad)
    why = program_cache._ahead[path].result(timeout=120)
    assert "compile/link failed" in why
    assert not path.exists() and not compile_marks.mark_of(path).exists()


def test_compiles_ahead_only_where_asked_or_on_a_gpu(monkeypatch):
    monkeypatch.delenv(program_cache.AHEAD_ENV, raising=False)
    assert program_cache.ahead_wanted(False) and not program_cache.ahead_wanted(True)
    monkeypatch.setenv(program_cache.AHEAD_ENV, "1")
    assert program_cache.ahead_wanted(True)
    monkeypatch.setenv(program_cache.AHEAD_ENV, "0")
    assert not program_cache.ahead_wanted(False)


def test_llvmpipe_compiles_nothing_ahead_by_default(binaries, cache, monkeypatch):
    monkeypatch.delenv(program_cache.AHEAD_ENV, raising=False)
    p = Problem(48, 48, 16)
    binaries.precompile(p, _configs(binaries, p))
    assert program_cache._ahead_pool is None and not program_cache._ahead


def test_the_compile_share_divides_the_host_among_its_workers(monkeypatch):
    monkeypatch.delenv(HOST_WORKERS, raising=False)
    assert compile_share() == usable_cpus()
    monkeypatch.setenv(HOST_WORKERS, str(2 * usable_cpus()))
    assert compile_share() == 1
    monkeypatch.setenv(HOST_WORKERS, "nonsense")
    assert compile_share() == usable_cpus()


def test_precompile_from_another_thread_touches_no_gl(binaries, cache, monkeypatch):
    """A cluster's worker calls precompile beside its GPU thread: it must not raise nor
    make GL calls there (the folder was read when the context opened)."""
    import threading
    monkeypatch.setenv(program_cache.AHEAD_ENV, "1")
    p = Problem(48, 32, 16)
    cs = _configs(binaries, p, 2)
    binaries.device()
    errors = []

    def other():
        try:
            binaries.precompile(p, cs)
        except Exception as e:      # noqa: BLE001
            errors.append(e)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert not errors
    for fut in list(program_cache._ahead.values()):
        fut.result(timeout=120)
    tag = program_cache.folder_of(binaries.ctx)
    assert all(program_cache.path_of(tag, binaries.source(p, c)).exists() for c in cs)
