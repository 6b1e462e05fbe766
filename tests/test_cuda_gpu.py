"""CUDA backend on a GPU: correctness on shapes the tiles do not divide,
both precisions, all transposes, split-K, alpha/beta, bad input. Skipped
cleanly without CuPy or without a device."""
import functools
import itertools

import numpy as np
import pytest

from cuda_gpu import TOL, cupy, pytestmark  # noqa: F401  (skips without a CUDA device)

from shadertune.backends.cuda import CUDABackend  # noqa: E402
from shadertune.backends.cuda.driver import CUDAKernel  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.errors import InvalidConfig  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
import shadertune  # noqa: E402

# the front door on the CUDA backend
matmul = functools.partial(shadertune.matmul, backend="cuda")
from test_streamk import stream_k_jobs  # noqa: E402


@pytest.fixture(scope="module")
def be():
    return CUDABackend()


def _stored(p, rng):
    sa = (p.K, p.M) if p.trans_a else (p.M, p.K)
    sb = (p.N, p.K) if p.trans_b else (p.K, p.N)
    return rng.uniform(-1, 1, sa).astype(p.dtype), rng.uniform(-1, 1, sb).astype(p.dtype)


def _run(be, p, cfg, A, B, C0=None, alpha=1.0, beta=0.0):
    k = be.build(p, cfg)
    try:
        return k.run(A, B, C0, alpha=alpha, beta=beta)
    finally:
        k.release()


def _check(be, p, cfg, rng, alpha=1.0, beta=0.0):
    A, B = _stored(p, rng)
    C0 = rng.uniform(-1, 1, (p.M, p.N)).astype(p.dtype) if beta else None
    out = _run(be, p, cfg, A, B, C0, alpha, beta)
    a = A.T if p.trans_a else A
    b = B.T if p.trans_b else B
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if beta:
        ref += beta * C0
    assert np.isfinite(out).all(), f"unwritten/NaN output for {p.key} {cfg.key}"
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < TOL[p.dtype], (p.key, cfg.key, err)


def _split(be, p, kr=0):
    """A valid config with both K_G and K_L > 1 and the given K_G reduction."""
    return next(c for c in be.candidates(p, 48) if c["KG"] > 1 and c["KL"] > 1 and c["KR"] == kr)


@pytest.mark.parametrize("dtype, ta, tb", list(itertools.product(("float32", "float64"), (False, True), (False, True))))
def test_odd_shapes_all_transposes(be, dtype, ta, tb):
    rng = np.random.default_rng(hash((dtype, ta, tb)) % 2**32)
    p = Problem(int(rng.integers(130, 300)), int(rng.integers(70, 260)), int(rng.integers(50, 400)), dtype, ta, tb)
    cfgs = [be.default_config(p)] + be.candidates(p, 6)[1:3]
    cfgs.append(be.default_config(p).replace(DB=0, ST=0, trans=0, PAD=0) if be.default_config(p).replace(DB=0, ST=0, trans=0, PAD=0) in be.space(p) else cfgs[0])
    be.precompile_many([(p, c) for c in cfgs])     # NVRTC in parallel; the builds below hit the cache
    for cfg in cfgs:
        _check(be, p, cfg, rng, alpha=1.5, beta=-0.5)


@pytest.mark.parametrize("dtype, ta, tb", [("float32", False, False), ("float32", True, True),
                                           ("float64", False, True), ("float32", False, True)])
@pytest.mark.parametrize("kr", [0, 1])
def test_split_k(be, dtype, ta, tb, kr):
    rng = np.random.default_rng(7)
    p = Problem(37, 45, 3001, dtype, ta, tb)
    _check(be, p, _split(be, p, kr), rng)
    _check(be, p, _split(be, p, kr), rng, alpha=0.5, beta=2.0)


@pytest.mark.parametrize("kg, kl, kr", [(256, 4, 0), (256, 4, 1), (128, 8, 1), (64, 8, 0)])
def test_finest_splits_and_in_launch_reduction(be, kg, kl, kr):
    """ICA's shape at the K_G the balanced split allows; the in-launch
    reduction (KR = 1) applies beta * C exactly once, resets its counters
    (a second launch on the same buffers is right too) and is deterministic
    (the sum runs in a fixed z order): bitwise-equal results run to run."""
    p = Problem(32, 32, 60000, trans_b=True)
    cfg = Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=kg, KL=kl, KR=kr)
    assert cfg in be.space(p)
    rng = np.random.default_rng(kg + kr)
    _check(be, p, cfg, rng)
    _check(be, p, cfg, rng, alpha=-1.5, beta=0.75)
    A, B = _stored(p, rng)
    C0 = rng.uniform(-1, 1, (p.M, p.N)).astype(np.float32)
    k = be.build(p, cfg)
    outs = [k.run(A, B, C0, alpha=2.0, beta=-1.0) for _ in range(3)]
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
    dC = k.prepare(A, B, C0, alpha=2.0, beta=-1.0)
    k.launch()                      # C1 = 2 AB - C0
    k.launch()                      # C2 = 2 AB - C1 = C0: beta once per launch, counters reset
    k._sync()
    np.testing.assert_allclose(cupy.asnumpy(dC), C0, atol=2e-2)
    k.release()


def test_vector_loads_with_ragged_edges(be):
    rng = np.random.default_rng(3)
    p = Problem(1003, 516, 1024)     # K, N multiples of 4 (float4 loads), M and N not of the tile
    cfg = be.default_config(p)
    assert cfg["VEC"] == 4
    _check(be, p, cfg, rng)


def test_matmul_api_numpy_cupy_batch(be):
    rng = np.random.default_rng(11)
    A = rng.standard_normal((2, 33, 17)).astype(np.float32)
    B = rng.standard_normal((17, 9)).astype(np.float32)
    np.testing.assert_allclose(matmul(A, B), A @ B, rtol=1e-4, atol=1e-4)
    dA, dB = cupy.asarray(A[0]), cupy.asarray(B)
    r = matmul(dA, dB)       # CuPy in, CuPy out
    assert isinstance(r, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(r), A[0] @ B, rtol=1e-4, atol=1e-4)
    v = rng.standard_normal(17)
    r = matmul(A[0].astype(np.float64), v)
    assert r.dtype == np.float64 and r.shape == (33,)
    np.testing.assert_allclose(r, A[0].astype(np.float64) @ v, rtol=1e-12)
    out = np.ones((33, 9), np.float32)
    matmul(A[0], B, alpha=2.0, beta=1.0, out=out)
    np.testing.assert_allclose(out, 2 * A[0] @ B + 1, rtol=1e-4, atol=1e-4)


def test_bad_input_is_numpy_style(be):
    with pytest.raises(ValueError):
        matmul(np.ones((3, 4)), np.ones((5, 6)))
    with pytest.raises(TypeError):
        matmul(np.ones((3, 4), complex), np.ones((4, 2)))
    p = Problem(64, 64, 64)
    k = be.build(p, be.default_config(p))
    with pytest.raises(ValueError):
        k.run(np.ones((64, 63), np.float32), np.ones((64, 64), np.float32))


def test_unlaunchable_config_is_invalid_and_does_not_poison_the_next(be):
    from shadertune.errors import BuildError
    p = Problem(256, 256, 256)
    bad = Config(BM=256, BN=256, BK=8, TM=4, TN=4, WM=16, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=1, KL=1, KR=0)
    with pytest.raises(InvalidConfig):
        be.build(p, bad)                      # the space refuses it (2048 threads)
    from shadertune.backends.cuda import codegen
    with pytest.raises((InvalidConfig, BuildError)):   # bypass the space: still no crash
        CUDAKernel(p, bad, codegen.source(p, bad), be.arch(), be.limits())
    k = be.build(p, be.default_config(p))
    k._launch_main.shared_mem = 4 << 20     # a launch the device refuses (the bytes each launch asks for)
    with pytest.raises(InvalidConfig):
        k.run(np.ones((256, 256), np.float32), np.ones((256, 256), np.float32))
    _check(be, p, be.default_config(p), np.random.default_rng(0))   # the context is fine


def test_timing_and_cublas_baseline(be):
    p = Problem(512, 512, 512, trans_b=True)
    k = be.build(p, be.default_config(p))
    rng = np.random.default_rng(5)
    k.run(*_stored(p, rng))
    t = k.time(repeats=5, warmup=1)
    assert len(t) == 5 and all(x > 0 for x in t)
    tb = be.cublas_time(p, repeats=5)
    assert len(tb) == 5 and all(x > 0 for x in tb)
    info = be.device()
    assert info.backend == "cuda" and info.limits["num_sms"] > 0


@pytest.mark.parametrize("p, rz", [(Problem(2560, 16, 2560), 1), (Problem(2560, 16, 2560, trans_a=True), 1),
                                   (Problem(300, 130, 3000), 1), (Problem(203, 75, 2000, trans_b=True), 4)])
def test_reduce_kernel_shapes(be, p, rz):
    """The second K_G kernel with one thread per element (RZ = 1, large M * N:
    DeepBench, at its measured winner's config) and with RZ lanes of z, ragged tails."""
    from shadertune.backends.cuda.codegen import reduce_shape
    if p.N == 16:
        cfg = Config(BM=128, BN=16, BK=16, TM=4, TN=8, WM=64, WN=16, trans=1, VEC=4, PAD=4, DB=1, KG=32, KL=1, KR=0)
        assert cfg in be.space(p)
    else:
        cfg = next(c for c in be.candidates(p, 48) if c["KG"] >= 4 and c["KR"] == 0)
    assert reduce_shape(p, cfg)[1] == rz
    rng = np.random.default_rng(p.M)
    _check(be, p, cfg, rng)
    _check(be, p, cfg, rng, alpha=0.5, beta=2.0)


def test_search_cli_tunes_cuda_and_auto_selection_uses_it(be, tmp_path):
    """`python -m shadertune.search --backend cuda` on the shared core: verified results in
    the store and report, and matmul(config='auto') picks the stored best."""
    import json
    from shadertune.selection.chain import select_config
    db, rep = tmp_path / "t.sqlite", tmp_path / "r.json"
    from subproc import run_python
    p = run_python(None, "-m", "shadertune.search", "--backend", "cuda", "--m", "96", "--n", "80",
                   "--k", "72", "--strategy", "phased", "--budget", "6", "--repeats", "3",
                   "--db", db, "--report", rep, "-q", timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(rep.read_text())
    prob = doc["problems"][0]
    assert doc["backend"] == "cuda" and prob["evaluated"] <= 6 and prob["best"] is not None
    assert prob["best"]["error"] <= 1e-5
    assert all(r["status"] != "wrong" for r in prob["results"])
    problem = Problem(96, 80, 72)
    cfg, how = select_config(be, problem, db=db)
    # the stored best; with the held clock tiny kernels can tie on the median (events
    # tick in 0.5 us), and then any of the tied configs is the best
    assert how == "exact"
    timed = {Config(r["config"]): r["median_ms"] for r in prob["results"] if r["status"] == "ok"}
    assert timed[cfg] == prob["best"]["median_ms"]
    rng = np.random.default_rng(5)
    A, B = _stored(problem, rng)
    out = matmul(A, B, config="auto", db=db)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5


@pytest.mark.parametrize("dtype, ta, tb", [("float32", False, False), ("float32", True, False),
                                           ("float64", True, True), ("float32", False, True)])
def test_cp_async_pipeline(be, dtype, ta, tb):
    """cp.async pipelines 2 and 3 deep on ragged shapes (zero-filled edges,
    short last stages), with alpha/beta, split-K (both reductions) and K_L,
    on every layout where an operand is copied untransposed (NT: trans = 0)."""
    rng = np.random.default_rng(ta * 2 + tb)
    jobs = pipeline_jobs(be, Problem(int(rng.integers(130, 300)), int(rng.integers(70, 260)),
                                     int(rng.integers(50, 400)), dtype, ta, tb))
    be.precompile_many(jobs)               # NVRTC in parallel; the builds below hit the cache
    for prob, cfg in jobs:
        _check(be, prob, cfg, rng, alpha=1.5, beta=-0.5)


def pipeline_jobs(be, p):
    """(problem, config) pairs of the FFMA kernel (MMA = 0; the tensor-core
    kernels always pipeline) with ST = 2 and 3: two tile shapes on `p`, and
    on a skinny K-split problem one per (ST, K_G reduction) with K_L > 1."""
    skinny = Problem(37, 45, 3001, p.dtype, p.trans_a, p.trans_b)
    trans = 0 if (p.trans_a, p.trans_b) == (False, True) else 1
    jobs, kinds = [], set()
    for prob, n in ((p, 2), (skinny, 16)):
        sp = be.space(prob)
        for c in [c for c in be.candidates(prob, 4 * n) if c["MMA"] == 0][:n]:
            for st in (2, 3):
                t = c.replace(ST=st, trans=trans)
                kind = (prob is p, st, t["KR"], c if prob is p else None)
                if t in sp and (prob is p or (t["KG"] > 1 and t["KL"] > 1)) and kind not in kinds:
                    kinds.add(kind)
                    jobs.append((prob, t))
    got = {k[:3] for k in kinds}
    assert {st for on_p, st, _ in got if on_p} == {2, 3}, got
    assert {(False, 2, 0), (False, 2, 1)} <= got and any(not on_p and st == 3 for on_p, st, _ in got), got
    return jobs


def test_held_timing(be):
    """Timing queues the launches behind a spin kernel by default (hold.py),
    and hold_stream=False does not: either way one positive time per repeat,
    for ours and for cuBLAS, and the timed launches leave the same
    (deterministic) result."""
    p = Problem(256, 16, 2560)
    rng = np.random.default_rng(3)
    A, B = _stored(p, rng)
    k = be.build(p, be.default_config(p))
    dC = k.prepare(A, B)
    k.launch()
    out = cupy.asnumpy(dC)
    for held in (True, False):
        t = k.time(repeats=7, warmup=1, hold_stream=held)
        assert len(t) == 7 and all(x > 0 for x in t)
        np.testing.assert_array_equal(cupy.asnumpy(dC), out)
        c = be.cublas_time(p, repeats=5, hold_stream=held)
        assert len(c) == 5 and all(x > 0 for x in c)
    k.release()


@pytest.mark.parametrize("ta, tb", list(itertools.product((False, True), repeat=2)))
def test_tensor_core_kernel(be, ta, tb):
    """The 3xTF32 kernel (MMA = 3) within float32 tolerance of float64 on
    ragged shapes of every layout: its first candidates, scalar (VEC = 1)
    copies, ST 2 and 4, split-K with both reductions, alpha/beta."""
    rng = np.random.default_rng(40 + ta * 2 + tb)
    p = Problem(int(rng.integers(130, 300)), int(rng.integers(70, 260)), int(rng.integers(50, 400)), "float32", ta, tb)
    skinny = Problem(37, 45, 3001, "float32", ta, tb)
    mma = [c for c in be.candidates(p, 24) if c["MMA"] == 3][:2]
    base = Config(BM=64, BN=32, BK=16, TM=4, TN=4, WM=32, WN=16, trans=1, VEC=1, PAD=4, DB=1, ST=2,
                  KG=1, KL=1, KR=0, MMA=3)
    jobs = [(p, c) for c in mma] + [(p, base), (p, base.replace(ST=4))]
    jobs += [(skinny, base.replace(BM=32, BN=32, WM=16, WN=16, KG=kg, KR=kr)) for kg, kr in ((16, 0), (32, 1))]
    assert len(mma) == 2 and all(c in be.space(q) for q, c in jobs)
    be.precompile_many(jobs)
    for q, cfg in jobs:
        _check(be, q, cfg, rng, alpha=1.5, beta=-0.5)
        _check(be, q, cfg, rng)


@pytest.mark.parametrize("ta, tb", list(itertools.product((False, True), repeat=2)))
def test_warpgroup_mma_kernel(be, ta, tb):
    """The wgmma kernel (MMA = 4, sm_90 only) within float32 tolerance of
    float64 on ragged shapes of every layout: its first candidates, scalar
    (VEC = 1) copies, k-depths 8 and 16, ST 2 to 4, warpgroup tiles 16..128
    wide, four warpgroups, split-K with both reductions, alpha/beta."""
    if be.arch() != "sm_90":
        pytest.skip(f"wgmma needs sm_90, the device is {be.arch()}")
    rng = np.random.default_rng(60 + ta * 2 + tb)
    p = Problem(int(rng.integers(130, 300)), int(rng.integers(70, 260)), int(rng.integers(50, 400)), "float32", ta, tb)
    skinny = Problem(70, 45, 3001, "float32", ta, tb)
    wg = [c for c in be.candidates(p, 24) if c["MMA"] == 4][:2]
    base = Config(BM=64, BN=64, BK=16, TM=4, TN=4, WM=64, WN=64, trans=1, VEC=1, PAD=4, DB=1, ST=2,
                  KG=1, KL=1, KR=0, MMA=4)
    jobs = [(p, c) for c in wg] + [(p, base), (p, base.replace(ST=4, BK=8, WN=16)),
                                   (p, base.replace(BM=128, BN=128, WN=64, ST=3)),
                                   (p, base.replace(BM=128, BN=128, WN=128)), (p, base.replace(WN=32))]
    jobs += [(skinny, base.replace(WN=16, KG=kg, KR=kr)) for kg, kr in ((16, 0), (32, 1))]
    assert len(wg) == 2 and all(c in be.space(q) for q, c in jobs)
    be.precompile_many(jobs)
    for q, cfg in jobs:
        _check(be, q, cfg, rng, alpha=1.5, beta=-0.5)
        _check(be, q, cfg, rng)


@pytest.mark.parametrize("ta, tb", list(itertools.product((False, True), repeat=2)))
def test_warpgroup_mma_register_a(be, ta, tb):
    """The wgmma kernel with A from registers (AR = 1) within float32
    tolerance of float64 on ragged shapes of every layout, and bit-equal to
    the same config with A from shared memory: the tensor cores multiply the
    same split values in the same order. k-depths 8 to 32, ST 2 to 4,
    warpgroup tiles 16..128 wide, four warpgroups, split-K with both
    reductions, alpha/beta."""
    if be.arch() != "sm_90":
        pytest.skip(f"wgmma needs sm_90, the device is {be.arch()}")
    rng = np.random.default_rng(80 + ta * 2 + tb)
    p = Problem(int(rng.integers(130, 300)), int(rng.integers(70, 260)), int(rng.integers(50, 400)), "float32", ta, tb)
    skinny = Problem(70, 45, 3001, "float32", ta, tb)
    base = Config(BM=64, BN=64, BK=16, TM=4, TN=4, WM=64, WN=64, trans=1, VEC=1, PAD=4, DB=1, ST=2,
                  KG=1, KL=1, KR=0, MMA=4, AR=1)
    whole = Problem(256, 192, 320, "float32", ta, tb)    # VEC = 4 fits every layout
    jobs = [(p, base), (p, base.replace(ST=4, BK=8, WN=16)), (p, base.replace(BM=128, BN=128, WN=128)),
            (p, base.replace(BK=32, ST=3)), (whole, base.replace(BM=128, BN=128, WN=128, BK=32, ST=3, VEC=4)),
            (whole, base.replace(BM=128, BN=128, WN=128, ST=4, VEC=4))]
    jobs += [(skinny, base.replace(WN=16, KG=kg, KR=kr)) for kg, kr in ((16, 0), (32, 1))]
    assert all(c in be.space(q) for q, c in jobs), [(q.key, c, be.space(q).why_invalid(c)) for q, c in jobs]
    twins = [(q, c.replace(AR=0)) for q, c in jobs if c.replace(AR=0) in be.space(q)]
    assert len(twins) >= 5
    be.precompile_many(jobs + twins)
    for q, cfg in jobs:
        _check(be, q, cfg, rng, alpha=1.5, beta=-0.5)
        _check(be, q, cfg, rng)
    for q, shared in twins:
        A, B = _stored(q, rng)
        got, want = _run(be, q, shared.replace(AR=1), A, B), _run(be, q, shared, A, B)
        assert np.array_equal(got, want), (q.key, shared.key, float(np.abs(got - want).max()))


@pytest.mark.parametrize("ta, tb", list(itertools.product((False, True), repeat=2)))
def test_warpgroup_mma_presplit(be, ta, tb):
    """The wgmma kernel on pre-split, packed operands (PS = 1, 2: the pack
    kernel, bulk copies on mbarriers) within float32 tolerance of float64 on
    ragged shapes of every layout, and bit-equal to a tile with the split in
    the main loop (PS = 0, AR = 0) whose chains are as long: the same BK for
    PS = 1, twice the BK for PS = 2 (which adds its sums every two stages).
    k-depths 8 to 32, ST 2 to 4, warpgroup tiles 16..128 wide, a narrow-N
    tile, odd and even numbers of stages (PS = 2 ends on a lone stage or a
    pair), K = 0, alpha/beta."""
    if be.arch() != "sm_90":
        pytest.skip(f"wgmma needs sm_90, the device is {be.arch()}")
    rng = np.random.default_rng(100 + ta * 2 + tb)
    p = Problem(int(rng.integers(130, 300)), int(rng.integers(70, 260)), int(rng.integers(50, 400)), "float32", ta, tb)
    base = Config(BM=64, BN=64, BK=16, TM=4, TN=4, WM=64, WN=64, trans=1, VEC=1, PAD=4, DB=1, ST=2,
                  KG=1, KL=1, KR=0, MMA=4, AR=0, PS=1)
    jobs = []
    for ps in (1, 2):
        b = base.replace(PS=ps)
        jobs += [(p, b), (p, b.replace(ST=4, BK=8, WN=16)), (p, b.replace(BM=128, BN=128, WN=128, ST=3)),
                 (p, b.replace(BK=32, ST=3)), (Problem(200, 77, 48, "float32", ta, tb), b.replace(BN=80, WN=80)),
                 (Problem(200, 77, 64, "float32", ta, tb), b.replace(BN=80, WN=80, BK=32))]
    assert all(c in be.space(q) for q, c in jobs), [(q.key, c, be.space(q).why_invalid(c)) for q, c in jobs]
    # the twin: PS = 0 with the same chains (PS = 2: stages of twice the k-depth)
    twins = [(q, c, c.replace(PS=0, BK=c["BK"] * c["PS"])) for q, c in jobs if c["BK"] * c["PS"] <= 32]
    twins = [(q, c, t) for q, c, t in twins if t in be.space(q)]     # (128 x 128 x 32 needs ST = 2)
    assert len(twins) >= 9 and {c["PS"] for _, c, _ in twins} == {1, 2}
    be.precompile_many(jobs + [(q, t) for q, _, t in twins])
    for q, cfg in jobs:
        _check(be, q, cfg, rng, alpha=1.5, beta=-0.5)
        _check(be, q, cfg, rng)
    for q, cfg, twin in twins:
        A, B = _stored(q, rng)
        got, want = _run(be, q, cfg, A, B), _run(be, q, twin, A, B)
        assert np.array_equal(got, want), (q.key, cfg.key, twin.key, float(np.abs(got - want).max()))
    empty = Problem(70, 45, 0, "float32", ta, tb)        # nothing to pack: C = beta * C
    _check(be, empty, base.replace(PS=2, BK=8), rng, alpha=1.5, beta=-0.5)


def test_narrow_n_tiles(be):
    """A tile of N rounded up to 8 (N = 77 -> 80) in the tensor-core kernels:
    wgmma with A from shared memory and from registers, split-K with both
    reductions, mma.sync; and 128 x 80 x 16 with VEC = 4, whose copies end in
    a partial round over the threads."""
    if be.arch() != "sm_90":
        pytest.skip(f"wgmma needs sm_90, the device is {be.arch()}")
    rng = np.random.default_rng(90)
    wg = Config(BM=64, BN=80, BK=32, TM=4, TN=4, WM=64, WN=80, trans=1, VEC=1, PAD=4, DB=1, ST=3,
                KG=4, KL=1, KR=0, MMA=4, AR=0)
    jobs = []
    for ta, tb in itertools.product((False, True), repeat=2):
        p = Problem(300, 77, 517, "float32", ta, tb)
        jobs += [(p, wg), (p, wg.replace(AR=1, BK=16)), (p, wg.replace(KR=1, KG=8)),
                 (p, wg.replace(MMA=3, WM=16, BK=8, AR=0))]
    p80 = Problem(1000, 80, 1000)
    jobs += [(p80, wg.replace(BM=128, BK=16, VEC=4, KG=1, AR=ar)) for ar in (0, 1)]
    assert all(c in be.space(q) for q, c in jobs), [(q.key, c, be.space(q).why_invalid(c)) for q, c in jobs]
    be.precompile_many(jobs)
    for q, cfg in jobs:
        _check(be, q, cfg, rng, alpha=1.5, beta=-0.5)
        _check(be, q, cfg, rng)


def test_tiny_float32_problems_have_configs(be):
    """M, N <= 16 (no 16 x 16 FFMA warp tile exists): the space is not empty
    and the default config is right."""
    rng = np.random.default_rng(9)
    for p in (Problem(5, 7, 3), Problem(16, 16, 40, "float32", False, True)):
        cfg = be.default_config(p)
        _check(be, p, cfg, rng, alpha=2.0, beta=1.0)


def test_default_strategy_tunes_into_the_store_that_auto_reads(be, tmp_path):
    """tune() with the CUDA default strategy (model): the untuned default is timed
    first, then the model's top batch (compiled in parallel), then the local search;
    nothing wrong is ever best, and config='auto' picks the stored best."""
    from shadertune.db import Store
    from shadertune.search import Budget, tune
    from shadertune.selection.chain import select_config
    p = Problem(300, 77, 500)                      # odd N: no tile divides it, VEC = 1 only
    labels = []
    with Store(tmp_path / "t.sqlite") as s:
        e = tune(be, p, budget=Budget(max_evals=40), store=s, repeats=3, on_phase=labels.append)
        assert be.default_strategy == "model" and labels[0] == "model: top 24"
        assert "local search" in labels and e["evaluated"] == 40
        assert e["results"][0]["config"] == be.default_config(p).to_dict()
        assert e["best"] is not None and e["best"]["error"] <= 1e-5
        assert not [r for r in e["results"] if r["status"] == "wrong"]
        cfg, how = select_config(be, p, s)
        timed = {Config(r["config"]): r["median_ms"] for r in e["results"] if r["status"] == "ok"}
        assert how == "exact" and timed[cfg] == e["best"]["median_ms"]      # (ties: any of them)


@pytest.mark.parametrize("ta, tb", list(itertools.product((False, True), repeat=2)))
def test_stream_k_every_family(be, ta, tb):
    """Stream-K (SK = 1, 2: a persistent grid of one or two blocks an SM, tiles
    split across blocks and summed by the last to finish) in the mma.sync,
    wgmma (A from shared memory, from registers, pre-split PS = 1, 2) and DMMA
    kernels: within tolerance of float64 on ragged shapes of every layout, with
    alpha/beta; launched three more times on the same buffers, the same bits
    (the tiles' counters reset, the partials summed in a fixed order); the
    3xTF32 ones bit-equal to the emulator's Hopper model with the same segments
    (emulate._streamk_tiles) on a smaller problem."""
    if be.arch() != "sm_90":
        pytest.skip(f"the wgmma and DMMA kernels need sm_90, the device is {be.arch()}")
    from shadertune.backends.cuda import emulate
    rng = np.random.default_rng(200 + ta * 2 + tb)
    jobs = stream_k_jobs(be.space, ta, tb)
    small = Problem(150, 100, 800, "float32", ta, tb)
    emulated = [cfg for _, cfg in jobs if cfg["MMA"] in (3, 4) and cfg in be.space(small)]
    assert len(emulated) >= 4
    be.precompile_many(jobs + [(small, cfg) for cfg in emulated])
    # the emulator's results (a few seconds each on the host) in other processes while the GPU checks run
    inputs = [(cfg,) + _stored(small, rng) for cfg in emulated]
    with _emulators(len(inputs)) as ex:
        want = [ex.submit(emulate.emulate_3xtf32, A.T if ta else A, B.T if tb else B,
                          **emulate.for_config(small, cfg, be.limits()["num_sms"])) for cfg, A, B in inputs]
        for q, cfg in jobs:
            _check(be, q, cfg, rng, alpha=1.5, beta=-0.5)
            A, B = _stored(q, rng)
            k = be.build(q, cfg)
            try:
                first = k.run(A, B)
                for _ in range(3):
                    k.launch()
                k._sync()
                again = cupy.asnumpy(k._keep[2])
            finally:
                k.release()
            assert np.array_equal(first, again), (q.key, cfg.key, float(np.abs(first - again).max()))
        for (cfg, A, B), w in zip(inputs, want):
            assert "streamk" in emulate.for_config(small, cfg, be.limits()["num_sms"])
            got, w = _run(be, small, cfg, A, B), w.result()
            assert np.array_equal(got, w), (small.key, cfg.key, float(np.abs(got - w).max()))


def _emulators(n: int):
    """Processes for the emulator (numpy; spawned: nothing CUDA is inherited)."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor
    return ProcessPoolExecutor(max_workers=max(1, min(n, (os.cpu_count() or 2) - 1)),
                               mp_context=multiprocessing.get_context("spawn"))


def test_stream_k_through_matmul_on_two_streams(be):
    """An SK config passed to matmul on CuPy arrays: the regular path, the express
    lane, and a second stream (its own workspace and counters) give the same
    result, within tolerance of float64."""
    if be.arch() != "sm_90":
        pytest.skip(f"wgmma needs sm_90, the device is {be.arch()}")
    import shadertune
    p = Problem(700, 900, 1100)
    cfg = Config(AR=0, BK=32, BM=128, BN=128, DB=1, KG=1, KL=1, KR=0, MMA=4, PAD=4, ST=3, TM=4, TN=4, VEC=1,
                 WM=64, WN=128, trans=1, PS=2, SK=1)
    assert cfg in be.space(p)
    rs = cupy.random.RandomState(3)
    A, B = rs.uniform(-1, 1, (p.M, p.K)).astype("float32"), rs.uniform(-1, 1, (p.K, p.N)).astype("float32")
    ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
    outs = [shadertune.matmul(A, B, backend="cuda", config=cfg.to_dict()) for _ in range(3)]
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        outs.append(shadertune.matmul(A, B, backend="cuda", config=cfg.to_dict()))
        s.synchronize()
    for out in outs:
        err = float(cupy.linalg.norm(out.astype(cupy.float64) - ref) / cupy.linalg.norm(ref))
        assert err < TOL["float32"], err
        assert bool((out == outs[0]).all())
