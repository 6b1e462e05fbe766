"""shadertune.matmul: numpy semantics, bad input, caching without leaks."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shadertune
from shadertune import api
from numerics import rel_err


def mm(A, B, **kw):
    return shadertune.matmul(A, B, config="default", **kw)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(M=st.integers(1, 40), N=st.integers(1, 40), K=st.integers(1, 70), seed=st.integers(0, 2**32 - 1))
def test_random_shapes_match_numpy(M, N, K, seed):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    out = mm(A, B)
    assert out.shape == (M, N) and out.dtype == np.float32
    assert rel_err(out, A @ B) <= 1e-5


def test_views_transposes_and_orders(rng):
    A = rng.standard_normal((50, 33))
    B = rng.standard_normal((40, 50))
    assert rel_err(mm(A.T, B.T), A.T @ B.T) <= 1e-5                      # transposed views
    assert rel_err(mm(np.asfortranarray(A.T), np.asfortranarray(B.T)), A.T @ B.T) <= 1e-5  # F order
    S = rng.standard_normal((80, 90))
    assert rel_err(mm(S[::2, 1::3], S[:30, ::4]), S[::2, 1::3] @ S[:30, ::4]) <= 1e-5  # strided


def test_one_d_and_stacked_follow_numpy(rng):
    A, B, v = rng.standard_normal((6, 5)), rng.standard_normal((5, 4)), rng.standard_normal(5)
    for a, b in [(v, B), (A, v), (v, v), (rng.standard_normal((3, 6, 5)), B),
                 (rng.standard_normal((2, 1, 6, 5)), rng.standard_normal((3, 5, 4)))]:
        out = mm(a, b)
        ref = np.matmul(a, b)
        assert out.shape == ref.shape
        assert rel_err(out, ref) <= 1e-5


def test_alpha_beta_and_out(rng):
    A, B = rng.standard_normal((9, 17)), rng.standard_normal((17, 11))
    C = rng.standard_normal((9, 11)).astype(np.float32)
    ref = 0.25 * (A @ B) + 3.0 * C
    res = mm(A, B, alpha=0.25, beta=3.0, out=C)
    assert res is C and rel_err(C, ref) <= 1e-5
    with pytest.raises(ValueError, match="beta != 0 needs C"):
        mm(A, B, beta=1.0)
    with pytest.raises(ValueError, match=r"out has shape \(2, 2\), expected \(9, 11\)"):
        mm(A, B, out=np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="dtype float32"):
        mm(A, B, out=np.zeros((9, 11)))


def test_dtypes_are_computed_in_float32(rng):
    Ai = rng.integers(-5, 5, (7, 8))
    Bi = rng.integers(-5, 5, (8, 3))
    out = mm(Ai, Bi)
    assert out.dtype == np.float32 and np.array_equal(out, (Ai @ Bi).astype(np.float32))
    assert mm(np.ones((2, 2), bool), np.ones((2, 2), np.float16)).dtype == np.float32


@pytest.mark.parametrize("a,b,exc,msg", [
    (np.ones((3, 4)), np.ones((5, 6)), ValueError, r"A\(3, 4\) and B\(5, 6\)"),
    (np.ones((3, 4), complex), np.ones((4, 2)), TypeError, "complex"),
    (np.array([["a", "b"]]), np.ones((2, 2)), TypeError, "dtype <U1"),
    (np.array([[object()]]), np.ones((1, 1)), TypeError, "dtype object"),
    (np.float64(3.0), np.ones((1, 1)), ValueError, "at least 1-D"),
    ("abc", np.ones((1, 1)), TypeError, "str"),
    (np.ones((2, 3, 4)), np.ones((3, 4, 5)), ValueError, "cannot be broadcast"),
])
def test_bad_input(a, b, exc, msg):
    with pytest.raises(exc, match=msg):
        mm(a, b)


def test_bad_options():
    with pytest.raises(ValueError, match="backend"):
        shadertune.matmul(np.ones((2, 2)), np.ones((2, 2)), backend="vulkan")
    with pytest.raises(ValueError, match="not valid"):
        shadertune.matmul(np.ones((8, 8)), np.ones((8, 8)),
                          config={"glsl": "330", "fetch": "texelFetch", "unroll": 1, "np": 8,
                                  "mc": "1x4", "mrt_h": 4, "mrt_w": 4})
    with pytest.raises(TypeError, match="alpha"):
        mm(np.ones((2, 2)), np.ones((2, 2)), alpha="2")


def test_nan_inf_propagate_like_numpy():
    x = np.array([[np.nan, 1.0, 0.0], [1.0, np.inf, 2.0], [0.0, 1.0, -np.inf]])
    y = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, 3.0]])
    out = mm(x, y)
    ref = (x @ y).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(out[np.isfinite(ref)], ref[np.isfinite(ref)])
    np.testing.assert_array_equal(out[np.isinf(ref)], ref[np.isinf(ref)])


def test_empty_and_zero_k():
    assert mm(np.ones((0, 3)), np.ones((3, 4))).shape == (0, 4)
    assert mm(np.ones((3, 5)), np.ones((5, 0))).shape == (3, 0)
    z = mm(np.ones((3, 0)), np.ones((0, 4)))
    assert z.shape == (3, 4) and not z.any()
    C = np.full((3, 4), 2.0, np.float32)
    assert np.array_equal(mm(np.ones((3, 0)), np.ones((0, 4)), beta=0.5, out=C), np.ones((3, 4)))


def test_beyond_max_texture_size_is_tiled(gl_backend, rng, monkeypatch):
    """A matrix larger than the device's texture limit is split into tiles (K chunks accumulate)."""
    be = api._backend("gl", None)
    limits = dict(be.device().limits, max_texture_size=16)
    monkeypatch.setattr(be, "_device", type(be.device())(**{**be.device().to_dict(), "limits": limits}))
    api.clear_cache()
    A, B = rng.standard_normal((70, 90)), rng.standard_normal((90, 45))
    C = rng.standard_normal((70, 45)).astype(np.float32)
    ref = 2.0 * (A @ B) - C
    assert rel_err(mm(A, B, alpha=2.0, beta=-1.0, out=C), ref) <= 1e-5
    api.clear_cache()


def test_release_frees_every_gl_object_or_pools_its_textures(gl_backend):
    from shadertune.problem import Problem
    p = Problem(10, 12, 14)
    k = gl_backend.build(p, gl_backend.default_config(p))
    objs = list(k._resources)
    texs = [t for t, _ in k._textures.values()]
    assert len(objs) >= 3 and len(texs) >= 4
    k.release()
    released = lambda o: type(o.mglo).__name__ == "InvalidObject"   # noqa: E731
    assert all(released(o) for o in objs)
    pooled = {id(t) for t, _, _ in gl_backend.pool._free.values()}
    assert all(id(t) in pooled or released(t) for t in texs)
    assert gl_backend.pool.bytes <= gl_backend.pool.max_bytes


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def test_thousand_calls_leak_nothing(rng):
    A, B = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((40, 16)).astype(np.float32)
    for _ in range(20):
        mm(A, B)
    before = _rss_mb()
    for _ in range(1000):
        mm(A, B)
    # Shapes beyond the cache size force evictions (kernels released, textures freed).
    for i in range(30):
        mm(rng.standard_normal((8 + i, 12)), rng.standard_normal((12, 9)))
    assert api.cached_kernels() <= api._CACHE_SIZE
    assert _rss_mb() - before < 40, "GL resources leaked across calls"
