"""The CUDA call path on a GPU (issue 38): launches through prebuilt parameter
arrays and the express lane's own (driver.SteadyLaunch) under both launch means
(kernels, graphs) give the regular path's bits on every kind of call; DLPack
objects repeat through the lane; matmul inside torch.cuda.graph and a CuPy stream
capture replays bit-equal; the search's 'call' timing; every launch means of
scripts/bench-cuda-call gives the same bits and leaves the context sound.
Skipped cleanly without CuPy or without a device; the PyTorch tests also
without PyTorch. The first tests of the GPU batch (scripts/bench-cuda-batch)."""
import functools

import numpy as np
import pytest

from cuda_gpu import TOL, cupy, pytestmark, rel, torch_or_skip  # noqa: F401  (skips without a CUDA device)

from shadertune.backends.cuda import CUDABackend  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
import shadertune  # noqa: E402

# the front door on the CUDA backend
matmul = functools.partial(shadertune.matmul, backend="cuda")


@pytest.fixture(scope="module")
def be():
    """The backend, with the configs this module's tests build compiled first, in
    parallel (a GPU machine starts with an empty compile cache: one at a time,
    the compiles took most of these tests' time)."""
    b = CUDABackend()
    b.precompile_many(list(dict.fromkeys(_launch_cases(b) + _steady_cases(b))))
    return b


@pytest.fixture(params=["kernels", "graphs"])
def means(request, monkeypatch):
    """The express lane's launch means (SHADERTUNE_CUDA_LAUNCH); keys learned afresh."""
    import shadertune.front.matmul as front
    from shadertune.backends.cuda import graphs
    monkeypatch.setenv("SHADERTUNE_CUDA_LAUNCH", request.param)
    if request.param == "graphs":
        assert graphs.driver() is not None, "libcuda's graph entry points were not found"
    front.door("cuda").express.forget()
    yield request.param
    front.door("cuda").express.forget()


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
def test_the_lane_gives_the_regular_paths_bits(be, kind, means, monkeypatch, caplog):
    """The express lane's own launches (driver.SteadyLaunch: parameter arrays of
    its own; or executable graphs, one per set of addresses) give the regular
    path's bits on every kind of call, with out= and beta, on the framework's
    current stream and on a second stream; results kept alive in turn (other
    addresses each call: graphs updated) as well as dropped."""
    import shadertune.front.matmul as front
    checked = []
    real = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: checked.append(1) or real(*a, **k))
    for n, (p, cfg) in enumerate(_steady_cases(be)):
        A, B, dA, dB = _device_operands(kind, p, n)
        before = len(checked)
        first = _host(matmul(dA, dB, config=cfg.key))                   # regular (learned)
        again = [_host(matmul(dA, dB, config=cfg.key)) for _ in range(3)]   # the lane
        kept = [matmul(dA, dB, config=cfg.key) for _ in range(6)]          # six results alive: six addresses
        assert len(checked) == before + 1, (p.key, cfg.key)
        for r in again + [_host(x) for x in kept]:
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
    if means == "graphs":       # the graphs ran (not given back to kernels on the way)
        plans = [q for q in front.door("cuda").express._plans.values() if getattr(q.go, "kind", "enqueue") != "enqueue"]
        assert plans and all(q.go.graph is not None for q in plans), [q.kernel.config.key for q in plans]
        assert "CUDA graphs given up" not in caplog.text, caplog.text


class DL:
    """A CUDA DLPack object that is neither a CuPy array nor a torch tensor (a JAX
    array, say), over either; the streams its __dlpack__ was asked for."""

    def __init__(self, a):
        self._a, self.shape = a, tuple(a.shape)
        self.dtype = str(a.dtype).removeprefix("torch.")
        self.streams = []

    def __dlpack__(self, stream=None, **kw):
        self.streams.append(stream)
        return self._a.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_objects_take_the_lane(be, monkeypatch):
    """CUDA DLPack objects (not CuPy arrays) repeat through the lane: their capsules
    read every call (dlpack_view, no copy), the same bits as the regular path."""
    import shadertune.front.matmul as front
    checked = []
    real = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: checked.append(1) or real(*a, **k))
    rng = np.random.default_rng(4)
    A, B = rng.uniform(-1, 1, (200, 96)).astype(np.float32), rng.uniform(-1, 1, (96, 72)).astype(np.float32)
    dA, dB = DL(cupy.asarray(A)), DL(cupy.asarray(B))
    outs = [cupy.asnumpy(matmul(dA, dB)) for _ in range(3)]
    assert len(checked) == 1 and all(np.array_equal(o, outs[0]) for o in outs)
    assert rel(outs[0], A.astype(np.float64) @ B) < TOL["float32"]


@pytest.mark.parametrize("producer", ["cupy", "torch"])
def test_the_dlpack_lane_reads_capsules_in_place(be, producer, means, monkeypatch):
    """On the lane a DLPack call imports nothing (cupy.from_dlpack is not called):
    each producer's __dlpack__ is asked every call with the stream cupy.from_dlpack
    hands it (1 for CuPy's null stream, a stream's handle on it), its capsule read
    (dlpack_view) and dropped after the launch (a CuPy producer's deleter gives
    back the reference its export took: the array's count returns), the regular
    path's bits, a transposed operand and a second stream included."""
    import sys
    import shadertune.front.matmul as front
    from shadertune.backends.cuda.dlpack_view import consumer_stream
    p = Problem(200, 72, 96, "float32", False, True)
    A, B, dA, dB = _device_operands(producer, p, 8)
    checked = []
    real = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: checked.append(1) or real(*a, **k))
    lA, lB = DL(dA), DL(dB)
    refs = sys.getrefcount(dA), sys.getrefcount(dB)
    want = cupy.asnumpy(matmul(lA, lB))                          # the regular path: the key learned
    assert rel(want, A.astype(np.float64) @ B.T) < TOL["float32"]
    for s in (None, cupy.cuda.Stream(non_blocking=True)):       # (the key does not hold the stream)
        with (s if s is not None else cupy.cuda.get_current_stream()):
            lA.streams.clear()
            with monkeypatch.context() as m:
                m.setattr(cupy, "from_dlpack", lambda x: pytest.fail("imported on the lane"))
                outs = [cupy.asnumpy(matmul(lA, lB)) for _ in range(3)]
            assert lA.streams == [s.ptr if s is not None else 1] * 3 == [consumer_stream(cupy)] * 3
        assert all(np.array_equal(o, want) for o in outs)
    assert len(checked) == 1
    if producer == "cupy":                       # every export's deleter ran
        import gc
        gc.collect()
        assert (sys.getrefcount(dA), sys.getrefcount(dB)) == refs


def test_matmul_in_torch_cuda_graph_replays_bit_equal(be, means):
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


def test_matmul_in_a_cupy_stream_capture_replays_bit_equal(be, means):
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


def test_every_launch_means_gives_the_same_bits_and_leaves_the_context_sound(be):
    """scripts/bench-cuda-call's launch means (the RawKernel call, per-thread and
    per-key parameter arrays, graphs with and without node updates, a captured
    graph, cuLaunchKernel through ctypes and cuda-python), each called as the
    benchmark calls it: the RawKernel call's bits, and no sticky error after it
    (the first H100 run's ctypes means handed the driver freed parameter arrays
    and ended in an illegal address)."""
    from script_module import load_script
    bc = load_script("bench-cuda-call")
    rows = bc.section_launch(cupy, lambda m: None, calls=3, rounds=1)
    for r in rows:
        assert "broken_after" not in r, r["broken_after"]
        for name in bc.NAMES:
            eq = r["equal"][name]
            if name in ("ctypes", "cuda_python") and str(eq).startswith("not run"):
                continue                    # no libcuda by that name, or no cuda-python: said
            assert eq is True, (r["what"], name, eq)
