"""CUDA front door on a GPU: device arrays in and out (CuPy, PyTorch, CAI,
DLPack), the caller's stream, batches as one launch, DGEMM on the FP64
tensor cores. Skipped cleanly without CuPy or without a device; the PyTorch
tests also without PyTorch."""
import functools
import itertools

import numpy as np
import pytest

from cuda_gpu import DEVICES, TOL, cupy, pytestmark  # noqa: F401  (skips without a CUDA device)

from shadertune.backends.cuda import CUDABackend, call, codegen  # noqa: E402
from shadertune.backends.cuda.hold import hold  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.call.inputs import check_call  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
import shadertune  # noqa: E402

# the front door on the CUDA backend
matmul = functools.partial(shadertune.matmul, backend="cuda")

# A spin long enough that a call returning under it did not wait for it.  Every
# operation of the timed line runs once before (warm): the first use of a CuPy
# elementwise kernel compiles it, and CUDA's lazy loading may synchronise the
# context when it loads a kernel module, either of which would look like a sync.
SPIN_US = 1_000_000


@pytest.fixture(scope="module")
def be():
    return CUDABackend()


def plan(A, B):
    """How the CUDA backend runs A @ B (call.Launch), without running it."""
    return call.prepare(check_call(A, B, dtypes=CUDABackend.dtypes))


def rel(x, ref):
    x = cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)
    assert np.isfinite(x).all()
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def torch_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch


def test_cupy_in_cupy_out_views_in_place_or_copied_once(be):
    rng = np.random.default_rng(1)
    A, B = rng.uniform(-1, 1, (130, 70)), rng.uniform(-1, 1, (70, 90))
    dA, dB = cupy.asarray(A, np.float32), cupy.asarray(B, np.float32)
    r = matmul(dA, dB)
    assert isinstance(r, cupy.ndarray) and r.dtype == np.float32 and r.device.id == 0
    assert rel(r, A @ B) < TOL["float32"]
    At, Bt = cupy.ascontiguousarray(dA.T), cupy.ascontiguousarray(dB.T)   # stored transposed
    c = plan(At.T, Bt.T)
    assert c.problem.trans_a and c.problem.trans_b and not c.layout.a.copy and not c.layout.b.copy
    assert rel(matmul(At.T, Bt.T), A @ B) < TOL["float32"]
    S = cupy.asarray(rng.uniform(-1, 1, (140, 180)), np.float32)
    assert plan(S[:130, ::2][:, :70], dB).layout.a.copy      # strided: copied once
    assert rel(matmul(S[:130, ::2][:, :70], dB), cupy.asnumpy(S[:130, ::2][:, :70]).astype(np.float64) @ B) < TOL["float32"]
    # out= in place, non-contiguous out through a temporary, beta reads out
    o = cupy.empty((130, 90), np.float32)
    assert matmul(dA, dB, out=o) is o and rel(o, A @ B) < TOL["float32"]
    big = cupy.zeros((130, 180), np.float32)
    matmul(dA, dB, out=big[:, ::2])
    assert rel(big[:, ::2], A @ B) < TOL["float32"] and not bool(big[:, 1::2].any())
    C0 = rng.uniform(-1, 1, (130, 90))
    o = cupy.asarray(C0, np.float32)
    matmul(dA, dB, out=o, alpha=2.0, beta=-0.5)
    assert rel(o, 2 * A @ B - 0.5 * C0) < TOL["float32"]
    # numpy out with device inputs, device out with numpy inputs
    h = np.empty((130, 90), np.float32)
    assert matmul(dA, dB, out=h) is h and rel(h, A @ B) < TOL["float32"]
    assert isinstance(matmul(A.astype(np.float32), B.astype(np.float32)), np.ndarray)


def test_torch_in_torch_out_on_the_same_device(be):
    torch = torch_or_skip()
    rng = np.random.default_rng(2)
    A, B = rng.uniform(-1, 1, (100, 64)), rng.uniform(-1, 1, (64, 48))
    for dt, tol in ((torch.float32, TOL["float32"]), (torch.float64, TOL["float64"])):
        tA, tB = torch.tensor(A, dtype=dt, device="cuda:0"), torch.tensor(B, dtype=dt, device="cuda:0")
        r = matmul(tA, tB)
        assert isinstance(r, torch.Tensor) and r.device == tA.device and r.dtype == dt
        assert rel(r.cpu().numpy(), A @ B) < tol
        tAt = tA.t().contiguous()
        assert plan(tAt.t(), tB).problem.trans_a       # .t() read in place
        assert rel(matmul(tAt.t(), tB).cpu().numpy(), A @ B) < tol
        o = torch.empty((100, 48), dtype=dt, device="cuda:0")
        assert matmul(tA, tB, out=o) is o and rel(o.cpu().numpy(), A @ B) < tol
    with pytest.raises(TypeError, match="bfloat16"):
        matmul(tA.to(torch.bfloat16), tB.to(torch.bfloat16))
    with pytest.raises(TypeError, match="float16"):
        matmul(tA.half(), tB.half())


def test_cai_and_dlpack_objects_are_used_without_a_copy(be):
    rng = np.random.default_rng(3)
    dA = cupy.asarray(rng.uniform(-1, 1, (64, 32)), np.float32)
    dB = cupy.asarray(rng.uniform(-1, 1, (32, 40)), np.float32)

    class CAI:
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__

    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):     # stream=, and max_version= etc. where the consumer sends them
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    ref = cupy.asnumpy(dA).astype(np.float64) @ cupy.asnumpy(dB)
    c = plan(CAI(dA), DL(dB))
    assert not c.layout.a.copy and not c.layout.b.copy and c.a.ptr == dA.data.ptr and c.b.ptr == dB.data.ptr
    r = matmul(CAI(dA), DL(dB))
    assert isinstance(r, cupy.ndarray) and rel(r, ref) < TOL["float32"]


def test_cupy_stream_is_used_without_synchronising(be):
    """Work queued before the call (a 200 ms spin, then A * 2) and after it
    (+ 1) on a non-default stream: the call returns while the spin still
    runs (no host synchronisation) and its result sits between them."""
    rng = np.random.default_rng(4)
    A, B = rng.uniform(-1, 1, (96, 64)), rng.uniform(-1, 1, (64, 80))
    dA, dB = cupy.asarray(A, np.float32), cupy.asarray(B, np.float32)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        matmul(dA * 2, dB) + 1              # warm (see SPIN_US)
        hold(1000)
        s.synchronize()
        hold(SPIN_US)
        y = matmul(dA * 2, dB) + 1
        pending = not s.done
    s.synchronize()
    assert pending, "matmul synchronised the stream"
    assert rel(y, 2 * A @ B + 1) < TOL["float32"]


def test_torch_stream_is_used_without_synchronising(be):
    torch = torch_or_skip()
    rng = np.random.default_rng(5)
    A, B = rng.uniform(-1, 1, (96, 64)), rng.uniform(-1, 1, (64, 80))
    tA, tB = torch.tensor(A, dtype=torch.float32, device="cuda"), torch.tensor(B, dtype=torch.float32, device="cuda")
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        matmul(tA * 2, tB) + 1              # warm (see SPIN_US)
        hold(1000, stream=call.stream_from_handle(cupy, ts.cuda_stream))
        ts.synchronize()
        hold(SPIN_US, stream=call.stream_from_handle(cupy, ts.cuda_stream))
        y = matmul(tA * 2, tB) + 1
        pending = not ts.query()
    ts.synchronize()
    assert pending, "matmul synchronised the torch stream"
    assert rel(y.cpu().numpy(), 2 * A @ B + 1) < TOL["float32"]


def test_cai_producer_stream_is_waited_for(be):
    """A CAI v3 array whose producer stream is still writing it: the call
    waits for that stream (an event), not for the host."""
    rng = np.random.default_rng(6)
    A, B = rng.uniform(-1, 1, (64, 32)), rng.uniform(-1, 1, (32, 48))
    X, dB, src = cupy.zeros((64, 32), np.float32), cupy.asarray(B, np.float32), cupy.asarray(A, np.float32)
    matmul(X, dB)
    cupy.cuda.Device().synchronize()
    prod = cupy.cuda.Stream(non_blocking=True)
    with prod:
        hold(SPIN_US)
        X[...] = src                               # a device copy that lands after the spin

    class Produced:
        __cuda_array_interface__ = {**X.__cuda_array_interface__, "version": 3, "stream": prod.ptr}

    r = matmul(Produced(), dB)
    assert rel(r, A @ B) < TOL["float32"]


def _ref(A, B):
    return np.matmul(np.asarray(A, np.float64), np.asarray(B, np.float64))


def test_batches_run_as_one_launch(be):
    rng = np.random.default_rng(7)
    A, B = rng.uniform(-1, 1, (256, 32, 32)), rng.uniform(-1, 1, (256, 32, 32))
    dA, dB = cupy.asarray(A, np.float32), cupy.asarray(B, np.float32)
    assert plan(dA, dB).problem == Problem(32, 32, 32, batch=256)
    r = matmul(dA, dB)
    assert r.shape == (256, 32, 32) and rel(r, _ref(A, B)) < TOL["float32"]
    r = matmul(dA, dB[0])                                # broadcast B: stride 0
    assert rel(r, _ref(A, B[0])) < TOL["float32"]
    r = matmul(dA.swapaxes(1, 2), dB)                    # transposed stack in place
    assert rel(r, _ref(A.swapaxes(1, 2), B)) < TOL["float32"]
    a2, b3 = rng.uniform(-1, 1, (2, 1, 45, 33)), rng.uniform(-1, 1, (3, 33, 29))
    r = matmul(a2, b3)                                   # numpy, uneven broadcast: copied into stacks
    assert isinstance(r, np.ndarray) and r.shape == (2, 3, 45, 29) and rel(r, _ref(a2, b3)) < TOL["float32"]
    d = matmul(cupy.asarray(A[:5]), cupy.asarray(B[:5]))   # float64 batch (DMMA on sm_90)
    assert d.dtype == np.float64 and rel(d, _ref(A[:5], B[:5])) < TOL["float64"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batched_split_k_and_long_batches(be, dtype):
    """Split-K configs (both reductions) in a batch, and a batch longer than
    one launch's grid (65535 M tiles x products) in chunks."""
    rng = np.random.default_rng(8)
    p = Problem(45, 37, 3001, dtype, False, True, batch=3)
    splits = [c for c in be.candidates(p, 48) if c["KG"] > 1]
    cfgs = [next(c for c in splits if c["KR"] == kr) for kr in (0, 1)]
    A, B = rng.uniform(-1, 1, (3, 45, 3001)), rng.uniform(-1, 1, (3, 37, 3001))
    for cfg in cfgs:
        k = be.build(p, cfg)
        out = k.run(A.astype(dtype), B.astype(dtype))
        assert out.shape == (3, 45, 37) and rel(out, _ref(A, B.swapaxes(1, 2))) < TOL[dtype]
    long = Problem(16, 16, 16, dtype, batch=70000)
    k = be.build(long, be.default_config(long))
    assert k.d.grid[1] > 65535
    A, B = rng.uniform(-1, 1, (70000, 16, 16)), rng.uniform(-1, 1, (70000, 16, 16))
    assert rel(k.run(A.astype(dtype), B.astype(dtype)), _ref(A, B)) < TOL[dtype]


@pytest.mark.parametrize("ta, tb", list(itertools.product((False, True), repeat=2)))
def test_dmma_kernel_is_float64_accurate(be, ta, tb):
    """The FP64 tensor-core kernel (MMA = 1, sm_90+) against float64 on
    ragged shapes of every layout (K ragged: the pipelined loop's first
    stage holds the remainder): its first candidates, scalar copies,
    m16n8k8 (4 and 8 warps) and m16n8k4 (16 copies a thread), ST 2 to 4,
    split-K with both reductions, alpha/beta."""
    if int(be.arch()[3:].rstrip("a")) < 90:
        pytest.skip(f"the m16n8 f64 mma needs sm_90, the device is {be.arch()}")
    rng = np.random.default_rng(80 + ta * 2 + tb)
    # even sizes (16-byte copies need them) that no tile divides
    p = Problem(*(2 * int(rng.integers(lo, hi)) + 2 for lo, hi in ((65, 150), (35, 130), (25, 200))), "float64", ta, tb)
    skinny = Problem(37, 45, 3001, "float64", ta, tb)
    dm = [c for c in be.candidates(p, 24) if c["MMA"] == 1][:2]
    base = Config(BM=64, BN=64, BK=16, TM=2, TN=2, WM=32, WN=32, trans=1, VEC=1, PAD=2, DB=1, ST=2,
                  KG=1, KL=1, KR=0, MMA=1)
    jobs = [(p, c) for c in dm] + [(p, base), (p, base.replace(ST=4, VEC=2, BK=32)),
                                   (p, base.replace(BM=128, BN=64, WM=64, WN=32, VEC=2, ST=3)),    # 4 warps: k = 8
                                   (p, base.replace(BM=128, BN=128, WM=64, WN=32, VEC=2, ST=3)),   # 8 warps: k = 8
                                   (p, base.replace(BM=128, BN=128, WM=64, WN=32, VEC=2, ST=3, BK=32))]   # k = 4
    jobs += [(skinny, base.replace(BM=32, BN=32, WM=16, WN=16, KG=kg, KR=kr)) for kg, kr in ((16, 0), (32, 1))]
    assert len(dm) == 2 and all(c in be.space(q) for q, c in jobs)
    srcs = [codegen.source(q, c) for q, c in jobs]
    assert [("m16n8k8" in s, "m16n8k4" in s) for s in srcs[4:7]] == [(True, False), (True, False), (False, True)]
    # the pipelined main loop where a warp holds 4+ fragments (skinny's 16 x 16: the plain loop)
    assert [("fa[buf][i]" in s) for s in srcs] == [c["WM"] * c["WN"] >= 512 for _, c in jobs]
    be.precompile_many(jobs)
    for q, cfg in jobs:
        for alpha, beta in ((1.0, 0.0), (1.5, -0.5)):
            A = rng.uniform(-1, 1, q.stored_shapes[0])
            B = rng.uniform(-1, 1, q.stored_shapes[1])
            C0 = rng.uniform(-1, 1, (q.M, q.N))
            k = be.build(q, cfg)
            out = k.run(A, B, C0 if beta else None, alpha=alpha, beta=beta)
            ref = alpha * ((A.T if ta else A) @ (B.T if tb else B)) + beta * C0
            assert rel(out, ref) < TOL["float64"], (q.key, cfg.key)
            k.release()


def test_dmma_one_fragment_warps_under_load_are_float64_accurate(be):
    """Warp tiles of one m16n8 fragment, many blocks to an SM (2048^3): in
    the pipelined loop ptxas ordered a stage's first mma after the last one
    on the same accumulator by stall counts alone, and they read a stale
    accumulator (errors 0.1-1.2; dmma.PIPE_MIN_FRAGMENTS). Such tiles take
    the plain loop."""
    if int(be.arch()[3:].rstrip("a")) < 90:
        pytest.skip(f"the m16n8 f64 mma needs sm_90, the device is {be.arch()}")
    p = Problem(2048, 2048, 2048, "float64")
    rng = np.random.default_rng(11)
    A, B = rng.uniform(-1, 1, (2048, 2048)), rng.uniform(-1, 1, (2048, 2048))
    ref = A @ B
    base = Config(BM=16, BN=32, BK=32, TM=2, TN=2, WM=16, WN=8, trans=1, VEC=2, PAD=2, DB=1, ST=3,
                  KG=1, KL=1, KR=0, MMA=1)
    for cfg in (base, base.replace(BM=32), base.replace(ST=2)):
        assert cfg in be.space(p) and "fa[buf]" not in codegen.source(p, cfg)
        k = be.build(p, cfg)
        assert rel(k.run(A, B), ref) < TOL["float64"], cfg.key
        k.release()


def test_device_errors(be):
    dA = cupy.ones((8, 4), np.float16)
    with pytest.raises(TypeError, match="float16.*float32 and float64 only"):
        matmul(dA, cupy.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="core dimension"):
        matmul(cupy.ones((8, 4), np.float32), cupy.ones((5, 2), np.float32))
    if DEVICES > 1:
        with cupy.cuda.Device(1):
            other = cupy.ones((4, 2), np.float32)
        with pytest.raises(ValueError, match="on CUDA device 1, but this CUDA backend runs on device 0"):
            matmul(cupy.ones((8, 4), np.float32), other)


def _launch_cases(be):
    """(problem, config) pairs that take each launch path of CUDAKernel.enqueue:
    the default config of 256^3 (a K_G split), a split with the reduce kernel,
    batched splits (two strides) of both dtypes and a one-launch batch."""
    p = Problem(256, 256, 256)
    cases = [(p, be.default_config(p)),
             (p, next(c for c in be.candidates(p, 48) if c["KG"] > 1 and not c["KR"]))]
    for dtype in ("float32", "float64"):
        q = Problem(45, 37, 3001, dtype, False, True, batch=3)
        splits = [c for c in be.candidates(q, 48) if c["KG"] > 1]
        cases += [(q, next(c for c in splits if c["KR"] == kr)) for kr in (0, 1)]
    q = Problem(32, 32, 32, batch=256)
    return cases + [(q, be.default_config(q))]


def test_parameter_launches_equal_the_rawkernel_call(be):
    """The launches through prebuilt parameter arrays (launch.py:
    cupy.cuda.driver.launchKernel with the function's handle) give the bits
    the RawKernel call gives, for every launch path and changing alpha/beta;
    also from a thread that has not used CUDA before (its context is bound on
    its first launch) and on two streams (each with its own K_G workspace)."""
    import threading
    rng = np.random.default_rng(12)
    for p, cfg in _launch_cases(be):
        fast, raw = be.build(p, cfg), be.build(p, cfg)
        assert fast._launch_main.fast, "this CuPy has no driver.launchKernel or no function handle"
        for lk in (raw._launch_main, raw._launch_reduce):
            if lk is not None:
                lk.use_rawkernel()
        A = rng.uniform(-1, 1, p.stored_shapes[0]).astype(p.dtype)
        B = rng.uniform(-1, 1, p.stored_shapes[1]).astype(p.dtype)
        C0 = rng.uniform(-1, 1, p.out_shape).astype(p.dtype)
        for alpha, beta in ((1.0, 0.0), (1.5, -0.5), (1.5, -0.5), (-2.0, 0.0)):
            got, want = (k.run(A, B, C0 if beta else None, alpha=alpha, beta=beta) for k in (fast, raw))
            assert np.array_equal(got, want), (p.key, cfg.key, alpha, beta)
        Bm = B.astype(np.float64)
        ref = A.astype(np.float64) @ (Bm.swapaxes(-1, -2) if p.trans_b else Bm)
        assert rel(got, -2.0 * ref) < TOL[p.dtype]
        # a fresh thread, then two streams queued alternately without a sync
        dA, dB = cupy.asarray(A), cupy.asarray(B)
        outs = [cupy.full(p.out_shape, np.nan, p.dtype) for _ in range(3)]
        args = (dA.data.ptr, dB.data.ptr) + ((p.M * p.K, p.N * p.K) if p.batch > 1 else (0, 0))
        errors = []

        def on_a_new_thread(k=fast, a=args, out=outs[0].data.ptr, n=p.batch, errors=errors):
            try:
                k.enqueue(a[0], a[1], out, a[2], a[3], n, 1.0, 0.0)
                cupy.cuda.get_current_stream().synchronize()
            except Exception as e:   # noqa: BLE001 - reported below
                errors.append(e)
        t = threading.Thread(target=on_a_new_thread)
        t.start()
        t.join()
        assert not errors, errors
        streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
        for i in range(6):
            with streams[i % 2]:
                fast.enqueue(args[0], args[1], outs[1 + i % 2].data.ptr, args[2], args[3], p.batch, 1.0, 0.0)
        for s in streams:
            s.synchronize()
        if cfg["KG"] > 1:
            assert {s.ptr for s in streams} <= set(fast._ws)
        for o in outs:
            assert np.array_equal(cupy.asnumpy(o), raw.run(A, B)), p.key
        fast.release()
        raw.release()


@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_repeated_calls_take_the_express_lane(be, kind, monkeypatch):
    """The second call of a key launches through the express lane (check_call
    is not run again); results, out= in place and beta are the regular path's,
    on the framework's current stream."""
    import shadertune.front.matmul as front
    rng = np.random.default_rng(9)
    A, B = rng.uniform(-1, 1, (96, 64)), rng.uniform(-1, 1, (64, 80))
    C0 = rng.uniform(-1, 1, (96, 80))
    if kind == "cupy":
        dA, dB, dC = (cupy.asarray(x, np.float32) for x in (A, B, C0))
        host = cupy.asnumpy
    else:
        torch = torch_or_skip()
        dA, dB, dC = (torch.tensor(x, dtype=torch.float32, device="cuda") for x in (A, B, C0))
        host = lambda t: t.cpu().numpy()   # noqa: E731
    checked = []
    real = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: checked.append(1) or real(*a, **k))
    for _ in range(3):
        y = matmul(dA, dB, config="default")
        assert type(y) is type(dA)
        assert rel(host(y), A @ B) < TOL["float32"]
    o = dC.copy() if kind == "cupy" else dC.clone()
    assert matmul(dA, dB, o, config="default", alpha=2.0, beta=0.5) is o
    o2 = dC.copy() if kind == "cupy" else dC.clone()
    assert matmul(dA, dB, o2, config="default", alpha=2.0, beta=0.5) is o2
    assert rel(host(o2), 2 * A @ B + 0.5 * C0) < TOL["float32"]
    assert len(checked) == 2, "the repeated calls did not take the express lane"


# --- the steady path and graph capture (issue 38 items 1-3) ---------------------------

def _steady_cases(be):
    """(problem, config) of every kind of call the lane's launches handle: one
    launch, K_G split with the reduce kernel and with the in-launch reduction,
    the pre-split pack + GEMM and stream-K (sm_90), a batch."""
    p = Problem(130, 72, 1000)
    split = Problem(45, 37, 3001, "float32", False, True)
    cases = [(p, Config(BM=32, BN=16, BK=16, TM=4, TN=4, WM=32, WN=16, trans=1, VEC=4, PAD=4, DB=1, ST=0,
                        KG=1, KL=1, KR=0, MMA=0))]
    splits = [c for c in be.candidates(split, 48) if c["KG"] > 1]
    cases += [(split, next(c for c in splits if c["KR"] == kr)) for kr in (0, 1)]
    if be.arch() == "sm_90":
        ps = Config(AR=0, BK=32, BM=64, BN=64, DB=1, KG=1, KL=1, KR=0, MMA=4, PAD=4, ST=3, TM=4, TN=4, VEC=1,
                    WM=64, WN=64, trans=1, PS=1)
        cases += [(Problem(130, 70, 200), ps), (p, ps.replace(SK=1)),
                  (p, Config(AR=0, BK=32, BM=32, BN=64, DB=1, KG=1, KL=1, KR=0, MMA=3, PAD=4, ST=3, TM=4, TN=4,
                             VEC=4, WM=16, WN=16, trans=1, SK=1))]
    q = Problem(32, 32, 32, batch=64)
    cases.append((q, be.default_config(q)))
    for q, c in cases:
        assert be.space(q).why_invalid(c) is None, (q.key, c.key, be.space(q).why_invalid(c))
    return cases


def _device_operands(kind, p, seed):
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, p.stored_shapes[0]).astype(p.dtype)
    B = rng.uniform(-1, 1, p.stored_shapes[1]).astype(p.dtype)
    if kind == "torch":
        torch = torch_or_skip()
        dA, dB = torch.tensor(A, device="cuda"), torch.tensor(B, device="cuda")
        t = lambda x, f: x.transpose(-1, -2) if f else x     # noqa: E731
    else:
        dA, dB = cupy.asarray(A), cupy.asarray(B)
        t = lambda x, f: x.swapaxes(-1, -2) if f else x     # noqa: E731
    return A, B, t(dA, p.trans_a), t(dB, p.trans_b)


def _host(x):
    return x.cpu().numpy() if hasattr(x, "cpu") else cupy.asnumpy(x)


@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_the_lane_gives_the_regular_paths_bits(be, kind, monkeypatch):
    """The express lane's own launches (driver.SteadyLaunch: parameter arrays of
    its own) give the regular path's bits on every kind of call, with out= and
    beta, on the framework's current stream and on a second stream."""
    import shadertune.front.matmul as front
    checked = []
    real = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: checked.append(1) or real(*a, **k))
    for n, (p, cfg) in enumerate(_steady_cases(be)):
        A, B, dA, dB = _device_operands(kind, p, n)
        before = len(checked)
        first = _host(matmul(dA, dB, config=cfg.key))                   # regular (learned)
        again = [_host(matmul(dA, dB, config=cfg.key)) for _ in range(3)]   # the lane
        assert len(checked) == before + 1, (p.key, cfg.key)
        for r in again:
            assert np.array_equal(r, first), (p.key, cfg.key)
        a = np.swapaxes(A, -1, -2) if p.trans_a else A
        b = np.swapaxes(B, -1, -2) if p.trans_b else B
        assert rel(first, a.astype(np.float64) @ b) < TOL[p.dtype]
        if kind == "cupy":
            s = cupy.cuda.Stream(non_blocking=True)
            with s:
                other = matmul(dA, dB, config=cfg.key)
                other2 = matmul(dA, dB, config=cfg.key)
                s.synchronize()
            assert np.array_equal(cupy.asnumpy(other2), first) and np.array_equal(cupy.asnumpy(other), first)


def test_dlpack_objects_take_the_lane(be, monkeypatch):
    """CUDA DLPack objects (not CuPy arrays) repeat through the lane: imported
    every call (cupy.from_dlpack, no copy), the same bits as the regular path."""
    import shadertune.front.matmul as front

    class DL:
        def __init__(self, a):
            self._a, self.shape, self.dtype = a, a.shape, a.dtype

        def __dlpack__(self, stream=None, **kw):
            return self._a.__dlpack__(stream=stream, **kw)

        def __dlpack_device__(self):
            return self._a.__dlpack_device__()
    checked = []
    real = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: checked.append(1) or real(*a, **k))
    rng = np.random.default_rng(4)
    A, B = rng.uniform(-1, 1, (200, 96)).astype(np.float32), rng.uniform(-1, 1, (96, 72)).astype(np.float32)
    dA, dB = DL(cupy.asarray(A)), DL(cupy.asarray(B))
    outs = [cupy.asnumpy(matmul(dA, dB)) for _ in range(3)]
    assert len(checked) == 1 and all(np.array_equal(o, outs[0]) for o in outs)
    assert rel(outs[0], A.astype(np.float64) @ B) < TOL["float32"]


def test_matmul_in_torch_cuda_graph_replays_bit_equal(be):
    """matmul inside torch.cuda.graph (global capture mode: a host sync or a
    cudaMalloc outside PyTorch's pool would fail the capture; CuPy's pool is
    emptied first, so an allocation there would need one): captured through
    the express lane after a warm-up on a side stream, as PyTorch asks; every
    replay gives the eager call's bits, also after new inputs are copied into
    the captured ones, and after matmul's kernel cache dropped the kernel."""
    torch = torch_or_skip()
    import shadertune.front.matmul as front
    for n, (p, cfg) in enumerate(_steady_cases(be)):
        A, B, dA, dB = _device_operands("torch", p, 100 + n)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                eager = matmul(dA, dB, config=cfg.key)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        cupy.get_default_memory_pool().free_all_blocks()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            C = matmul(dA, dB, config=cfg.key)
        for _ in range(2):
            C.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            assert torch.equal(C, eager), (p.key, cfg.key)
        A2, B2, dA2, dB2 = _device_operands("torch", p, 200 + n)
        dA.copy_(dA2)
        dB.copy_(dB2)
        want = matmul(dA2, dB2, config=cfg.key)
        front.clear_cache()
        torch.cuda.empty_cache()
        cupy.get_default_memory_pool().free_all_blocks()
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(C, want), (p.key, cfg.key)
        del g


def test_matmul_in_a_cupy_stream_capture_replays_bit_equal(be):
    """matmul inside a CuPy stream capture (Stream.begin_capture): the graph
    replays the eager call's bits, also after matmul's kernel cache dropped the
    kernel and CuPy's pool freed its unused blocks (the captured workspace and
    counters are pinned with the kernel)."""
    import shadertune.front.matmul as front
    for n, (p, cfg) in enumerate(_steady_cases(be)):
        A, B, dA, dB = _device_operands("cupy", p, 300 + n)
        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            for _ in range(2):
                eager = matmul(dA, dB, config=cfg.key)
            s.synchronize()
            s.begin_capture()
            C = matmul(dA, dB, config=cfg.key)
            g = s.end_capture()
            for _ in range(2):
                C.fill(np.nan)
                g.launch(s)
                s.synchronize()
                assert bool((C == eager).all()), (p.key, cfg.key)
            front.clear_cache()
            cupy.get_default_memory_pool().free_all_blocks()
            C.fill(np.nan)
            g.launch(s)
            s.synchronize()
        assert bool((C == eager).all()), (p.key, cfg.key)


def test_call_timing_mode(be):
    """CUDAKernel.time's 'call' mode (a search's timing of problems where host time
    counts) gives one positive time per repeat and leaves the kernel's result."""
    p = Problem(256, 256, 256)
    k = be.build(p, be.default_config(p))
    assert k.call_timed
    rng = np.random.default_rng(2)
    A, B = rng.uniform(-1, 1, (256, 256)).astype(np.float32), rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    want = k.run(A, B)
    for mode in ("call", "held", "unheld", None):
        t = k.time(repeats=5, warmup=1, mode=mode)
        assert len(t) == 5 and all(x > 0 for x in t)
    assert np.array_equal(cupy.asnumpy(k._keep[2]), want)
    k.release()
