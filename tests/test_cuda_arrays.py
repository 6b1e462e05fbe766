"""CUDA front door without a GPU: what kind each operand is (device_arrays),
that the front door's checks leave device arrays where they are, which device
views the CUDA backend uses in place (the trans flags, batch strides) and which
it copies, and the errors, on fake objects exposing __cuda_array_interface__
and DLPack (their pointers are never dereferenced here)."""
import numpy as np
import pytest

from shadertune.call import device_arrays
from shadertune.backends.cuda import arrays, call
from shadertune.call.inputs import check_call
from shadertune.core.problem import Problem


def plan(A, B, out=None, **kw):
    """The front door's checks, then the CUDA backend's plan of the call."""
    return call.prepare(check_call(A, B, out, dtypes=("float32", "float64"), **kw))


class FakeCAI:
    """A device array as a foreign library exposes it: CAI only. `base` is
    host memory standing in for the device buffer (only its address and
    layout are read)."""

    def __init__(self, base: np.ndarray, *, offset=0, version=3, stream=None, readonly=False, contiguous_none=False):
        self.base = base
        it = base.dtype.itemsize
        self.__cuda_array_interface__ = {
            "shape": base.shape, "typestr": base.dtype.str,
            "data": (base.ctypes.data + offset * it, readonly), "version": version,
            "strides": None if contiguous_none else base.strides,
        }
        if version >= 3:
            self.__cuda_array_interface__["stream"] = stream


class FakeDLPack:
    """A CUDA DLPack producer without CAI (a JAX-like array)."""

    def __init__(self, shape, dtype, device=0):
        self.shape, self.dtype, self._dev = shape, dtype, device

    def __dlpack__(self, stream=None):
        raise AssertionError("consumed without a GPU")

    def __dlpack_device__(self):
        return (device_arrays.DL_CUDA, self._dev)


def aligned(shape, dtype=np.float32, order="C"):
    """A host buffer whose address is 256-byte aligned (like a CUDA allocation)."""
    n = int(np.prod(shape))
    raw = np.zeros(n * np.dtype(dtype).itemsize + 256, np.uint8)
    off = (-raw.ctypes.data) % 256
    a = raw[off:off + n * np.dtype(dtype).itemsize].view(dtype)
    return a.reshape(shape, order=order)


def test_describe_kinds():
    describe = device_arrays.describe
    h = describe(np.ones((3, 4), np.float32))
    assert h.kind == "numpy" and h.strides == (4, 1) and not h.on_device
    assert device_arrays.describe_device(np.ones(3)) is None and describe([[1.0, 2.0]]).kind == "numpy"
    c = describe(FakeCAI(aligned((3, 4)), stream=7))
    assert c.kind == "cai" and c.on_device and c.strides == (4, 1) and c.stream == 7 and c.dtype == np.float32
    assert describe(FakeCAI(aligned((3, 4)), contiguous_none=True)).strides == (4, 1)
    assert describe(FakeCAI(aligned((3, 4)), version=2)).stream is None   # CAI v2: no stream key
    f = describe(FakeCAI(aligned((3, 4), order="F")))
    assert f.strides == (1, 3)
    d = describe(FakeDLPack((3, 4), np.float64, device=1))
    assert d.kind == "dlpack" and d.device == 1 and d.dtype == np.float64 and d.strides is None

    class HostDL:    # host memory through DLPack: read as numpy
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    assert describe(HostDL(np.arange(6.0).reshape(2, 3))).kind == "numpy"


def test_the_front_door_leaves_device_arrays_in_place():
    """inputs.check_call reads shapes and dtypes of CAI and DLPack objects
    without converting them (a DLPack object without a shape cannot be checked)."""
    A, B = FakeCAI(aligned((3, 4))), FakeDLPack((4, 5), np.float64)
    c = check_call(A, B, dtypes=("float32", "float64"))
    assert c.a.value is A and c.b.value is B and c.a.device and c.b.device
    assert c.a.info.kind == "cai" and c.b.info.kind == "dlpack" and (c.M, c.N, c.K) == (3, 5, 4)
    assert c.dtype == "float64"
    out = FakeCAI(aligned((3, 5), np.float64))
    assert check_call(A, B, out, dtypes=("float32", "float64")).out is out
    with pytest.raises(ValueError, match="output array is read-only"):
        check_call(A, B, FakeCAI(aligned((3, 5)), readonly=True))
    with pytest.raises(TypeError, match="states no shape"):
        check_call(A, FakeDLPack(None, np.float32))
    with pytest.raises(ValueError, match="mismatch in its core dimension 0"):
        check_call(A, FakeDLPack((5, 5), np.float32))


def test_the_gl_path_says_why_it_cannot_read_a_foreign_device_array():
    from shadertune.call.host import to_host
    with pytest.raises(TypeError, match="FakeCAI lives on a GPU.*backend='cuda'"):
        to_host(FakeCAI(aligned((3, 4))))


@pytest.mark.parametrize("rows, cols, sr, sc, layout", [
    (5, 7, 7, 1, "N"), (5, 7, 1, 5, "T"), (5, 7, 14, 1, None), (5, 7, 1, 10, None),
    (1, 7, 99, 1, "N"), (5, 1, 1, 99, "N"), (5, 1, 3, 99, None), (1, 1, 9, 9, "N"),
])
def test_matrix_layout(rows, cols, sr, sc, layout):
    assert arrays.matrix_layout(rows, cols, sr, sc) == layout


@pytest.mark.parametrize("batch, shape, strides, expect", [
    ((4,), (4,), (35,), 35), ((4,), (1,), (35,), 0), ((4,), (), (), 0),
    ((2, 3), (2, 3), (105, 35), 35), ((2, 3), (1, 3), (0, 35), None), ((2, 3), (2, 1), (35, 0), None),
    ((2, 3), (3,), (35,), None), ((2, 1, 3), (2, 1, 3), (105, 7, 35), 35), ((2, 3), (2, 3), (35, 105), None),
])
def test_batch_stride(batch, shape, strides, expect):
    assert arrays.batch_stride(batch, shape, strides) == expect


def test_views_in_place_by_trans_flags():
    A = aligned((64, 48))            # M x K row-major
    Bt = aligned((80, 48))           # N x K row-major: B = Bt.T is column-major
    c = plan(FakeCAI(A), FakeCAI(Bt.T))
    assert c.problem == Problem(64, 80, 48, "float32", False, True)
    assert not c.layout.a.copy and not c.layout.b.copy and c.layout.kind == "cupy"
    At = aligned((48, 64))           # K x M row-major: A = At.T is column-major
    c = plan(FakeCAI(At.T), FakeCAI(aligned((48, 80))))
    assert c.problem == Problem(64, 80, 48, "float32", True, False) and not c.layout.a.copy


def test_strided_misaligned_and_other_dtype_views_are_copied():
    S = aligned((64, 96))
    c = plan(FakeCAI(S[:, ::2]), FakeCAI(aligned((48, 16)))).layout   # every other column
    assert c.a.copy and not c.b.copy and not c.problem.trans_a
    c = plan(FakeCAI(S[1:, :48]), FakeCAI(aligned((48, 16)))).layout  # rows padded to 96: not N, not T
    assert c.a.copy
    c = plan(FakeCAI(aligned((64, 48)), offset=1), FakeCAI(aligned((48, 16)))).layout   # 4-byte offset
    assert c.a.copy
    c = plan(FakeCAI(aligned((64, 48), np.float64)), FakeCAI(aligned((48, 16)))).layout
    assert c.dtype == np.float64 and not c.a.copy and c.b.copy      # float32 B cast once
    c = plan(np.ones((64, 48)), FakeCAI(aligned((48, 16), np.float64))).layout
    assert c.a.copy and c.kind == "cupy" and c.problem.dtype == "float64"   # host A uploaded
    c = plan(FakeCAI(aligned((64, 48), np.int32)), FakeCAI(aligned((48, 16)))).layout
    assert c.a.copy and c.dtype == np.float64       # device integers: cast once (numpy's float64)


def test_a_layout_is_planned_once_and_each_call_checks_its_own_overlap():
    A, B = aligned((32, 16)), aligned((16, 16))
    first = plan(FakeCAI(A), FakeCAI(B))
    again = plan(FakeCAI(aligned((32, 16))), FakeCAI(aligned((16, 16))))
    assert again.layout is first.layout and again.a.ptr != first.a.ptr
    assert plan(FakeCAI(A, offset=1), FakeCAI(B)).layout is not first.layout   # alignment is layout
    out = FakeCAI(aligned((32, 16)))
    assert plan(FakeCAI(A), FakeCAI(B), out).out_in_place
    sq = aligned((16, 16))
    first = plan(FakeCAI(aligned((16, 16))), FakeCAI(sq), FakeCAI(aligned((16, 16))))
    same = plan(FakeCAI(aligned((16, 16))), FakeCAI(sq), FakeCAI(sq))               # out is B
    assert same.layout is first.layout and first.out_in_place and not same.out_in_place


def test_batches_are_one_strided_launch():
    A, B = aligned((6, 32, 16)), aligned((16, 8))
    c = plan(FakeCAI(A), FakeCAI(B)).layout
    assert c.problem == Problem(32, 8, 16, "float32", batch=6) and c.shape == (6, 32, 8)
    assert (c.a.stride, c.b.stride) == (32 * 16, 0) and not c.a.copy and not c.b.copy
    # transposed stacks in place too
    c = plan(FakeCAI(aligned((6, 16, 32)).swapaxes(1, 2)), FakeCAI(aligned((1, 16, 8)))).layout
    assert c.problem.trans_a and c.problem.batch == 6 and (c.a.stride, c.b.stride) == (512, 0)
    # uneven spacing over broadcast dims: the operand is copied into a stack, the other stays
    c = plan(FakeCAI(aligned((2, 1, 32, 16))), FakeCAI(aligned((3, 16, 8)))).layout
    assert c.problem.batch == 6 and c.shape == (2, 3, 32, 8)
    assert c.a.copy and c.a.stride == 32 * 16 and c.b.copy and c.b.stride == 16 * 8
    # numpy stacks: one problem too (uploaded once)
    c = plan(np.ones((5, 4, 3)), np.ones((3, 2))).layout
    assert c.problem.batch == 5 and c.kind == "numpy" and c.b.stride == 0
    # an out with more batch dimensions than the inputs: every product of it is computed
    c = plan(FakeCAI(A), FakeCAI(B), FakeCAI(aligned((2, 6, 32, 8)))).layout
    assert c.problem.batch == 12 and c.a.copy and c.a.stride == 32 * 16 and c.b.stride == 0
    # products of odd size packed (33 floats apart): in place; 35 apart (padded) are not aligned: copied
    c = plan(FakeCAI(aligned((4, 3, 11))), FakeCAI(aligned((11, 8)))).layout
    assert not c.a.copy and c.a.stride == 33
    c = plan(FakeCAI(aligned((4, 5, 7))[:, :3, :]), FakeCAI(aligned((7, 8)))).layout
    assert c.a.copy and c.a.stride == 21


def test_one_d_operands_follow_numpy():
    v, M = aligned((16,)), aligned((16, 8))
    c = plan(FakeCAI(v), FakeCAI(M)).layout
    assert c.shape == (8,) and c.problem == Problem(1, 8, 16) and not c.a.copy
    c = plan(FakeCAI(aligned((8, 16))), FakeCAI(v)).layout
    assert c.shape == (8,) and c.problem == Problem(8, 1, 16) and not c.b.copy


def test_out_and_errors():
    A, B = FakeCAI(aligned((32, 16))), FakeCAI(aligned((16, 8)))
    out = FakeCAI(aligned((32, 8)))
    c = plan(A, B, out)
    assert c.out_in_place and c.layout.kind == "cupy"
    assert not plan(A, B, FakeCAI(aligned((8, 32)).T)).out_in_place      # column-major out: via a temporary
    assert not plan(A, B, FakeCAI(aligned((32, 8), np.float64))).out_in_place   # another dtype too
    c = plan(A, B, out, beta=1.0)
    assert c.c is c.out and c.beta == 1.0                                 # out is the C added
    with pytest.raises(ValueError, match=r"out has shape \(8, 32\), expected \(32, 8\)"):
        plan(A, B, FakeCAI(aligned((8, 32))))
    with pytest.raises(ValueError, match="read-only"):
        plan(A, B, FakeCAI(aligned((32, 8)), readonly=True))
    with pytest.raises(TypeError, match="out must be an array"):
        plan(A, B, [[0.0] * 8] * 32)
    with pytest.raises(ValueError, match="mismatch in its core dimension 0"):
        plan(A, FakeCAI(aligned((15, 8))))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        plan(FakeCAI(aligned((2, 32, 16))), FakeCAI(aligned((3, 16, 8))))
    with pytest.raises(ValueError, match="beta != 0 adds beta \\* out"):
        plan(A, B, beta=1.0)


@pytest.mark.parametrize("x, what", [
    (FakeCAI(aligned((32, 16), np.float16)), "float16"),
    (FakeDLPack((32, 16), "torch.bfloat16"), "bfloat16"),
])
def test_half_precision_is_a_clear_type_error(x, what):
    with pytest.raises(TypeError, match=f"{what}.*float32 and float64 only"):
        plan(x, FakeCAI(aligned((16, 8))))


def test_complex_and_strings_are_refused():
    with pytest.raises(TypeError, match="complex"):
        plan(FakeCAI(aligned((4, 4), np.complex64)), np.ones((4, 4)))
    with pytest.raises(TypeError, match="real numeric"):
        plan("abc", np.ones((4, 4)))


def test_device_of_another_gpu_is_refused():
    c = plan(FakeCAI(aligned((32, 16))), FakeCAI(aligned((16, 8))))
    call.check_devices(c, 0, pointer_device=lambda ptr: 0)
    with pytest.raises(ValueError, match="A is on CUDA device 1, but this CUDA backend runs on device 0"):
        call.check_devices(c, 0, pointer_device=lambda ptr: 1 if ptr == c.a.ptr else 0)
    c.a = device_arrays.describe(FakeDLPack((32, 16), np.float32, device=2))
    with pytest.raises(ValueError, match="A is on CUDA device 2.*device_index=2"):
        call.check_devices(c, 0, pointer_device=lambda ptr: 0)


def test_empty_and_k_zero_need_no_kernel():
    assert plan(np.ones((0, 3)), np.ones((3, 4))).problem is None
    assert plan(np.ones((3, 0)), np.ones((0, 4))).problem is None
    assert plan(np.ones((0, 3, 2)), np.ones((2, 4))).problem is None


def test_problem_batch_is_part_of_the_key_only_when_above_one():
    p = Problem(32, 8, 16)
    assert p.key == "32x8x16:float32:NN" and p.batch == 1 and "batch" not in p.to_dict()
    b = Problem(32, 8, 16, batch=6)
    assert b.key == "32x8x16:float32:NN:b6" and b != p
    assert Problem.from_dict(b.to_dict()) == b and Problem.from_dict(p.to_dict()) == p
    assert b.flops == 6 * p.flops and b.stored_shapes == ((6, 32, 16), (6, 16, 8)) and b.out_shape == (6, 32, 8)
    assert Problem.parse("6,32,8,16") == b and Problem.parse("32x8x16") == p
    with pytest.raises(ValueError, match="batch"):
        Problem(1, 1, 1, batch=0)


def test_search_inputs_for_a_batch():
    """The search evaluator's operands and float64 reference for a batched
    problem: stacks as stored, the reference per product."""
    from shadertune.search.evaluate import make_inputs
    p = Problem(5, 3, 4, "float32", True, True, batch=6)
    A, B, ref = make_inputs(p, seed=1)
    assert A.shape == (6, 4, 5) and B.shape == (6, 3, 4) and ref.shape == (6, 5, 3)
    for b in range(6):
        np.testing.assert_allclose(ref[b], A[b].T.astype(np.float64) @ B[b].T.astype(np.float64))


def test_host_half_precision_is_cast_as_on_the_gl_path():
    c = plan(np.ones((4, 3), np.float16), np.ones((3, 2), np.float16)).layout
    assert c.dtype == np.float32 and c.a.copy and c.b.copy
    assert plan(np.ones((4, 3), np.float16), np.ones((3, 2), np.int32)).layout.dtype == np.float64
