"""The CUDA backend behind shadertune.matmul's front door (api.run_call ->
call.prepare / call.execute) and the driver's launch path
(CUDAKernel.enqueue) on a host-memory stand-in for CuPy (tests/fake_cupy.py),
for machines without a GPU: which pointers, strides, trans flags, streams and
grids reach the kernel, and that what the kernel's contract computes from them
is numpy.matmul's answer. The GPU tests (test_cuda_gpu*.py) run the real
kernels."""
import sys

import numpy as np
import pytest

import fake_cupy
import shadertune
from shadertune.backends.cuda import CUDABackend, api, call
from shadertune.backends.cuda.space import make_space
from shadertune.backends.cuda.device import DEFAULT_LIMITS as L
from shadertune.core.config import Config
from shadertune.core.problem import Problem


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(call, "_STREAMS", {})     # no stand-in stream outlives the test
    monkeypatch.setitem(api._visible, 0, True)    # the stand-in's device 0
    fake_cupy._STACK[:] = [fake_cupy._NULL]
    return fake_cupy


class Backend(CUDABackend):
    """The CUDA backend (its space, default configs, run_call) building fake kernels."""

    def __init__(self):
        super().__init__()
        self.built = []

    def build(self, problem, config):
        self.built.append(fake_cupy.FakeKernel(problem))
        self.built[-1].built_for = config
        return self.built[-1]


@pytest.fixture(scope="module")
def be():
    return Backend()


def dev(cp, a, dtype=np.float32):
    return cp.asarray(np.asarray(a, dtype))


def run(be, A, B, **kw):
    """shadertune.matmul on the backend: (result, the kernel it launched or None, its problem)."""
    for k in be.built:
        k.calls.clear()
    r = shadertune.matmul(A, B, backend=be, config="default", **kw)
    used = [k for k in be.built if k.calls]
    assert len(used) <= 1 and all(len(k.calls) == 1 for k in used)    # one launch a call
    return r, (used[0] if used else None), (used[0].problem if used else None)


def close(x, ref, tol=1e-5):
    x = np.asarray(x)
    assert x.shape == np.shape(ref)
    np.testing.assert_allclose(x, ref, rtol=tol, atol=tol)


def test_device_arrays_in_device_arrays_out(cp, rng, be):
    A, B = rng.uniform(-1, 1, (33, 20)), rng.uniform(-1, 1, (20, 17))
    r, k, c = run(be, dev(cp, A), dev(cp, B))
    assert isinstance(r, cp.ndarray) and r.dtype == np.float32
    close(r, A @ B)
    r, k, c = run(be, A, B)                                          # numpy in, numpy out
    assert type(r) is np.ndarray
    close(r, A @ B)
    r, k, c = run(be, A.astype(np.float32), dev(cp, B))              # mixed: the device kind
    assert isinstance(r, cp.ndarray)
    r, k, c = run(be, dev(cp, A), dev(cp, B, np.float64))            # float32 x float64: float64
    assert r.dtype == np.float64
    close(r, A.astype(np.float32) @ B, 1e-12)


def test_transposed_views_reach_the_kernel_in_place(cp, rng, be):
    At, Bt = dev(cp, rng.uniform(-1, 1, (20, 33))), dev(cp, rng.uniform(-1, 1, (17, 20)))
    r, k, c = run(be, At.T, Bt.T)
    assert c.trans_a and c.trans_b
    assert k.calls[0][:2] == (At.data.ptr, Bt.data.ptr)          # no copies
    close(r, np.asarray(At).T @ np.asarray(Bt).T)
    S = dev(cp, rng.uniform(-1, 1, (40, 66)))
    r, k, c = run(be, S[:33, ::3][:, :20], Bt.T)                      # strided: one copy
    assert k.calls[0][0] != S.data.ptr and not c.trans_a
    close(r, np.asarray(S)[:33, ::3][:, :20] @ np.asarray(Bt).T)


def test_batches_are_one_launch(cp, rng, be):
    A, B = rng.uniform(-1, 1, (6, 9, 5)), rng.uniform(-1, 1, (6, 5, 7))
    r, k, c = run(be, dev(cp, A), dev(cp, B))
    assert len(k.calls) == 1 and k.calls[0][3:6] == (45, 35, 6)
    close(r, A @ B)
    r, k, c = run(be, dev(cp, A), dev(cp, B[0]))                     # broadcast B: stride 0, no copy
    assert k.calls[0][3:5] == (45, 0)
    close(r, A @ B[0])
    a2, b3 = rng.uniform(-1, 1, (2, 1, 9, 5)), rng.uniform(-1, 1, (3, 5, 7))
    r, k, c = run(be, dev(cp, a2), dev(cp, b3))                      # uneven: stacked copies
    assert c.batch == 6 and k.calls[0][3:5] == (45, 35)
    close(r, a2 @ b3)
    r, k, c = run(be, a2, b3)                                        # numpy stacks
    close(r, a2 @ b3)
    r, k, c = run(be, dev(cp, A).swapaxes(1, 2).swapaxes(1, 2), dev(cp, B))
    close(r, A @ B)
    v = rng.uniform(-1, 1, 5)
    for a, b in [(v, dev(cp, B)), (dev(cp, A), v), (v, v)]:
        r, k, c = run(be, a, b)
        close(r, np.matmul(np.asarray(a, np.float32).astype(np.float64), np.asarray(b, np.float32)))


def test_out_in_place_through_a_temporary_or_to_the_host(cp, rng, be):
    A, B = rng.uniform(-1, 1, (33, 20)), rng.uniform(-1, 1, (20, 17))
    dA, dB = dev(cp, A), dev(cp, B)
    o = cp.empty((33, 17), np.float32)
    r, k, c = run(be, dA, dB, out=o)
    assert r is o and k.calls[0][2] == o.data.ptr
    close(o, A @ B)
    big = cp.zeros((33, 34), np.float32)
    r, k, c = run(be, dA, dB, out=big[:, ::2])
    assert k.calls[0][2] != big.data.ptr
    close(np.asarray(big)[:, ::2], A @ B)
    assert not np.asarray(big)[:, 1::2].any()
    h = np.zeros((33, 17), np.float32)
    r, k, c = run(be, dA, dB, out=h)
    assert r is h
    close(h, A @ B)
    C0 = rng.uniform(-1, 1, (33, 17))
    o = dev(cp, C0)
    run(be, dA, dB, out=o, alpha=2.0, beta=-0.5)                     # beta reads out in place
    close(o, 2 * A @ B - 0.5 * C0, 1e-4)
    o = cp.zeros((33, 34), np.float32)
    o[:, ::2] = C0
    run(be, dA, dB, out=o[:, ::2], alpha=1.0, beta=3.0)            # beta reads a strided out
    close(np.asarray(o)[:, ::2], A @ B + 3 * C0, 1e-4)
    h = C0.copy()
    run(be, A, B, out=h, beta=1.0)                                 # host out, host C
    close(h, A @ B + C0, 1e-4)
    o = dev(cp, C0, np.float64)                                    # float64 out of a float32 product
    assert run(be, dA, dB, out=o, beta=1.0)[0] is o
    close(o, A.astype(np.float32) @ B.astype(np.float32) + C0, 1e-5)


def test_empty_and_k_zero(cp, rng, be):
    r, k, c = run(be, dev(cp, np.ones((0, 3))), dev(cp, np.ones((3, 4))))
    assert k is None and r.shape == (0, 4)
    r, k, c = run(be, dev(cp, np.ones((3, 0))), dev(cp, np.ones((0, 4))))
    assert k is None and not np.asarray(r).any() and r.shape == (3, 4)
    C0 = rng.uniform(-1, 1, (3, 4))
    h = C0.copy()
    r, k, c = run(be, np.ones((3, 0)), np.ones((0, 4)), out=h, beta=2.0)
    assert r is h and k is None
    close(h, 2 * C0)


def test_the_callers_stream_and_producer_streams(cp, rng, be):
    A, B = rng.uniform(-1, 1, (16, 8)), rng.uniform(-1, 1, (8, 4))
    dA, dB = dev(cp, A), dev(cp, B)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        r, k, c = run(be, dA, dB)
    assert k.calls[0][6] == s.ptr                       # launched on CuPy's current stream
    close(r, A @ B)

    class Produced:                                     # a CAI v3 array written on stream 4242
        __cuda_array_interface__ = {"shape": (16, 8), "typestr": "<f4", "data": (dA.data.ptr, False),
                                    "strides": None, "version": 3, "stream": 4242}
    with s:
        r, k, c = run(be, Produced(), dB)
    assert 4242 in s.waited and k.calls[0][6] == s.ptr     # waited for by an event, on our stream
    assert isinstance(r, cp.ndarray)
    close(r, A @ B)


@pytest.mark.parametrize("cupy_14", [True, False])
def test_a_foreign_stream_is_wrapped_by_from_external_else_external_stream(cp, rng, be, monkeypatch, cupy_14):
    """Stream.from_external (the CUDA stream protocol) where CuPy has it; ExternalStream
    where it does not (CuPy before 14). Both wrap the same handle, and a producer
    stream wrapped either way is waited for."""
    monkeypatch.setattr(cp, "_EXTERNAL", {})
    used = []
    if cupy_14:
        from_external = cp.Stream.from_external
        monkeypatch.setattr(cp.Stream, "from_external",
                            classmethod(lambda cls, obj: used.append(("from_external", obj)) or from_external(obj)))
        monkeypatch.setattr(cp.cuda, "ExternalStream", lambda *a: pytest.fail("ExternalStream used"))
    else:
        monkeypatch.delattr(cp.Stream, "from_external")
        external = cp.ExternalStream
        monkeypatch.setattr(cp.cuda, "ExternalStream",
                            lambda ptr, device_id=-1: used.append(("ExternalStream", device_id)) or external(ptr))
    w = call.stream_from_handle(cp, 5151, 0)
    assert isinstance(w, cp.Stream) and w.ptr == 5151
    if cupy_14:
        assert used[0][0] == "from_external" and used[0][1].__cuda_stream__() == (0, 5151)
    else:
        assert used == [("ExternalStream", 0)]

    A, B = rng.uniform(-1, 1, (16, 8)), rng.uniform(-1, 1, (8, 4))
    dA, dB = dev(cp, A), dev(cp, B)

    class Produced:                                     # a CAI v3 array written on stream 4343
        __cuda_array_interface__ = {"shape": (16, 8), "typestr": "<f4", "data": (dA.data.ptr, False),
                                    "strides": None, "version": 3, "stream": 4343}
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        r, k, c = run(be, Produced(), dB)
    assert 4343 in s.waited and len(used) == 2 and used[1][0] == used[0][0]
    close(r, A @ B)


# --- the driver's launch path ------------------------------------------------------

def fake_kernel(cp, p, cfg):
    """A CUDAKernel whose compiled functions are fake_cupy.FakeFunction."""
    from shadertune.backends.cuda.driver import CUDAKernel
    from shadertune.backends.cuda.space import derive
    d = derive(p, cfg)
    return CUDAKernel.from_functions(
        cp, p, cfg, fake_cupy.FakeFunction(p, cfg, d),
        reduce=fake_cupy.FakeFunction(p, cfg, d, reduce=True) if cfg["KG"] > 1 and not cfg["KR"] else None,
        pack=fake_cupy.FakeFunction(p, cfg, d, pack=True) if cfg.get("PS", 0) else None, sms=L["num_sms"])


def _ref(p, A, B):
    a = np.swapaxes(A, -1, -2) if p.trans_a else A
    b = np.swapaxes(B, -1, -2) if p.trans_b else B
    return np.matmul(a.astype(np.float64), b)


FFMA = Config(BM=32, BN=16, BK=16, TM=4, TN=4, WM=32, WN=16, trans=1, VEC=4, PAD=4, DB=1, ST=0,
              KG=1, KL=1, KR=0, MMA=0)


@pytest.mark.parametrize("M, chunk", [(16, [7, 7, 6]), (70, [6, 6, 6, 2])])
def test_enqueue_grid_arguments_and_chunks(cp, rng, monkeypatch, M, chunk):
    """grid.y = M tiles x products, at most MAX_GRID_Y: a longer batch
    launches in chunks with the pointers moved on (here MAX_GRID_Y = 7 and
    20 products; with M = 70, three M tiles a product)."""
    from shadertune.backends.cuda import driver
    monkeypatch.setattr(driver, "MAX_GRID_Y", 7 if M == 16 else 20)
    p = Problem(M, 16, 16, batch=20)
    assert FFMA in make_space(p, L)
    k = fake_kernel(cp, p, FFMA)
    A = rng.uniform(-1, 1, p.stored_shapes[0]).astype(np.float32)
    B = rng.uniform(-1, 1, p.stored_shapes[1]).astype(np.float32)
    out = k.run(A, B)
    mtiles = -(-M // 32)
    assert [c["grid"][1] for c in k._main.calls] == [mtiles * n for n in chunk]
    close(out, _ref(p, A, B), 1e-4)


@pytest.mark.parametrize("kr", [0, 1])
def test_enqueue_split_k_in_a_batch(cp, rng, kr):
    p = Problem(45, 37, 3001, "float64", False, True, batch=3)
    cfg = Config(BM=32, BN=32, BK=16, TM=2, TN=2, WM=16, WN=16, trans=1, VEC=1, PAD=2, DB=1, ST=3,
                 KG=8, KL=1, KR=kr, MMA=1)
    assert cfg in make_space(p, L)
    k = fake_kernel(cp, p, cfg)
    A, B = rng.uniform(-1, 1, p.stored_shapes[0]), rng.uniform(-1, 1, p.stored_shapes[1])
    C0 = rng.uniform(-1, 1, p.out_shape)
    out = k.run(A, B, C0, alpha=1.5, beta=-2.0)
    close(out, 1.5 * _ref(p, A, B) - 2 * C0, 1e-10)
    main = k._main.calls[0]
    assert main["grid"][2] == 8 and len(main["args"]) == 13          # two stride arguments
    if kr:
        assert k._reduce is None and main["args"][4] == k._cnt[0][0]  # counters of this stream
        s = cp.cuda.Stream()
        with s:
            k.launch()
        assert s.ptr in k._cnt and k._cnt[s.ptr][0] != k._cnt[0][0]
    else:
        red = k._reduce.calls[0]
        assert red["args"][2] == 3 * 45 * 37                         # the whole batch's elements


def test_the_common_call_is_planned_once(cp, rng, be):
    """A call of a layout seen before (shapes, strides, dtypes, kinds, alignment)
    reuses its plan, its config and its kernel: one launch, nothing copied."""
    A, B = rng.uniform(-1, 1, (33, 20)), rng.uniform(-1, 1, (20, 17))
    r = run(be, dev(cp, A), dev(cp, B), alpha=2)[0]
    close(r, 2 * A @ B, 1e-4)
    layouts, kernels = len(call._LAYOUTS), len(be.built)
    dA, dB = dev(cp, A), dev(cp, B)
    r, k, p = run(be, dA, dB)
    assert len(call._LAYOUTS) == layouts and len(be.built) == kernels
    assert k.calls[0][:2] == (dA.data.ptr, dB.data.ptr)
    close(r, A @ B)
    At = dev(cp, A.T.copy())
    r, k, p = run(be, At.T, dB)                                    # transposed: in place, its own plan
    assert p.trans_a and len(call._LAYOUTS) == layouts + 1 and k.calls[0][0] == At.data.ptr
    close(r, A @ B)
    with pytest.raises(ValueError, match="core dimension"):
        run(be, dA, dev(cp, np.ones((19, 3))))


def test_out_that_shares_memory_with_an_input(cp, rng, be):
    """out= written in place (no allocation); an out that shares memory with A
    or B is computed into a temporary first (as numpy.matmul buffers overlapping
    operands), also when a call of the same layout wrote in place before."""
    A, B = rng.uniform(-1, 1, (16, 16)), rng.uniform(-1, 1, (16, 16))
    dA, dB = dev(cp, A), dev(cp, B)
    o = cp.empty((16, 16), np.float32)
    r, k, p = run(be, dA, dB, out=o)
    assert r is o and k.calls[0][2] == o.data.ptr
    close(o, A @ B)
    r, k, p = run(be, dA, dB, out=dA)
    assert r is dA and k.calls[0][2] != dA.data.ptr
    close(dA, A.astype(np.float32) @ B)
    with pytest.raises(ValueError, match="out has shape"):
        run(be, dA, dB, out=cp.empty((16, 8), np.float32))


def test_auto_reads_the_store_once_for_a_batched_device_call(cp, rng, be, tmp_path, monkeypatch):
    """config='auto' on a stack of device arrays (B read in place through the trans
    flag) finds the stored batched problem exactly, and later calls of that layout
    do not read the store again (selection/chain.py keeps the selection while the store is
    unchanged)."""
    from shadertune.selection import chain as select
    from shadertune.db import Store
    from shadertune.core.result import Result
    p = Problem(24, 8, 16, trans_b=True, batch=3)
    stored = [c for c in be.candidates(p, 8) if c != be.default_config(p)][0]
    with Store(tmp_path / "t.sqlite") as s:
        s.put(Result("cuda", "x", p, stored, "ok", times_ms=[1.0], error=0.0), be.template_hash())
    asked = []
    real = select._from_store
    monkeypatch.setattr(select, "_from_store", lambda *a: asked.append(1) or real(*a))
    monkeypatch.setattr(be, "device", lambda: type("D", (), {"key": "x"})())
    A, Bt = rng.uniform(-1, 1, (3, 24, 16)), rng.uniform(-1, 1, (3, 8, 16))
    for _ in range(3):
        dA, dBt = dev(cp, A), dev(cp, Bt)
        r = shadertune.matmul(dA, dBt.swapaxes(1, 2), backend=be, db=tmp_path / "t.sqlite")
        close(r, A.astype(np.float32).astype(np.float64) @ Bt.astype(np.float32).swapaxes(1, 2))
    assert len(asked) == 1
    k = [k for k in be.built if k.problem == p]
    assert len(k) == 1 and k[0].built_for == stored


def test_explain_shows_the_problem_the_launch_runs(cp, tmp_path):
    """shadertune.explain for CUDA operands: a stack of device matrices with B stored
    transposed is one batched NT problem, as matmul runs it; host operands are
    copied row-major (no GPU needed to plan either)."""
    from shadertune import explain
    A, Bt = np.ones((5, 32, 16), np.float32), np.ones((5, 8, 16), np.float32)
    none = tmp_path / "none.sqlite"
    s = explain(dev(cp, A), dev(cp, Bt).swapaxes(1, 2), backend="cuda", db=none)
    assert s.problem == Problem(32, 8, 16, trans_b=True, batch=5) and s.how == "default"
    assert explain(A, Bt.swapaxes(1, 2), backend="cuda", db=none).problem == Problem(32, 8, 16, batch=5)
