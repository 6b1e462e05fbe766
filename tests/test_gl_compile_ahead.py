"""Compute programs compiled ahead on the GL driver's own threads (platform/raw_program.py,
platform/compile_ahead.py), on llvmpipe (Mesa has GL_KHR_parallel_shader_compile too)."""
import threading

import numpy as np
import pytest

from shadertune.backends.gl.platform import compile_ahead, raw_program
from shadertune.backends.gl.platform.context import state_of
from shadertune.core.cpus import HOST_WORKERS, compile_share, usable_cpus
from shadertune.core.problem import Problem
from shadertune.errors import BuildError
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
BAD = SHADER.replace("void main", "void mian")


@pytest.fixture
def parallel(gl_backend, monkeypatch):
    """The test backend with compiles ahead asked for (llvmpipe does not by default)."""
    monkeypatch.setenv(compile_ahead.AHEAD_ENV, "1")
    st = state_of(gl_backend.ctx)
    st.parallel_compile = None
    if not compile_ahead.wanted(gl_backend.ctx):
        pytest.skip("this driver does not compile in parallel")
    yield gl_backend
    compile_ahead.drop(gl_backend.ctx)
    st.parallel_compile = None
    st.programs.clear()


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


def test_a_raw_program_runs_as_moderngls_does(parallel):
    ctx = parallel.ctx
    raw = raw_program.start(SHADER).finish()
    source = ctx.compute_shader(SHADER)
    try:
        values = {"u_n": 3, "u_scale": 0.5, "u_flip": True}
        got, want = _run(ctx, raw, **values), _run(ctx, source, **values)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, -0.5 * (np.arange(8) + 3))
        assert raw.get("u_missing") is None and raw.get("u_missing", 7) == 7
    finally:
        raw.release()
        source.release()
    assert raw.glo == 0


def test_a_bad_source_says_the_drivers_error_and_keeps_nothing(parallel):
    ctx = parallel.ctx
    compile_ahead.start(ctx, [BAD, SHADER])
    with pytest.raises(BuildError, match="compile/link failed"):
        compile_ahead.take(ctx, BAD)
    assert BAD not in state_of(ctx).compiling
    assert compile_ahead.take(ctx, BAD) is None          # nothing left: a build compiles it
    compile_ahead.take(ctx, SHADER).release()


def _configs(backend, problem, n=3):
    return [c for c in backend.candidates(problem, 24) if c.get("family") == "compute"][:n]


def _no_source_compiles(monkeypatch, ctx):
    def refuse(*a, **k):
        raise AssertionError("compiled in the build: the compile ahead was not used")
    monkeypatch.setattr(type(ctx), "compute_shader", refuse)


def test_announced_configs_start_at_the_next_build_and_the_builds_take_them(parallel, monkeypatch):
    b, p = parallel, Problem(56, 40, 24)
    cs = _configs(b, p)
    sources = [b.source(p, c) for c in cs]
    st = state_of(b.ctx)
    st.programs.clear()
    with b.search_session():
        b.precompile(p, cs)
        assert not st.compiling                  # queued: nothing started outside a build
        with monkeypatch.context() as m:
            _no_source_compiles(m, b.ctx)
            results = [Evaluator(b, p)(c) for c in cs]
        assert all(r.ok for r in results)        # verified against float64 like any build
        assert all(s in st.programs for s in set(sources)) and not st.compiling
        more = [c for c in b.candidates(p, 24) if c.get("family") == "compute"
                and b.source(p, c) not in st.programs][:2]
        b.precompile(p, more)
        b._start_announced()
        started = dict(st.compiling)
        assert started
    # configs the search never reached are given back when it ends
    assert not st.compiling and not b._announced
    assert all(job.program == 0 for job in started.values())


def test_compiles_ahead_only_where_asked_or_on_a_gpu(gl_backend, monkeypatch):
    ctx, st = gl_backend.ctx, state_of(gl_backend.ctx)
    try:
        for env, want in ((None, False), ("0", False), ("1", raw_program.parallel_available(ctx))):
            if env is None:
                monkeypatch.delenv(compile_ahead.AHEAD_ENV, raising=False)
            else:
                monkeypatch.setenv(compile_ahead.AHEAD_ENV, env)
            st.parallel_compile = None
            assert compile_ahead.wanted(ctx) == want     # llvmpipe is no GPU
    finally:
        st.parallel_compile = None


def test_llvmpipe_compiles_nothing_ahead_by_default(gl_backend, monkeypatch):
    monkeypatch.delenv(compile_ahead.AHEAD_ENV, raising=False)
    state_of(gl_backend.ctx).parallel_compile = None
    p = Problem(48, 48, 16)
    gl_backend.precompile(p, _configs(gl_backend, p))
    gl_backend._start_announced()
    assert not state_of(gl_backend.ctx).compiling and not gl_backend._announced


def test_precompile_from_another_thread_touches_no_gl(parallel):
    """A cluster's worker calls precompile beside its GPU thread: it must not raise nor
    make GL calls there; the context's thread starts what it queued."""
    p = Problem(48, 32, 16)
    cs = _configs(parallel, p, 2)
    errors = []

    def other():
        try:
            parallel.precompile(p, cs)
        except Exception as e:      # noqa: BLE001
            errors.append(e)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert not errors and len(parallel._announced) == len({parallel.source(p, c) for c in cs})
    parallel._start_announced()
    assert set(state_of(parallel.ctx).compiling) == {parallel.source(p, c) for c in cs}


def test_the_compile_share_divides_the_host_among_its_workers(monkeypatch):
    monkeypatch.delenv(HOST_WORKERS, raising=False)
    assert compile_share() == usable_cpus()
    monkeypatch.setenv(HOST_WORKERS, str(2 * usable_cpus()))
    assert compile_share() == 1
    monkeypatch.setenv(HOST_WORKERS, "nonsense")
    assert compile_share() == usable_cpus()


def test_the_heat_before_a_compile_follows_the_familys_last_compile():
    from shadertune.backends.gl import COMPILE_HEAT_MARGIN, COMPILE_HEAT_S, compile_heat_s
    assert compile_heat_s(None) == COMPILE_HEAT_S               # nothing measured: the most
    assert compile_heat_s(0.02) == pytest.approx(0.02 * COMPILE_HEAT_MARGIN)
    assert compile_heat_s(0.5) == COMPILE_HEAT_S                # a long compile: the most
    assert compile_heat_s(-1.0) == 0.0


def test_a_search_build_records_its_familys_compile(gl_backend):
    p = Problem(40, 32, 24)
    config = _configs(gl_backend, p, 1)[0]
    state_of(gl_backend.ctx).programs.clear()
    with gl_backend.search_session():
        kernel = gl_backend.build(p, config)
        try:
            assert gl_backend._compile_s["compute"] == kernel.program_s > 0
        finally:
            kernel.release()
    state_of(gl_backend.ctx).programs.clear()


def test_a_bad_compile_ahead_setting_is_refused_where_a_search_starts(gl_backend, monkeypatch, tmp_path):
    import shadertune
    from shadertune.backends.gl import GLBackend
    monkeypatch.setenv(compile_ahead.AHEAD_ENV, "maybe")
    with pytest.raises(ValueError, match="SHADERTUNE_GL_COMPILE_AHEAD must be 0 or 1"):
        shadertune.tune((8, 8, 8), evaluations=1, db=str(tmp_path / "t.sqlite"), train=False,
                        progress=False)
    assert not (tmp_path / "t.sqlite").exists()          # refused before the store is made
    for bad in ("yes", "2", "on"):
        monkeypatch.setenv(compile_ahead.AHEAD_ENV, bad)
        with pytest.raises(ValueError, match="SHADERTUNE_GL_COMPILE_AHEAD must be 0 or 1"):
            GLBackend.check_environment()
        with pytest.raises(ValueError, match="SHADERTUNE_GL_COMPILE_AHEAD must be 0 or 1"):
            with gl_backend.search_session():
                pass
    for fine, want in (("", None), (" 1 ", True), ("0", False)):
        monkeypatch.setenv(compile_ahead.AHEAD_ENV, fine)
        assert compile_ahead.ahead_setting() is want
