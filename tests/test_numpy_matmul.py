"""numpy's own matmul tests (numpy/_core/tests/test_multiarray.py: MatmulCommon, TestMatmul,
numpy 2.4) run on shadertune.matmul, adapted only where docs/semantics.md says so:

- result dtype: float32 (the GL backend computes in float32) except bool @ bool -> bool;
- values: equal within float32 rounding (rel. error <= 1e-5) instead of exactly;
- complex and object dtypes are outside the promise: TypeError (checked here too);
- integer `out` is outside the promise (TypeError): numpy's exact integer result cannot
  come from float32 arithmetic;
- TestMatmulInplace's two large shapes are 10x smaller (the suite's time on llvmpipe).

Test names and cases follow numpy's; every case inside the promise is kept.
"""
import itertools

import numpy as np
import pytest

import shadertune

from numerics import rel_err

TYPES = "?bhilqBHILQefdg"          # numpy's MatmulCommon.types minus complex (FDG) and object (O)


def matmul(a, b, out=None):
    return shadertune.matmul(a, b, out, config="default")


def result_dtype(*dts):
    return np.dtype(bool) if all(np.dtype(d) == bool for d in dts) else np.dtype(np.float32)


def assert_close(res, tgt):
    res = np.asarray(res)
    tgt = np.broadcast_to(tgt, res.shape) if np.ndim(tgt) == 0 else tgt   # as numpy's assert_equal
    assert res.shape == np.shape(tgt)
    if res.dtype == bool:
        assert np.array_equal(res, tgt)
    else:
        assert rel_err(res, np.asarray(tgt, np.float64)) <= 1e-5


class TestMatmulCommon:
    def test_exceptions(self):
        dims = [((1,), (2,)), ((2, 1,), (2,)), ((2,), (1, 2)), ((1, 2), (3, 1)), ((1,), ()),
                ((), (1)), ((1, 1), ()), ((), (1, 1)), ((2, 2, 1), (3, 1, 2))]
        for dt, (dm1, dm2) in itertools.product(TYPES, dims):
            with pytest.raises(ValueError):
                matmul(np.ones(dm1, dtype=dt), np.ones(dm2, dtype=dt))

    def test_outside_the_promise(self):
        for dt in "FDGO":
            with pytest.raises(TypeError):
                matmul(np.ones((2, 2), dtype=dt), np.ones((2, 2), dtype=dt))

    def test_shapes(self):
        dims = [((1, 1), (2, 1, 1)), ((2, 1, 1), (1, 1)), ((2, 1, 1), (2, 1, 1))]
        for dt, (dm1, dm2) in itertools.product(TYPES, dims):
            res = matmul(np.ones(dm1, dtype=dt), np.ones(dm2, dtype=dt))
            assert res.shape == (2, 1, 1)
        for dt in TYPES:                       # vector vector returns scalars
            c = matmul(np.ones((2,), dtype=dt), np.ones((2,), dtype=dt))
            assert np.array(c).shape == ()

    def test_result_types(self):
        mat, vec = np.ones((1, 1)), np.ones((1,))
        for dt in TYPES:
            m, v = mat.astype(dt), vec.astype(dt)
            for arg in [(m, v), (v, m), (m, m)]:
                assert matmul(*arg).dtype == result_dtype(dt)
            assert type(matmul(v, v)) is result_dtype(dt).type

    def test_scalar_output(self):
        vec1, vec2, tgt = np.array([2]), np.array([3, 4]).reshape(1, -1), np.array([6, 8])
        for dt in TYPES[1:]:
            v1, v2 = vec1.astype(dt), vec2.astype(dt)
            assert_close(matmul(v1, v2), tgt)
            assert_close(matmul(v2.T, v1), tgt)
        vec = np.array([True, True], dtype='?').reshape(1, -1)
        assert_close(matmul(vec[:, 0], vec), True)

    def test_vector_vector_values(self):
        vec1, vec2 = np.array([1, 2]), np.array([3, 4]).reshape(-1, 1)
        tgt1, tgt2 = np.array([11]), np.array([[3, 6], [4, 8]])
        for dt in TYPES[1:]:
            v1, v2 = vec1.astype(dt), vec2.astype(dt)
            assert_close(matmul(v1, v2), tgt1)
            assert_close(matmul(v2, v1.reshape(1, -1)), tgt2)
        vec = np.array([True, True], dtype='?')
        assert_close(matmul(vec, vec), True)

    @pytest.mark.parametrize("vector_first", [True, False], ids=["vector_matrix", "matrix_vector"])
    def test_vector_matrix_values(self, vector_first):
        """numpy's test_vector_matrix_values and test_matrix_vector_values in one."""
        mm = (lambda v, m: matmul(v, m)) if vector_first else (lambda v, m: matmul(m, v))
        vec, mat1 = np.array([1, 2]), np.array([[1, 2], [3, 4]])
        mat2 = np.stack([mat1] * 2, axis=0)
        tgt1 = np.array([7, 10]) if vector_first else np.array([5, 11])
        tgt2 = np.stack([tgt1] * 2, axis=0)
        for dt in TYPES[1:]:
            v, m1, m2 = vec.astype(dt), mat1.astype(dt), mat2.astype(dt)
            assert_close(mm(v, m1), tgt1)
            assert_close(mm(v, m2), tgt2)
        vec = np.array([True, False])
        mat1 = np.array([[True, False], [False, True]])
        mat2 = np.stack([mat1] * 2, axis=0)
        tgt1 = np.array([True, False])
        assert_close(mm(vec, mat1), tgt1)
        assert_close(mm(vec, mat2), np.stack([tgt1] * 2, axis=0))

    def test_matrix_matrix_values(self):
        mat1, mat2 = np.array([[1, 2], [3, 4]]), np.array([[1, 0], [1, 1]])
        mat12, mat21 = np.stack([mat1, mat2], axis=0), np.stack([mat2, mat1], axis=0)
        tgt11, tgt12, tgt21 = np.array([[7, 10], [15, 22]]), np.array([[3, 2], [7, 4]]), np.array([[1, 2], [4, 6]])
        tgt12_21 = np.stack([tgt12, tgt21], axis=0)
        tgt11_12 = np.stack((tgt11, tgt12), axis=0)
        tgt11_21 = np.stack((tgt11, tgt21), axis=0)
        for dt in TYPES[1:]:
            m1, m2, m12, m21 = (x.astype(dt) for x in (mat1, mat2, mat12, mat21))
            assert_close(matmul(m1, m2), tgt12)
            assert_close(matmul(m2, m1), tgt21)
            assert_close(matmul(m12, m1), tgt11_21)
            assert_close(matmul(m1, m12), tgt11_12)
            assert_close(matmul(m12, m21), tgt12_21)
        m1 = np.array([[1, 1], [0, 0]], dtype=np.bool)
        m2 = np.array([[1, 0], [1, 1]], dtype=np.bool)
        m12, m21 = np.stack([m1, m2], axis=0), np.stack([m2, m1], axis=0)
        tgt11, tgt12, tgt21 = m1, m1, np.array([[1, 1], [1, 1]], dtype=np.bool)
        assert_close(matmul(m1, m2), tgt12)
        assert_close(matmul(m2, m1), tgt21)
        assert_close(matmul(m12, m1), np.stack((tgt11, tgt21), axis=0))
        assert_close(matmul(m1, m12), np.stack((tgt11, tgt12), axis=0))
        assert_close(matmul(m12, m21), np.stack([tgt12, tgt21], axis=0))


class TestMatmul:
    def test_out_arg(self):
        a = np.ones((5, 2), dtype=float)
        b = np.array([[1, 3], [5, 7]], dtype=float)
        tgt = np.dot(a, b)
        out = np.zeros((5, 2), dtype=float)             # positional
        matmul(a, b, out)
        assert_close(out, tgt)
        out = np.zeros((5, 2), dtype=float)             # keyword
        shadertune.matmul(a, b, out=out, config="default")
        assert_close(out, tgt)
        with pytest.raises(TypeError, match="Cannot cast ufunc .* output"):
            matmul(a, b, np.zeros((5, 2), dtype=np.int32))
        out = np.zeros((5, 2), dtype=np.complex128)     # upcast to complex
        c = matmul(a, b, out)
        assert c is out
        assert_close(c.real, tgt) and not c.imag.any()

    def test_empty_out(self):
        arr = np.ones((0, 1, 1))
        out = np.ones((1, 1, 1))
        assert matmul(arr, arr).shape == (0, 1, 1)
        with pytest.raises(ValueError, match=r"non-broadcastable"):
            matmul(arr, arr, out)

    def test_out_contiguous(self):
        a = np.ones((5, 2), dtype=float)
        b = np.array([[1, 3], [5, 7]], dtype=float)
        v = np.array([1, 3], dtype=float)
        tgt, tgt_mv = np.dot(a, b), np.dot(a, v)
        out = np.ones((5, 2, 2), dtype=float)          # out non-contiguous
        c = matmul(a, b, out[..., 0])
        assert c.base is out
        assert_close(c, tgt)
        assert_close(matmul(a, v, out[:, 0, 0]), tgt_mv)
        assert_close(matmul(v, a.T, out[:, 0, 0]), tgt_mv)
        out = np.ones((10, 2), dtype=float)            # contiguous in only the last dim
        assert_close(matmul(a, b, out[::2, :]), tgt)
        out = np.ones((5, 2), dtype=float)             # transposes of out, args
        matmul(b.T, a.T, out.T)
        assert_close(out, tgt)

    m1 = np.arange(15.).reshape(5, 3)
    m2 = np.arange(21.).reshape(3, 7)
    m3 = np.arange(30.).reshape(5, 6)[:, ::2]  # non-contiguous
    vc = np.arange(10.)
    vr = np.arange(6.)
    m0 = np.zeros((3, 0))

    @pytest.mark.parametrize('args', (
        (m1, m2), (m2.T, m1.T), (m2.T.copy(), m1.T), (m2.T, m1.T.copy()),
        (m1, m1.T), (m1.T, m1), (m1, m3.T), (m3, m1.T), (m3, m3.T), (m3.T, m3),
        (m3, m2), (m2.T, m3.T), (m2.T.copy(), m3.T),
        (m1, vr[:3]), (vc[:5], m1), (m1.T, vc[:5]), (vr[:3], m1.T),
        (m1, vr[::2]), (vc[::2], m1), (m1.T, vc[::2]), (vr[::2], m1.T),
        (m3, vr[:3]), (vc[:5], m3), (m3.T, vc[:5]), (vr[:3], m3.T),
        (m3, vr[::2]), (vc[::2], m3), (m3.T, vc[::2]), (vr[::2], m3.T),
        (m0, m0.T), (m0.T, m0), (m1, m0), (m0.T, m1.T),
    ))
    def test_dot_equivalent(self, args):
        r1 = matmul(*args)
        assert_close(r1, np.dot(*args))
        assert_close(matmul(args[0].copy(), args[1].copy()), r1)

    @pytest.mark.parametrize('dtype', (np.float32, np.float64))
    def test_dot_equivalent_matrix_matrix_blastypes(self, dtype):
        modes = list(itertools.product(['C', 'F'], [True, False]))

        def apply_mode(m, mode):
            order, is_contiguous = mode
            if is_contiguous:
                return m.copy() if order == 'C' else m.T.copy().T
            retval = np.zeros((m.shape[0] * 2, m.shape[1] * 2), dtype=m.dtype, order=order)[::2, ::2]
            retval[...] = m
            return retval

        m1, m2 = self.m1.astype(dtype), self.m2.astype(dtype)
        dot_res = np.dot(m1, m2)
        mo = np.zeros_like(dot_res)
        for mode in itertools.product(*[modes] * 3):
            m1_, m2_, mo_ = [apply_mode(*x) for x in zip([m1, m2, mo], mode)]
            assert_close(matmul(m1_, m2_, mo_), dot_res)

    def test_matmul_object(self):
        with pytest.raises(TypeError):
            matmul(np.empty((3, 0), dtype=object), np.empty((0, 3), dtype=object))

    def test_matmul_bool(self):
        a = np.array([[1, 0], [1, 1]], dtype=bool)
        assert np.max(a.view(np.uint8)) == 1
        b = matmul(a, a)
        assert np.max(b.view(np.uint8)) == 1          # bool output is always 0 or 1
        rg = np.random.default_rng(np.random.PCG64(43))
        d = rg.integers(2, size=4 * 5, dtype=np.int8)
        d = d.reshape(4, 5) > 0
        assert np.array_equal(matmul(d, d.reshape(5, 4)), np.dot(d, d.reshape(5, 4)))
        c = matmul(np.zeros((2, 0), dtype=bool), np.zeros(0, dtype=bool))
        assert not np.any(c)


class TestMatmulInplace:
    """numpy's `a @= b` as matmul(a, b, out=a), for the floating dtypes of a (integer out
    is outside the promise).  The operator also insists that the result has a's shape;
    matmul's out broadcasts instead, so test_shapes compares with np.matmul(a, b, out=a)."""
    DTYPES = {f"{i}-{j}": (np.dtype(i), np.dtype(j)) for i in "efdg" for j in TYPES
              if np.can_cast(j, i)}

    @pytest.mark.parametrize("dtype1,dtype2", DTYPES.values(), ids=DTYPES)
    def test_basic(self, dtype1, dtype2):
        a = np.arange(10).reshape(5, 2).astype(dtype1)
        b = np.ones((2, 2), dtype=dtype2)
        ref = a @ b
        assert matmul(a, b, a) is a
        assert a.dtype == dtype1 and a.shape == (5, 2)
        assert_close(a, ref)

    SHAPES = {
        "2d_large": ((10**4, 10), (10, 10)),
        "3d_large": ((10**3, 10, 10), (1, 10, 10)),
        "1d": ((3,), (3,)),
        "2d_1d": ((3, 3), (3,)),
        "1d_2d": ((3,), (3, 3)),
        "2d_broadcast": ((3, 3), (3, 1)),
        "2d_broadcast_reverse": ((1, 3), (3, 3)),
        "3d_broadcast1": ((3, 3, 3), (1, 3, 1)),
        "3d_broadcast2": ((3, 3, 3), (1, 3, 3)),
        "3d_broadcast3": ((3, 3, 3), (3, 3, 1)),
        "3d_broadcast_reverse1": ((1, 3, 3), (3, 3, 3)),
        "3d_broadcast_reverse2": ((3, 1, 3), (3, 3, 3)),
        "3d_broadcast_reverse3": ((1, 1, 3), (3, 3, 3)),
    }

    @pytest.mark.parametrize("a_shape,b_shape", SHAPES.values(), ids=SHAPES)
    def test_shapes(self, a_shape, b_shape):
        a = np.arange(np.prod(a_shape)).reshape(a_shape).astype(np.float64)
        b = np.arange(np.prod(b_shape)).reshape(b_shape)
        ref = a.copy()
        try:
            np.matmul(a.copy(), b, out=ref)
        except ValueError:
            with pytest.raises(ValueError):
                matmul(a, b, a)
            return
        assert matmul(a, b, a) is a
        assert_close(a, ref)
