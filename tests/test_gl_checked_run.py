"""BaseGLKernel.checked_run on the render-target kernel: the evaluator's run (timed,
abandonable, with packed-operand reuse)."""
import numpy as np
import pytest

from shadertune.backends.gl.mrt.codegen import plan_layout
from shadertune.backends.gl.mrt.driver import MrtKernel
from shadertune.backends.gl.platform.context import state_of
from shadertune.core.config import Config
from shadertune.errors import TooSlow
from shadertune.core.problem import Problem
from shadertune.search.operands import OperandCache

from numerics import rel_err

M, K, N = 37, 129, 61


def cfg(**kw):
    base = dict(glsl="330", fetch="texelFetch", unroll=1, np=8, mc="1x4", mrt_h=2, mrt_w=1)
    return Config({**base, **kw})


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    return A, B, A.astype(np.float64) @ B.astype(np.float64)


@pytest.mark.parametrize("np_", [4, 8, 12, 132])       # 33, 17, 11 and 1 passes
@pytest.mark.parametrize("mc", ["1x4", "2x2", "1x3"])
def test_checked_run_computes_what_run_does_split_or_not(gl_backend, data, np_, mc):
    A, B, ref = data
    if np_ % (2 if mc == "2x2" else 4):
        pytest.skip("np not a whole number of A texels")
    with gl_backend.build(Problem(M, N, K), cfg(np=np_, mc=mc)) as k:
        for limit in (None, 1e9):                # whole, then first passes + the rest
            C, ms = k.checked_run(A, B, limit_ms=limit)
            assert rel_err(C, ref) <= 1e-5 and ms > 0


def test_a_run_projected_past_the_limit_is_abandoned(gl_backend, data):
    A, B, _ = data
    with gl_backend.build(Problem(M, N, K), cfg(np=4)) as k:
        with pytest.raises(TooSlow, match=r"abandoned after 4 of 33 passes: projected") as e:
            k.checked_run(A, B, limit_ms=1e-9)
        assert e.value.projected_ms > 0


def test_a_one_pass_run_is_abandoned_after_a_band_of_its_rows(gl_backend, data):
    A, B, ref = data
    with gl_backend.build(Problem(M, N, K), cfg(np=132)) as k:      # one pass, 19 fragment rows
        assert k.passes == 1 and k.layout.hc == 19
        with pytest.raises(TooSlow, match=r"abandoned after 2 of 19 fragment rows of its one pass"):
            k.checked_run(A, B, limit_ms=1e-9)
        C, ms = k.checked_run(A, B, limit_ms=1e9)     # the band, then the other rows
        assert rel_err(C, ref) <= 1e-5 and ms > 0


def test_kernels_with_one_packing_share_packed_operands(gl_backend, data):
    A, B, ref = data
    cache = OperandCache()
    p = Problem(M, N, K)
    for c in (cfg(mrt_h=1), cfg(mrt_h=2), cfg(mrt_h=2, glsl="450"), cfg(mc="2x2")):
        # without a texture pool every load packs (or finds packed) its operands
        with MrtKernel(gl_backend.ctx, p, c, plan_layout(Problem(M, N, K), c), gl_backend.source(p, c)) as k:
            C, _ = k.checked_run(A, B, cache=cache)
            assert rel_err(C, ref) <= 1e-5
    # 1x4 on 1 or 2 row targets packs A apart (37 or 38 rows) but B alike; glsl changes
    # no packing; 2x2 packs both its own way
    assert cache.hits == 3 and len(cache) == 5


def test_poisoning_by_upload_where_a_clear_would_not_store_nan(gl_backend, data, monkeypatch):
    A, B, _ = data
    with gl_backend.build(Problem(M, N, K), cfg()) as k:
        k.run(A, B)
        monkeypatch.setattr(state_of(k.ctx), "clears_nan", False)
        k.poison()
        assert np.isnan(k.read(0)).all() and np.isnan(k.read(1)).all()


def test_pooled_textures_keep_their_operands_for_the_next_kernel(gl_backend, data):
    A, B, ref = data
    p = Problem(M, N, K)
    cache = OperandCache()
    with gl_backend.build(p, cfg(glsl="330")) as k:
        k.checked_run(A, B, cache=cache)
        a_tex = k.tex_a
    with gl_backend.build(p, cfg(glsl="450")) as k:     # same layout: A and B stay on the GPU
        C, _ = k.checked_run(A, B, cache=cache)
        assert k.tex_a is a_tex and k.uploads_skipped == 2
        assert rel_err(C, ref) <= 1e-5
    # other inputs (another cache) are uploaded, never mistaken for the pooled ones
    A2, B2 = -A, 2 * B
    with gl_backend.build(p, cfg(glsl="450")) as k:
        C, _ = k.checked_run(A2, B2, cache=OperandCache())
        assert rel_err(C, -2 * ref) <= 1e-5
        C = k.run(A, B)                                  # and without a cache, as given
        assert rel_err(C, ref) <= 1e-5


def test_the_pool_stays_within_its_bytes(gl_backend):
    from shadertune.backends.gl.platform.pool import TexturePool
    pool = TexturePool(gl_backend.ctx, max_bytes=3 * 16 * 16 * 16)   # three 16x16 RGBA32F
    texs = [pool.acquire((16, 16))[0] for _ in range(4)]
    for i, t in enumerate(texs):
        pool.give_back(t, (16, 16), tag=i)
    assert len(pool) == 3 and pool.bytes == 3 * 16 * 16 * 16
    assert type(texs[0].mglo).__name__ == "InvalidObject"       # the oldest was released
    assert pool.take_holding((16, 16), 3) is texs[3] and pool.take_holding((16, 16), 0) is None
    t, tag = pool.acquire((16, 16), tag=2)
    assert t is texs[2] and tag == 2
    pool.clear()
    assert len(pool) == 0 and pool.bytes == 0


def test_the_pool_bound_comes_from_the_environment(monkeypatch):
    from shadertune.backends.gl.platform.pool import default_pool_bytes
    monkeypatch.setenv("SHADERTUNE_GL_POOL_MB", "64")
    assert default_pool_bytes() == 64 << 20
    monkeypatch.setenv("SHADERTUNE_GL_POOL_MB", "lots")
    with pytest.raises(ValueError, match="SHADERTUNE_GL_POOL_MB"):
        default_pool_bytes()
    monkeypatch.delenv("SHADERTUNE_GL_POOL_MB")
    assert default_pool_bytes() == 256 << 20 and default_pool_bytes(searching=True) == 2 << 30


def test_a_search_widens_the_pool_and_gives_it_all_back(gl_backend, monkeypatch):
    from shadertune.search import Budget, tune
    monkeypatch.delenv("SHADERTUNE_GL_POOL_MB", raising=False)
    pool = gl_backend.pool
    before = pool.max_bytes
    seen = []
    tune(gl_backend, Problem(16, 16, 16), strategy="random", budget=Budget(max_evals=3), repeats=1,
         warmup=0, on_result=lambda r, cached: seen.append(pool.max_bytes))
    assert seen and all(b == 2 << 30 for b in seen)
    assert pool.max_bytes == before and len(pool) == 0 and pool.bytes == 0


def test_the_gl_device_says_whether_it_is_a_cpu_renderer(gl_backend):
    d = gl_backend.device()
    assert d.limits["software_renderer"] == ("llvmpipe" in d.renderer.lower())
