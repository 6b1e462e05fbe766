"""GL arrays (shadertune.gl): matrices that stay in a GL buffer between products.

Every result is checked against numpy in float64; every family of GL kernels runs on
views (offsets and leading dimensions), ragged shapes, transposed views, out= views with
alpha/beta, and out sharing elements with an input."""
import numpy as np
import pytest

import shadertune
import shadertune.gl as gl
from shadertune.backends.gl.platform import regions
from shadertune.errors import ContextError, PrecisionWarning
from shadertune.core.problem import Problem

pytestmark = pytest.mark.usefixtures("gl")

# One config per kernel path, explicit (no store is read): the image path (the default
# of a product large enough for a block), Jiang's render-target kernel, a multi-target
# 2x2-channel one, ARB assembly, the compute family from storage buffers, and from
# buffer textures.
FRAGMENT = {
    "image": {"out": "image", "a_src": "texture", "b_src": "ssbo", "block_h": 4, "block_w": 8,
              "mrt_h": 1, "mrt_w": 1, "glsl": "450", "np": 8},
    "jiang": "jiang",
    "mrt2x2": {"out": "mrt", "mc": "2x2", "mrt_h": 2, "mrt_w": 1},
    "arbfp": {"lang": "arbfp"},
}
COMPUTE = {
    "compute": {"family": "compute"},
    "compute_tex": {"family": "compute", "a_src": "texture", "b_src": "texture"},
}
CONFIGS = {**FRAGMENT, **COMPUTE}
SHAPES = [(16, 12, 9), (33, 17, 20)]       # ragged: no side a multiple of a block


def rel(got, want):
    want = np.asarray(want, np.float64)
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / max(np.linalg.norm(want), 1e-30))


def uniform(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_every_family_on_views_transposes_out_views_and_aliases(name, M, N, K, rng, request):
    cfg = CONFIGS[name]
    backend = request.getfixturevalue("gl")          # the module's name `gl` is shadertune.gl
    if isinstance(cfg, dict) and cfg.get("lang", "glsl") != "glsl" and cfg["lang"] not in backend.device().limits.get("asm_limits", {}):
        pytest.skip(f"no {cfg['lang']} shades in this context ({backend.device().driver})")
    P, Q, R = uniform(rng, M + 3, K + 5), uniform(rng, K + 2, N + 6), uniform(rng, M + 4, N + 4)
    gP, gQ = gl.asarray(P), gl.asarray(Q)
    # views of larger matrices (offset, leading dimension), a GL array out
    got = shadertune.matmul(gP[1:M + 1, 2:K + 2], gQ[1:K + 1, 3:N + 3], config=cfg)
    assert isinstance(got, gl.GLArray) and got.shape == (M, N)
    assert rel(got.numpy(), P[1:M + 1, 2:K + 2].astype(np.float64) @ Q[1:K + 1, 3:N + 3]) < 1e-5
    # transposed views: op(A) stored K x M, op(B) stored N x K
    PT, QT = gl.asarray(np.ascontiguousarray(P.T)), gl.asarray(np.ascontiguousarray(Q.T))
    got = shadertune.matmul(PT[2:K + 2, 1:M + 1].T, QT[3:N + 3, 1:K + 1].T, config=cfg).numpy()
    assert rel(got, P[1:M + 1, 2:K + 2].astype(np.float64) @ Q[1:K + 1, 3:N + 3]) < 1e-5
    # C -= A @ B on a view of a larger matrix: one call, nothing around it touched
    gR = gl.asarray(R)
    r = shadertune.matmul(gP[:M, :K], gQ[:K, :N], out=gR[2:M + 2, 1:N + 1], alpha=-1.0, beta=1.0, config=cfg)
    want = R.astype(np.float64)
    want[2:M + 2, 1:N + 1] -= P[:M, :K].astype(np.float64) @ Q[:K, :N]
    assert isinstance(r, gl.GLArray) and r.shape == (M, N)
    assert rel(gR.numpy(), want) < 1e-5
    assert np.array_equal(gR.numpy()[:2], R[:2]) and np.array_equal(gR.numpy()[:, 0], R[:, 0])
    # out is an input (numpy's a @= b): made apart, then copied in
    S = uniform(rng, M, M)
    gS = gl.asarray(S)
    shadertune.matmul(gS, gS, out=gS, config=cfg)
    assert rel(gS.numpy(), S.astype(np.float64) @ S) < 1e-5


def test_compute_reads_aligned_views_where_they_lie_and_copies_the_rest(gl, rng):
    """The compute family binds a view's own buffer (offset and leading dimension in
    uniforms) where they are whole vectors of its loads; a view off them is copied on
    the GPU into the kernel's buffer first, and C likewise."""
    p = Problem(32, 32, 64)
    from shadertune.front.requests import resolve
    config = resolve(gl, p, {"family": "compute", "vec": 4, "bk": 16})
    k = gl.build(p, config)
    try:
        P = uniform(rng, 80, 80)
        big = gl.arrays
        gP = gl_asarray_in(big, P)
        out = gl_asarray_in(big, np.zeros((40, 40), np.float32))
        for off, direct in ((4, True), (1, False)):
            a = gP[off:off + 32, off:off + 64].region()
            b = gP[off:off + 64, :32].region()
            c = out[off:off + 32, off:off + 32].region()
            k.run_regions(a, b, c, alpha=1.0, beta=0.0)
            assert (k._places["A"][0] is gP.region().buffer) is direct
            assert (k._places["C"][0] is out.region().buffer) is direct
            got = out.numpy()[off:off + 32, off:off + 32]
            assert rel(got, P[off:off + 32, off:off + 64].astype(np.float64) @ P[off:off + 64, :32]) < 1e-5
        # a host run afterwards uses the kernel's own buffers again
        A, B = uniform(rng, 32, 64), uniform(rng, 64, 32)
        assert rel(k.run(A, B), A.astype(np.float64) @ B) < 1e-5
    finally:
        k.release()


def gl_asarray_in(home, x):
    from shadertune.backends.gl.platform.arrays import asarray
    return asarray(home, x)


def test_mixed_kinds_follow_the_inputs(rng, tmp_path):
    A, B = uniform(rng, 6, 5), uniform(rng, 5, 4)
    gA, gB = gl.asarray(A), gl.asarray(B)
    want = A.astype(np.float64) @ B
    cfg = "default"
    # a GL array with a numpy array: the numpy one is uploaded, the result a GL array
    for r in (shadertune.matmul(gA, B, config=cfg), shadertune.matmul(A, gB, config=cfg)):
        assert isinstance(r, gl.GLArray) and rel(r.numpy(), want) < 1e-6
    # a numpy out takes the result (its dtype, numpy's casting); beta reads it
    out = np.ones((6, 4))
    r = shadertune.matmul(gA, gB, out=out, beta=2.0, config=cfg)
    assert r is out and out.dtype == np.float64 and rel(out, want + 2.0) < 1e-6
    # a GL out with numpy operands: written where it lies, returned
    gO = gl.zeros((6, 4))
    assert shadertune.matmul(A, B, out=gO, config=cfg) is gO and rel(gO.numpy(), want) < 1e-6
    # numpy in and out: a numpy array, as before
    assert type(shadertune.matmul(A, B, config=cfg)) is np.ndarray
    # explain names the problem the call runs: a transposed view is read in place
    p = shadertune.explain(gA, gA.T, db=str(tmp_path / "none.sqlite")).problem
    assert (p.M, p.N, p.K, p.trans_a, p.trans_b) == (6, 6, 5, False, True)


def test_vectors_empty_products_and_column_steps(rng):
    A, v, w = uniform(rng, 6, 5), uniform(rng, 5), uniform(rng, 6)
    gA, gv, gw = gl.asarray(A), gl.asarray(v), gl.asarray(w)
    cfg = {"family": "compute"}
    r = shadertune.matmul(gA, gv, config=cfg)
    assert r.shape == (6,) and rel(r.numpy(), A.astype(np.float64) @ v) < 1e-6
    r = shadertune.matmul(gw, gA, config=cfg)
    assert r.shape == (5,) and rel(r.numpy(), w.astype(np.float64) @ A) < 1e-6
    r = shadertune.matmul(gv, gv, config=cfg)          # 1-D @ 1-D: a 0-d GL array
    assert r.shape == () and abs(float(r) - float(v.astype(np.float64) @ v)) < 1e-5
    r = shadertune.matmul(gA[:, 1], gA[:, 2], config=cfg)   # strided vectors (columns)
    assert abs(float(r) - float(A[:, 1].astype(np.float64) @ A[:, 2])) < 1e-5
    # K = 0: zeros, or beta * out; M = 0: an empty result
    assert np.array_equal(shadertune.matmul(gA[:, :0], gl.zeros((0, 3)), config=cfg).numpy(), np.zeros((6, 3)))
    o = gl.asarray(np.full((6, 3), 2.0, np.float32))
    shadertune.matmul(gA[:, :0], gl.zeros((0, 3)), out=o, beta=1.5, config=cfg)
    assert np.array_equal(o.numpy(), np.full((6, 3), 3.0))
    assert shadertune.matmul(gA[:0], gl.zeros((5, 3)), config=cfg).shape == (0, 3)
    # a view with a column step is neither row- nor column-major: copied on the GPU first
    S = uniform(rng, 6, 10)
    r = shadertune.matmul(gl.asarray(S)[:, ::2], gA.T, config=cfg)
    assert rel(r.numpy(), S[:, ::2].astype(np.float64) @ A.T) < 1e-6


def test_products_past_the_limits_are_tiled_as_views(rng, monkeypatch):
    """A product larger than one kernel holds runs in tiles (views of the operands; K
    tiles accumulate): here with the limit made 8 so that small products tile."""
    from shadertune.backends.gl import array_calls
    monkeypatch.setattr(array_calls, "tile_limit", lambda limits: 8)
    A, B, C = uniform(rng, 19, 13), uniform(rng, 13, 11), uniform(rng, 19, 11)
    gC = gl.asarray(C)
    for cfg in ({"family": "compute"}, "jiang"):
        gC[...] = C
        shadertune.matmul(gl.asarray(A), gl.asarray(B), out=gC, alpha=2.0, beta=-0.5, config=cfg)
        assert rel(gC.numpy(), 2.0 * (A.astype(np.float64) @ B) - 0.5 * C) < 1e-5


def test_views_share_the_buffer_and_assignment_copies_on_the_gpu(rng):
    S = uniform(rng, 6, 10)
    g = gl.asarray(S)
    v = g[1:5, 2:9:3]
    assert v.shape == (4, 3) and v.strides == (40, 12)
    assert np.array_equal(v.numpy(), S[1:5, 2:9:3])
    assert np.array_equal(g.T[3:5].numpy(), S.T[3:5]) and np.array_equal(g[-1].numpy(), S[-1])
    assert np.array_equal(g[..., 2].numpy(), S[..., 2]) and g[2, 3].shape == ()
    assert float(g[2, 3]) == S[2, 3]
    g[1:3, 2:5] = 7.0
    S[1:3, 2:5] = 7.0
    g[:, 0] = np.arange(6)
    S[:, 0] = np.arange(6)
    g[2:4] = g[0:2]                       # GL array to GL array, on the GPU
    S[2:4] = S[0:2].copy()
    g[1:5, 1:3] = g[0:4, 2:4]             # overlapping: through a temporary
    S[1:5, 1:3] = S[0:4, 2:4].copy()
    g[5] = g[0, :1]                       # numpy's broadcasting
    S[5] = S[0, :1]
    assert np.array_equal(g.numpy(), S)
    c = g.copy()
    g[...] = 0.0
    assert np.array_equal(c.numpy(), S) and not g.numpy().any()
    # fetching: numpy(), np.asarray, copy_to_host into any float array
    assert np.array_equal(np.asarray(c), S) and np.asarray(c, np.float64).dtype == np.float64
    out = np.empty((6, 10), np.float64)
    assert c.copy_to_host(out=out) is out and np.array_equal(out, S)
    F = np.empty((10, 6), np.float32).T           # not C-contiguous
    assert np.array_equal(c.copy_to_host(out=F), S)


def test_empty_zeros_and_asarray(rng):
    z = gl.zeros((3, 4))
    assert z.shape == (3, 4) and z.dtype == np.float32 and not z.numpy().any()
    assert gl.empty(5).shape == (5,) and gl.zeros(()).shape == ()
    x = gl.asarray([[1, 2], [3, 4]])                 # ints: float32 values
    assert np.array_equal(x.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    assert gl.asarray(x) is x                        # a GL array of this context: itself
    with pytest.warns(PrecisionWarning, match="float32"):
        gl.asarray(np.ones(3))
    gl.asarray(np.ones(3), dtype="float32")          # said so: no warning
    assert gl.asarray(np.zeros((0, 3), np.float32)).shape == (0, 3)


def test_bad_input_gets_numpy_style_errors(rng):
    A = gl.asarray(uniform(rng, 3, 4))
    with pytest.raises(ValueError, match=r"mismatch in its core dimension.*A\(3, 4\) and B\(3, 4\)"):
        shadertune.matmul(A, A)
    with pytest.raises(ValueError, match="out has shape"):
        shadertune.matmul(A, A.T, out=gl.empty((4, 4)))
    with pytest.raises(TypeError, match="float32"):
        gl.asarray(np.ones(3), dtype=np.float64)
    with pytest.raises(TypeError, match="float32"):
        gl.empty((2, 2), dtype="int32")
    with pytest.raises(TypeError, match="complex"):
        gl.asarray(np.ones(3, complex))
    with pytest.raises(TypeError, match="complex"):
        shadertune.matmul(A, np.ones((4, 2), complex))
    with pytest.raises(TypeError, match="real numbers"):
        gl.asarray(np.array(["a"]))
    with pytest.raises(ValueError, match="0, 1 or 2 dimensions"):
        gl.zeros((2, 2, 2))
    with pytest.raises(ValueError, match="negative dimensions"):
        gl.empty((-1, 2))
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 4"):
        A[0, 4]
    with pytest.raises(IndexError, match="too many indices"):
        A[0, 0, 0]
    with pytest.raises(IndexError, match="positive steps"):
        A[::-1]
    with pytest.raises(IndexError, match="basic indexing"):
        A[[0, 1]]
    with pytest.raises(ValueError, match="could not broadcast"):
        A[:2] = np.ones((3, 4))
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        np.asarray(A, copy=False)
    with pytest.raises(ValueError, match="stacked"):
        shadertune.matmul(A, np.ones((2, 4, 3), np.float32))
    with pytest.raises(TypeError, match="cuda backend does not read it"):
        shadertune.matmul(A, A.T, backend="cuda")
    with pytest.raises(TypeError, match="Cannot cast"):
        A.copy_to_host(out=np.empty((3, 4), np.int32))
    with pytest.raises(TypeError, match="ufunc|unsupported operand"):
        np.add(A, 1)
    # a released array (and its views): ValueError wherever it is used
    B = gl.asarray(uniform(rng, 4, 2))
    view = B[1:]
    B.release()
    assert B.released and view.released and "released" in repr(B)
    with pytest.raises(ValueError, match="B is a GL array that was released"):
        shadertune.matmul(A, B)
    with pytest.raises(ValueError, match="released"):
        view.numpy()
    with pytest.raises(ValueError, match="released"):
        view[0] = 1.0
    B.release()                                     # twice: nothing more happens
    assert isinstance(ContextError("x"), RuntimeError)


def test_regions_overlap_exactly_for_views_of_one_matrix(gl):
    buf = object()
    R = regions.Region
    a = R(buf, 0, 4, 4, 10, 1)                      # rows 0-3, columns 0-3 of a 10-wide matrix
    assert not a.overlaps(R(buf, 4, 4, 4, 10, 1))   # columns 4-7: interleaved spans, no element
    assert a.overlaps(R(buf, 33, 2, 2, 10, 1))      # rows 3-4, columns 3-4
    assert not a.overlaps(R(buf, 40, 2, 2, 10, 1))
    assert a.overlaps(R(buf, 3, 4, 4, 1, 10))       # a transposed view over column 3
    assert not a.overlaps(R(object(), 0, 4, 4, 10, 1))


def _python_blocks(path):
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parent.parent / path).read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_and_docs_examples_run(tmp_path, monkeypatch):
    """README's GL-array block (a matrix power, a view updated) and docs/gl.md's chained
    products (Newton-Schulz: the inverse of M) run as written and compute what they say."""
    monkeypatch.setenv("SHADERTUNE_DB", str(tmp_path / "tune.sqlite"))     # never the user's store
    (block,) = [b for b in _python_blocks("README.md") if "gl.asarray" in b]
    s: dict = {}
    exec(compile(block, "README.md", "exec"), s)
    A = s["A"].numpy().astype(np.float64)
    P8 = np.linalg.matrix_power(A, 8)
    assert rel(s["P"].numpy(), P8) < 1e-5 and rel(s["Q"].numpy()[64:], -A[64:, :128] @ P8[:128]) < 1e-5
    assert not s["Q"].numpy()[:64].any()
    (block,) = [b for b in _python_blocks("docs/gl.md") if "Newton-Schulz" in b]
    s = {}
    exec(compile(block, "docs/gl.md", "exec"), s)
    assert isinstance(s["X"], gl.GLArray) and s["err"] < 1e-4


@pytest.mark.parametrize("kred", [0, 1])
def test_split_k_into_a_view_with_beta_reduce_or_atomics(kred):
    """Atomic splits (kred = 1) add into the kernel's own C, then fill the view; a reduce
    dispatch (kred = 0) writes the view where it lies: both give beta * C + alpha * A B there
    and leave the rest of the array alone."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 70)).astype(np.float32)
    B = rng.standard_normal((70, 50)).astype(np.float32)
    C = rng.standard_normal((60, 80)).astype(np.float32)
    gc = gl.asarray(C)
    shadertune.matmul(gl.asarray(A), gl.asarray(B), out=gc[10:50, 5:55], alpha=-1.0, beta=2.0,
                      config={"family": "compute", "ks": 2, "kred": kred})
    ref = C.astype(np.float64)
    ref[10:50, 5:55] = 2 * ref[10:50, 5:55] - A.astype(np.float64) @ B
    np.testing.assert_allclose(gc.numpy(), ref, rtol=0, atol=1e-4)
