"""shadertune.matmul: numpy semantics, bad input, caching without leaks."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shadertune
from shadertune.front import matmul as api
from shadertune.core.problem import Problem
from numerics import rel_err


def mm(A, B, out=None, **kw):
    return shadertune.matmul(A, B, out, config="default", **kw)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(M=st.integers(1, 40), N=st.integers(1, 40), K=st.integers(1, 70), seed=st.integers(0, 2**32 - 1))
def test_random_shapes_match_numpy(M, N, K, seed):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    out = mm(A, B)
    assert out.shape == (M, N) and out.dtype == np.float32
    # against the terms' scale |A| @ |B|, not the result's: a product whose terms cancel
    # (M = N = 1, K = 11: 0.016 from terms of order 1) has a float32 error that is large
    # against the result alone (1.7e-5 relative) and small against its terms
    err = np.linalg.norm(np.asarray(out, np.float64) - A @ B)
    assert err <= 1e-5 * np.linalg.norm(np.abs(A) @ np.abs(B))


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
    with pytest.raises(ValueError, match=r"beta != 0 adds beta \* out .* pass the array to add as out="):
        mm(A, B, beta=1.0)
    with pytest.raises(ValueError, match=r"out has shape \(2, 2\), expected \(9, 11\)"):
        mm(A, B, out=np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'matmul' output from dtype\\('float64'\\) "
                                        "to dtype\\('int32'\\)"):
        mm(A, B, out=np.zeros((9, 11), np.int32))


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
    with pytest.raises(ValueError, match="unknown backend 'vulkan'"):
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
    be = api.backend("gl")
    limits = dict(be.device().limits, max_texture_size=16)
    monkeypatch.setattr(be, "_device", type(be.device())(**{**be.device().to_dict(), "limits": limits}))
    api.clear_cache()
    A, B = rng.standard_normal((70, 90)), rng.standard_normal((90, 45))
    C = rng.standard_normal((70, 45)).astype(np.float32)
    ref = 2.0 * (A @ B) - C
    assert rel_err(mm(A, B, alpha=2.0, beta=-1.0, out=C), ref) <= 1e-5
    api.clear_cache()


def test_release_frees_every_gl_object_or_pools_its_textures(gl_backend):
    from shadertune.core.problem import Problem
    p = Problem(10, 12, 14)
    k = gl_backend.build(p, gl_backend.default_for(p, {"out": "mrt"}))    # the MRT path's objects
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


@pytest.mark.slow
def test_thousand_calls_leak_nothing(rng):
    A, B = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((40, 16)).astype(np.float32)

    def round_of_calls():
        for _ in range(1000):
            mm(A, B)
        # Shapes beyond the cache size force evictions (kernels released, textures freed).
        for i in range(30):
            mm(rng.standard_normal((8 + i, 12)), rng.standard_normal((12, 9)))

    # The first round pays what is made once a process (the driver's compiled shader
    # variants, numpy's and Python's caches: ~70 MB on llvmpipe); a leak grows every round.
    round_of_calls()
    before = _rss_mb()
    round_of_calls()
    assert api.cached_kernels() <= api.door("gl").kernels.size
    assert _rss_mb() - before < 40, "GL resources leaked across calls"


# --- numpy.matmul semantics (issue 14 items 12-20) -------------------------------------
def test_gemv_with_beta(rng):
    """2-D @ 1-D and stacked @ 1-D with beta != 0 used to fail: 'C has shape (2,), expected (2,)'."""
    A, S, v = rng.standard_normal((6, 5)), rng.standard_normal((3, 6, 5)), rng.standard_normal(5)
    w = rng.standard_normal(6)
    for a, b in [(A, v), (S, v), (w, A), (w, S)]:
        ref_shape = np.matmul(a, b).shape
        C = rng.standard_normal(ref_shape).astype(np.float32)
        ref = 0.5 * np.matmul(a, b) + 1.3 * C
        got = mm(a, b, C, alpha=0.5, beta=1.3)
        assert got is C and rel_err(C, ref) <= 1e-5


def test_vector_dot_vector_is_a_numpy_scalar(rng):
    v, w = rng.standard_normal(7), rng.standard_normal(7)
    r = mm(v, w)
    assert type(r) is np.float32 and abs(r - v @ w) <= 1e-5 * np.abs(v) @ np.abs(w)
    out = np.zeros((), np.float64)
    assert mm(v, w, out) is out and abs(out - v @ w) <= 1e-5 * np.abs(v) @ np.abs(w)


def test_bool_matmul_is_numpys_logical_or_of_ands(rng):
    a = rng.integers(0, 2, (2, 9, 70)).astype(bool)
    b = rng.integers(0, 2, (70, 5)).astype(bool)
    got = mm(a, b)
    assert got.dtype == np.bool_ and np.array_equal(got, np.matmul(a, b))
    assert mm(np.ones(3, bool), np.ones(3, bool)) is np.True_
    out = np.zeros((2, 9, 5), np.float32)           # bool casts to any out, as numpy's
    assert np.array_equal(mm(a, b, out), np.matmul(a, b).astype(np.float32))
    assert mm(a[0], b.astype(np.float32)).dtype == np.float32   # bool @ float sums, as numpy
    with pytest.raises(TypeError, match="logical OR of ANDs"):
        mm(a, b, alpha=2.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.longdouble])
def test_out_of_any_dtype_numpy_casts_to(rng, dtype):
    """out had to be float32 (for float64 inputs too)."""
    A, B = rng.standard_normal((9, 17)), rng.standard_normal((17, 11))
    C = rng.standard_normal((9, 11)).astype(dtype)
    ref = 0.7 * (A @ B) + 1.3 * C.astype(np.float64)
    got = mm(A, B, C, alpha=0.7, beta=1.3)
    assert got is C and got.dtype == dtype
    assert rel_err(got, ref) <= (2e-3 if dtype == np.float16 else 1e-5)


def test_complex_out_takes_the_real_product(rng):
    A, B = rng.standard_normal((9, 17)), rng.standard_normal((17, 11))
    out = np.full((9, 11), 1 + 1j)
    assert mm(A, B, out) is out and not out.imag.any() and rel_err(out.real, A @ B) <= 1e-5
    with pytest.raises(TypeError, match="complex out"):
        mm(A, B, out, beta=1.0)


def test_out_refused_where_numpy_refuses_and_for_integers():
    A, B = np.ones((3, 4)), np.ones((4, 2))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'matmul' output from dtype\\('float64'\\)"):
        mm(A, B, np.zeros((3, 2), np.int64))
    with pytest.raises(TypeError, match="floating point"):       # numpy would: int @ int -> int
        mm(A.astype(int), B.astype(int), np.zeros((3, 2), np.int64))
    ro = np.zeros((3, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mm(A, B, ro)
    with pytest.raises(TypeError, match="out must be an array"):
        mm(A, B, [[0.0] * 2] * 3)


def test_out_batch_broadcasts_as_numpys(rng):
    A, B = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    out = np.zeros((2, 4, 5), np.float32)
    assert rel_err(mm(A, B, out), np.broadcast_to(A @ B, (2, 4, 5))) <= 1e-5
    with pytest.raises(ValueError, match="non-broadcastable output"):
        mm(np.ones((0, 1, 1)), np.ones((0, 1, 1)), np.ones((1, 1, 1), np.float32))


def test_out_aliasing_an_input(rng):
    """numpy's in-place a @= b: out is A itself."""
    a = rng.standard_normal((3, 5, 5)).astype(np.float32)
    b = rng.standard_normal((5, 5)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    assert mm(a, b, a) is a and rel_err(a, ref) <= 1e-5


def test_errors_of_array_conversion_pass_through():
    class Broken:
        def __array__(self, dtype=None, copy=None):
            raise KeyError("the caller's own error")
    with pytest.raises(KeyError, match="the caller's own error"):
        mm(Broken(), np.ones((2, 2)))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_masked_arrays_are_refused_and_matrices_kept(rng):
    m = np.ma.array([[1.0, 2.0], [3.0, 4.0]], mask=[[0, 1], [0, 0]])
    with pytest.raises(TypeError, match=r"masked array.*np\.ma\.filled\(A, 0\)"):
        mm(m, np.ones((2, 2)))
    with pytest.raises(TypeError, match="masked"):
        mm(np.ones((2, 2)), np.ones((2, 2)), np.ma.zeros((2, 2)))
    M = np.matrix(rng.standard_normal((3, 4)))
    for b in (np.matrix(rng.standard_normal((4, 2))), rng.standard_normal(4)):
        got, ref = mm(M, b), np.matmul(M, b)
        assert type(got) is np.matrix and got.shape == ref.shape and rel_err(got, ref) <= 1e-5


def test_alpha_beta_as_0d_arrays_and_numpy_scalars(rng):
    A, B = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    C = np.ones((4, 5), np.float32)
    got = mm(A, B, C, alpha=np.array(0.5), beta=np.float32(2.0))
    assert rel_err(got, 0.5 * (A @ B) + 2.0) <= 1e-5
    for bad in (np.array([1.0]), np.array(True), True, 1j, "2"):
        with pytest.raises(TypeError, match="alpha must be a real number"):
            mm(A, B, alpha=bad)


def test_stacked_inputs_resolve_the_config_once_per_call(monkeypatch, tmp_path, rng):
    """A batch read the tuning store once per matrix (12 ms each)."""
    from shadertune.selection import chain as select
    calls = []
    real = select.select_config

    def counting(*a, **k):
        calls.append(a[1])
        return real(*a, **k)
    monkeypatch.setattr(select, "select_config", counting)
    A, B = rng.standard_normal((40, 6, 5)), rng.standard_normal((5, 4))
    got = shadertune.matmul(A, B, config="auto", db=tmp_path / "store.sqlite")
    assert rel_err(got, A @ B) <= 1e-5
    assert len(calls) == 1


def test_kernel_cache_releases_what_it_evicts():
    class Counted(shadertune.backends.base.Kernel):
        released = 0

        def run(self, A, B, C=None, *, alpha=1.0, beta=0.0):
            return A @ B

        def time(self, repeats=10, warmup=2):
            return [0.0]

        def release(self):
            Counted.released += 1
    from shadertune.front.kernel_cache import KernelCache
    cache = KernelCache(3)
    kernels = [cache.get(i, Counted) for i in range(5)]
    assert len(cache) == 3 and Counted.released == 2 and cache.get(4, Counted) is kernels[4]
    cache.clear()
    assert len(cache) == 0 and Counted.released == 5


@pytest.mark.parametrize("family", ["fragment", "compute"])
def test_evicted_gl_kernels_free_their_gl_objects(family):
    """An evicted kernel frees what it owns: its textures and buffers go back to the pool,
    its framebuffers and vertex arrays, buffer views and own programs are deleted.  A
    compute program is the context's, shared by every shape that renders the same source
    (compute/driver.py, at most PROGRAMS_KEPT a context), so it outlives the kernel.  The
    default config is the fragment family's on llvmpipe and the compute family's on a GPU:
    both families run here."""
    from shadertune.backends.gl.platform.context import state_of
    api.clear_cache()
    d = api.door("gl")
    if family not in d.backend.space(Problem(3, 5, 4)).parts:
        pytest.skip(f"no {family} family on this device")
    A, B = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    shadertune.matmul(A, B, config={"family": family})
    first = next(iter(d.kernels._kernels.values()))
    owned = list(first._resources)
    for n in range(d.kernels.size):
        shadertune.matmul(np.ones((3, 5 + n), np.float32), np.ones((5 + n, 5), np.float32),
                          config={"family": family})
    assert len(d.kernels) == d.kernels.size and all(k is not first for k in d.kernels._kernels.values())
    assert first._resources == [] and first._textures == {}
    assert all(type(r.mglo).__name__ == "InvalidObject" for r in owned)
    assert not getattr(first, "_views", None) and not getattr(first, "_own_programs", None)
    shared = any(p is first.program for p in state_of(first.ctx).programs.values())
    assert shared == (family == "compute")
    # a program compiled ahead (raw_program.RawProgram) has no mglo
    program = first.program
    released = program.glo == 0 if not hasattr(program, "mglo") else \
        type(program.mglo).__name__ == "InvalidObject"
    assert released != shared


def test_device_index_is_checked_alike_and_reaches_both_backends():
    for backend in ("gl", "cuda"):
        for bad in (-1, 1.5, True, "0"):
            with pytest.raises(ValueError, match="matmul: device_index must be a non-negative int"):
                shadertune.matmul(np.ones((2, 2)), np.ones((2, 2)), backend=backend, device_index=bad)
    assert api.backend("cuda", 1).device_id == 1 and api.backend("cuda").device_id == 0
    assert api.backend("gl", 0).device_index == 0
