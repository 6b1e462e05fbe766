"""The express lane's DLPack reader (backends/cuda/dlpack_view.py) and the lane's
DLPack calls, without a GPU: the reader on numpy's own capsules (both forms) and
on capsules made with ctypes (tests/dlpack_capsules.py: any device type, byte
offsets, no strides, versions and dtypes it does not take); the producer asked
with max_version once per type where it refuses it; and matmul on DLPack
producers over the CuPy stand-in's memory (tests/fake_cupy.py), whose regular
path imports through the stand-in's cupy.from_dlpack: the lane repeats the call
with each producer's __dlpack__ on the same stream every call, the regular path's
bits, each capsule's deleter run once; what the reader does not take goes to the
regular path."""
import gc

import numpy as np
import pytest

import dlpack_capsules as dc
import shadertune
from shadertune.backends.cuda import dlpack_view

from test_cuda_steady import Backend
from test_host_overhead import cp  # noqa: F401  (fixture: the CuPy stand-in)


@pytest.fixture(autouse=True)
def fresh_memory():
    """Each test's producer types asked afresh (the reader remembers them by type)."""
    dlpack_view.forget()
    yield
    dlpack_view.forget()


def fields(v):
    """A view without its capsule: (ptr, shape, strides, dtype, device type, device id)."""
    assert v is not None
    return v[1:]


# --- the reader on numpy's capsules ---------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("versioned", [True, False])
def test_numpy_capsules_read_as_numpy_sees_them(dtype, versioned):
    base = np.arange(7 * 10, dtype=dtype).reshape(7, 10)
    for a in (base, base[::2, 1:7:3], base.T, base[1:, 2:].T, base.reshape(2, 5, 7)[:, ::2]):
        cap = a.__dlpack__(max_version=(1, 0)) if versioned else a.__dlpack__()
        assert fields(dlpack_view.read(cap)) == (a.ctypes.data, a.shape, a.strides, np.dtype(dtype),
                                                 dc.DL_CPU, 0), a.strides
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                 "complex64", "complex128", "bool"):
        assert dlpack_view.read(np.zeros(3, name).__dlpack__())[4] == np.dtype(name)


def test_the_capsule_is_read_not_consumed():
    """The name stays: its producer's destructor frees it, and another consumer can
    still take it over (numpy here)."""
    a = np.arange(6.0).reshape(2, 3)
    cap = a.__dlpack__(max_version=(1, 0))
    assert dlpack_view.read(cap)[1] == a.ctypes.data
    assert "dltensor_versioned" in repr(cap) and "used" not in repr(cap)
    seen = dc.TakenOver(cap)
    assert seen.tensor.data == a.ctypes.data and "used_dltensor_versioned" in repr(cap)
    assert dlpack_view.read(cap) is None                 # taken over: no longer readable
    assert dlpack_view.read(object()) is None and dlpack_view.read(b"dltensor") is None


# --- capsules made with ctypes ---------------------------------------------------------------

def test_byte_offset_missing_strides_and_device():
    deleted = []
    cap = dc.capsule(0x10000, (3, 1, 4), "float32", byte_offset=48, device=(dc.DL_CUDA, 3),
                     on_delete=lambda: deleted.append(1))
    # no strides: C order with CuPy's rule (a dimension of one does not multiply)
    assert fields(dlpack_view.read(cap)) == (0x10000 + 48, (3, 1, 4), (16, 16, 4), np.dtype("float32"), dc.DL_CUDA, 3)
    assert dc.from_dlpack(type("X", (), {"__dlpack__": lambda s, **k: cap,
                                         "__dlpack_device__": lambda s: (dc.DL_CUDA, 3)})(), 0,
                          take_over=False)[:5] == (0x10000 + 48, (3, 1, 4), (16, 16, 4), np.dtype("float32"), 3)
    legacy = dc.capsule(0x20000, (5, 6), "float64", (1, 5), versioned=False, device=(dc.DL_CUDA_MANAGED, 0))
    assert fields(dlpack_view.read(legacy)) == (0x20000, (5, 6), (8, 40), np.dtype("float64"), dc.DL_CUDA_MANAGED, 0)
    assert fields(dlpack_view.read(dc.capsule(0x30000, (2, 3, 4), "float32", (0, 4, 1)))) == (
        0x30000, (2, 3, 4), (0, 16, 4), np.dtype("float32"), dc.DL_CUDA, 0)        # a broadcast batch
    assert fields(dlpack_view.read(dc.capsule(0x30000, (4, 4), "float32", flags=dc.FLAG_READ_ONLY)))[0] == 0x30000
    assert not deleted
    del cap
    gc.collect()
    assert deleted == [1]


@pytest.mark.parametrize("kw", [dict(version=(2, 0)), dict(version=(0, 9)), dict(lanes=2), dict(dl_code=4),
                                dict(dl_code=3)])
def test_what_the_reader_does_not_take(kw):
    """Another major version, vector lanes, bfloat16 (code 4) and opaque handles: None."""
    assert dlpack_view.read(dc.capsule(0x10000, (4, 4), "float32" if "dl_code" not in kw else "uint16", **kw)) is None


# --- the producer asked ----------------------------------------------------------------------

def test_a_producer_that_refuses_max_version_pays_the_refusal_once_per_type():
    a = np.ones((4, 6), np.float32)
    p, q = dc.LegacyProducer.over(a), dc.LegacyProducer.over(a[:, ::2])
    dc.LegacyProducer.refused = 0
    for _ in range(3):
        assert fields(dlpack_view.view(p, 7)) == (a.ctypes.data, (4, 6), (24, 4), np.dtype("float32"), dc.DL_CUDA, 0)
        assert fields(dlpack_view.view(q, 7))[2] == (24, 8)
    assert dc.LegacyProducer.refused == 1 and p.streams == q.streams == [7, 7, 7]
    gc.collect()
    assert p.deleted == p.exports == 3 and q.deleted == q.exports == 3


def test_versioned_producers_and_one_that_answers_max_version_with_a_legacy_capsule():
    a = np.ones((4, 6), np.float64)

    class OldCapsules(dc.Producer):       # takes the keyword, still makes legacy capsules
        def __dlpack__(self, *, stream=None, max_version=None, **kw):
            return self._export(stream, False)
    for kind in (dc.Producer, OldCapsules):
        p = kind.over(a)
        for _ in range(2):
            assert fields(dlpack_view.view(p, 5)) == (a.ctypes.data, (4, 6), (48, 8), np.dtype("float64"), dc.DL_CUDA, 0)
        assert p.streams == [5, 5]
    assert dlpack_view._ASK == {dc.Producer: dlpack_view._ASK_V, OldCapsules: dlpack_view._ASK_V_GOT_L}
    assert fields(dlpack_view.view(a, None))[1:3] == ((4, 6), (48, 8))     # numpy's own, stream None


def test_the_stream_handed_over_is_cupys(cp, monkeypatch):
    """cupy.from_dlpack's value: the current stream's handle, the legacy default
    stream (1) for the null stream (2 where CuPy runs per-thread default streams)."""
    assert dlpack_view.consumer_stream(cp) == 1
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        assert dlpack_view.consumer_stream(cp) == s.ptr != 0
    monkeypatch.setenv("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM", "1")
    assert dlpack_view._default_stream() == 2


# --- the lane --------------------------------------------------------------------------------

def producers(cp, rng, kind=dc.Producer, m=24, k=16, n=8, trans_b=False, byte_offset=0):
    """(A, B host copies, pA, pB): producers over the stand-in's device arrays."""
    A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    dA, dB = cp.asarray(A), cp.asarray(np.ascontiguousarray(B.T) if trans_b else B)
    pA = kind(dA.ctypes.data - byte_offset, A.shape, A.dtype, (k, 1), keep=dA, byte_offset=byte_offset)
    pB = kind(dB.ctypes.data, B.shape, B.dtype, (1, k) if trans_b else (n, 1), keep=dB)
    return A, B, pA, pB


@pytest.mark.parametrize("kind", [dc.Producer, dc.LegacyProducer])
@pytest.mark.parametrize("trans_b, byte_offset", [(False, 0), (True, 64)])
def test_the_lane_repeats_dlpack_calls_with_the_handshake_every_call(cp, rng, checks, kind, trans_b, byte_offset):
    be = Backend()
    A, B, pA, pB = producers(cp, rng, kind, trans_b=trans_b, byte_offset=byte_offset)
    dc.LegacyProducer.refused = 0
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        first = shadertune.matmul(pA, pB, backend=be, config="default")          # the regular path
        assert len(checks) == 1 and pA.exports == pB.exports == 1
        refused = kind.refused if kind is dc.LegacyProducer else None
        outs = [shadertune.matmul(pA, pB, backend=be, config="default") for _ in range(4)]
    assert len(checks) == 1                                                     # the lane
    assert all(isinstance(o, cp.ndarray) and np.array_equal(np.asarray(o), np.asarray(first)) for o in outs)
    np.testing.assert_allclose(np.asarray(first), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    assert pA.streams == pB.streams == [s.ptr] * 5                             # cupy.from_dlpack's, every call
    del first, outs
    gc.collect()
    assert pA.deleted == pA.exports == 5 and pB.deleted == pB.exports == 5      # each capsule's deleter once
    if kind is dc.LegacyProducer:        # the regular path's imports ask with max_version each time
        assert refused == 2 and kind.refused == 3       # (CuPy's way); the lane once for the type


def test_the_lane_skips_the_import(cp, rng, checks, monkeypatch):
    """On the lane nothing is imported into CuPy: cupy.from_dlpack is not called."""
    be = Backend()
    _, _, pA, pB = producers(cp, rng)
    shadertune.matmul(pA, pB, backend=be, config="default")
    monkeypatch.setattr(cp, "from_dlpack", lambda x: pytest.fail("imported on the lane"))
    r = shadertune.matmul(pA, pB, backend=be, config="default")
    assert len(checks) == 1 and isinstance(r, cp.ndarray)


def test_what_the_lane_does_not_take_goes_the_regular_way(cp, rng, checks):
    """A producer of the learned type and key whose capsule is host memory (CPU),
    another DLPack version or managed memory: the first two take the regular path,
    as before (host memory: a numpy result; version 2: CuPy's BufferError), managed
    memory (which CuPy reads, its device asked of the pointer) takes the lane."""
    be = Backend()
    A, B, pA, pB = producers(cp, rng)
    want = np.asarray(shadertune.matmul(pA, pB, backend=be, config="default"))
    hA = dc.Producer.over(A.copy(), device=(dc.DL_CPU, 0))
    hB = dc.Producer.over(B.copy(), device=(dc.DL_CPU, 0))
    r = shadertune.matmul(hA, hB, backend=be, config="default")
    assert len(checks) == 2 and type(r) is np.ndarray
    np.testing.assert_allclose(r, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    v2 = dc.Producer(pA.ptr, pA.shape, pA.dtype, pA.strides, keep=pA.keep, version=(2, 0))
    with pytest.raises(BufferError, match="too new major version"):
        shadertune.matmul(v2, pB, backend=be, config="default")
    assert len(checks) == 3
    mA = dc.Producer(pA.ptr, pA.shape, pA.dtype, pA.strides, keep=pA.keep, device=(dc.DL_CUDA_MANAGED, 0))
    assert np.array_equal(np.asarray(shadertune.matmul(mA, pB, backend=be, config="default")), want)
    assert len(checks) == 3
    gc.collect()
    assert all(p.deleted == p.exports for p in (pA, pB, hA, hB, v2, mA))


def test_a_producer_that_raises_on_the_lane_gets_the_regular_paths_error(cp, rng, checks):
    """The lane asks a producer of a learned type, which raises: the regular path
    asks again (cupy.from_dlpack) and its error is the caller's."""
    class Flaky(dc.Producer):
        fail = False

        def __dlpack__(self, **kw):
            if self.fail:
                raise BufferError("this array cannot be exported now")
            return super().__dlpack__(**kw)
    be = Backend()
    _, _, pA, pB = producers(cp, rng, Flaky)
    shadertune.matmul(pA, pB, backend=be, config="default")
    shadertune.matmul(pA, pB, backend=be, config="default")
    assert len(checks) == 1
    pA.fail = True
    with pytest.raises(BufferError, match="cannot be exported now"):
        shadertune.matmul(pA, pB, backend=be, config="default")
    assert len(checks) == 2
