"""The steady state of a CUDA call key (issue 38 items 1, 3, 4), on the
host-memory stand-in for CuPy (tests/fake_cupy.py): the lane's own launches
(driver.SteadyLaunch) are enqueue()'s, launch for launch; config='auto' asks
the store again on a short clock, at once after a commit of this process and
when the default store's environment changes; a call made while its stream
captures a graph is recorded without a sync, on fresh buffers that the graph
keeps (pinned with the kernel), and the graph replays it; CUDA DLPack objects
repeat through the lane; the search's 'call' timing times what a call enqueues."""
import sys

import numpy as np
import pytest

import fake_cupy
import shadertune
import shadertune.front.matmul as front
from shadertune.backends import express_rules
from shadertune.backends.cuda import CUDABackend, capture, driver, tuning
from shadertune.backends.cuda.device import DEFAULT_LIMITS as L
from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.core.result import Result

from test_cuda_call_host import _ref, fake_kernel
from test_cuda_call_sequence import CASES, _roles, _sequence
from test_host_overhead import cp  # noqa: F401  (fixture: the CuPy stand-in)


class Backend(CUDABackend):
    """The CUDA backend building CUDAKernels over the stand-in's functions."""

    def __init__(self):
        super().__init__()
        self.built = []

    def build(self, problem, config):
        k = fake_kernel(sys.modules["cupy"], problem, config)
        k.built_for = config
        self.built.append(k)
        return k


class Clock:
    """the express lanes' time module (backends/express_rules), moved on by hand."""

    def __init__(self):
        self.t = 1000.0

    def monotonic(self):
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(express_rules, "time", c)     # the lanes' clock
    return c


def operands(cp, rng, p):
    A = rng.uniform(-1, 1, p.stored_shapes[0]).astype(p.dtype)
    B = rng.uniform(-1, 1, p.stored_shapes[1]).astype(p.dtype)
    dA, dB = cp.asarray(A), cp.asarray(B)
    return A, B, (dA.T if p.trans_a else dA), (dB.T if p.trans_b else dB)


# --- the lane's launches are enqueue()'s ----------------------------------------------

@pytest.mark.parametrize("p, cfg", CASES)
def test_the_steady_launch_enqueues_what_enqueue_does(cp, rng, p, cfg):
    """For each kind of call (one launch, K_G split with the reduce kernel or the
    in-launch reduction, pre-split pack + GEMM, a batch, stream-K with and without
    the pack): the launches, grids, constants and buffers of kernel.launcher()'s
    calls equal enqueue()'s, on the stream's first call (the lane hands it to
    enqueue, which makes the kept buffers) and after it, for two alpha/beta pairs."""
    A, B, _, _ = operands(cp, rng, p)
    k = fake_kernel(cp, p, cfg)
    dA, dB = cp.asarray(A), cp.asarray(B)
    C = cp.empty(p.out_shape, p.dtype)
    sa, sb = (p.M * p.K, p.K * p.N) if p.batch > 1 else (0, 0)
    go = k.launcher(sa, sb, p.batch)
    assert go is not None
    st = cp.cuda.get_current_stream()
    role = lambda: _roles(k, dA.data.ptr, dB.data.ptr, C.data.ptr)   # noqa: E731
    for n, (alpha, beta) in enumerate([(1.0, 0.0), (1.0, 0.0), (2.0, 0.5)]):
        if beta:
            C[...] = 1.0
        with fake_cupy.recording() as log:
            go(dA.data.ptr, dB.data.ptr, C.data.ptr, alpha, beta, st)
        steady = _sequence(log, role())
        got = np.array(C)
        if beta:
            C[...] = 1.0
        with fake_cupy.recording() as log:
            k.enqueue(dA.data.ptr, dB.data.ptr, C.data.ptr, sa, sb, p.batch, alpha, beta, stream=st)
        queued = _sequence(log, role())
        if n == 0:      # the stream's first call made the kept buffers (enqueue's own, through the lane)
            steady = [e for e in steady if e[0] != "alloc"]
        assert steady == queued and steady and not [e for e in queued if e[0] == "alloc"]
        np.testing.assert_array_equal(got, np.array(C))
        np.testing.assert_allclose(got, alpha * _ref(p, A, B) + beta, rtol=1e-4, atol=1e-4)
    assert all(c["via"] == "launchKernel" for f in (k._main, k._reduce, k._pack) if f for c in f.calls)


SPLIT_BATCH = (Problem(45, 37, 3001, "float64", False, True, batch=3),      # enqueue's chunks, K_G partials
               Config(BM=32, BN=32, BK=16, TM=2, TN=2, WM=16, WN=16, trans=1, VEC=1, PAD=2, DB=1, ST=3,
                      KG=8, KL=1, KR=0, MMA=1))


@pytest.mark.parametrize("p, cfg", CASES + [SPLIT_BATCH])
def test_the_workspace_the_call_ranking_charges_is_the_calls(cp, rng, monkeypatch, p, cfg):
    """driver.call_workspace, which the untuned pick's call ranking charges where it is
    above tuning.WORKSPACE_CHARGED (tuning.call_cycles), is the workspace a call takes:
    the steady launch's, the buffer enqueue keeps; above WORKSPACE_KEEP the call goes
    through enqueue (allocating it each time)."""
    A, B, _, _ = operands(cp, rng, p)
    n = driver.call_workspace(p, cfg, L["num_sms"])
    sa, sb = (p.M * p.K, p.K * p.N) if p.batch > 1 else (0, 0)
    chunks = p.batch > 1 and cfg["KG"] > 1          # enqueue's way whatever its size
    for keep in (n * p.itemsize, n * p.itemsize - 1)[:1 + bool(n)]:
        monkeypatch.setattr(driver, "WORKSPACE_KEEP", keep)
        monkeypatch.setattr(tuning, "WORKSPACE_CHARGED", keep)
        k = fake_kernel(cp, p, cfg)
        go = k.launcher(sa, sb, p.batch)
        assert (go.kind == "enqueue") == (chunks or keep < n * p.itemsize) and go.need == (0 if chunks else n)
        k.run(A, B)
        assert [w[2] for w in k._ws.values()] == ([n] if n and keep >= n * p.itemsize else [])
        extra = tuning.call_cycles(p, cfg, L) - tuning.model_cycles(p, cfg, L)
        assert extra == pytest.approx(tuning.CALL_WORKSPACE if keep < n * p.itemsize else 0)


def test_a_kernel_keeps_more_workspace_than_the_ranking_charges(cp):
    """A workspace between the ranking's charge (8 MiB: the partials' traffic the device
    model undercounts) and the driver's keep (32 MiB) is kept: its calls take the steady
    launch, as the search timed them, and the untuned ranking still charges it."""
    p = Problem(900, 700, 1300)
    cfg = Config(BM=64, BN=128, BK=16, TM=4, TN=4, WM=64, WN=128, trans=1, VEC=4, PAD=4, DB=1, ST=4,
                 KG=4, KL=1, KR=0, MMA=4, AR=1, PS=0, SK=0)       # the device pick: 10 MB of partials
    n = driver.call_workspace(p, cfg, L["num_sms"]) * p.itemsize
    assert tuning.WORKSPACE_CHARGED < n <= driver.WORKSPACE_KEEP
    assert fake_kernel(cp, p, cfg).launcher(0, 0, 1).kind == "split"
    assert tuning.call_cycles(p, cfg, L) - tuning.model_cycles(p, cfg, L) == tuning.CALL_WORKSPACE


# --- auto: the store asked on a clock, at once after a commit here ---------------------

def test_auto_asks_again_on_the_clock_after_a_commit_and_when_the_default_store_moves(
        cp, rng, checks, clock, tmp_path, monkeypatch):
    be = Backend()
    p = Problem(16, 8, 16)
    first, second, third = [c for c in be.candidates(p, 8) if c != be.default_config(p)][:3]
    db = tmp_path / "t.sqlite"
    monkeypatch.setattr(be, "device", lambda: type("D", (), {"key": "x"})())
    with Store(db) as s:
        s.put(Result("cuda", "x", p, first, "ok", times_ms=[3.0], error=0.0), be.template_hash())
    asked = []
    d = front.door(be)
    real = d.auto_config
    monkeypatch.setattr(d, "auto_config", lambda *a: asked.append(1) or real(*a))
    A, B = cp.asarray(rng.uniform(-1, 1, (16, 16)).astype("float32")), cp.asarray(rng.uniform(-1, 1, (16, 8)).astype("float32"))
    for _ in range(4):
        shadertune.matmul(A, B, backend=be, config="auto", db=str(db))
    assert len(checks) == 1 and asked == [] and be.built[-1].built_for == first    # learned; no store read
    clock.t += express_rules.RECHECK_S
    shadertune.matmul(A, B, backend=be, config="auto", db=str(db))
    assert len(asked) == 1 and len(checks) == 1                                    # the clock: asked once
    # another process's write (no commit counted here): seen once the clock runs out
    import subprocess
    code = ("import sys, json; from shadertune.db import Store; from shadertune.core.result import Result; "
            "from shadertune.core.problem import Problem; from shadertune.core.config import Config; "
            "s = Store(sys.argv[1]); s.put(Result('cuda', 'x', Problem(16, 8, 16), Config(json.loads(sys.argv[2])), "
            "'ok', times_ms=[2.0], error=0.0), sys.argv[3]); s.close()")
    subprocess.run([sys.executable, "-c", code, str(db), second.key, be.template_hash()], check=True)
    shadertune.matmul(A, B, backend=be, config="auto", db=str(db))
    assert len(checks) == 1 and be.built[-1].built_for == first                    # within the clock
    clock.t += express_rules.RECHECK_S
    shadertune.matmul(A, B, backend=be, config="auto", db=str(db))
    assert len(checks) == 2 and be.built[-1].built_for == second                   # seen
    # a commit of this process: the next call asks at once
    with Store(db) as s:
        s.put(Result("cuda", "x", p, third, "ok", times_ms=[1.0], error=0.0), be.template_hash())
    shadertune.matmul(A, B, backend=be, config="auto", db=str(db))
    assert len(checks) == 3 and be.built[-1].built_for == third
    # the default store: SHADERTUNE_DB moved is seen at once, without the clock
    monkeypatch.setenv("SHADERTUNE_DB", str(db))
    for _ in range(2):
        shadertune.matmul(A, B, backend=be, config="auto")
    assert len(checks) == 4 and be.built[-1].built_for == third
    monkeypatch.setenv("SHADERTUNE_DB", str(tmp_path / "none.sqlite"))
    shadertune.matmul(A, B, backend=be, config="auto")
    assert len(checks) == 5 and be.built[-1].built_for == be.default_config(p)


def test_a_config_named_outright_never_reads_the_store_on_the_lane(cp, rng, checks, clock, monkeypatch):
    be = Backend()
    d = front.door(be)
    monkeypatch.setattr(d, "auto_config", lambda *a: pytest.fail("a 'default' call asked the selection"))
    A = cp.asarray(rng.uniform(-1, 1, (16, 16)).astype("float32"))
    for _ in range(3):
        shadertune.matmul(A, A, backend=be, config="default")
        clock.t += express_rules.RECHECK_S             # the clock only marks the kernel used in the cache
    assert len(checks) == 1


# --- graph capture ------------------------------------------------------------------------

@pytest.mark.parametrize("p, cfg", [CASES[0], CASES[2], CASES[3], CASES[5]])
def test_a_call_in_a_stream_capture_is_recorded_and_replays_after_the_cache_dropped_it(cp, rng, checks, p, cfg):
    """matmul on a stream that captures a graph (CuPy's Stream.begin_capture): no
    sync (the stand-in refuses one, as the driver does), the launches recorded,
    not run; the workspace and counters they use are fresh (not the stream's kept
    ones) and pinned with the kernel, whose release then keeps them (a call of one
    launch uses no buffer of the kernel's: nothing to pin, and the lane does not
    ask whether its stream captures); the graph replays the product into the
    captured result, bit-equal to the call made outside the capture, after the
    cache released the kernel."""
    be = Backend()
    A, B, dA, dB = operands(cp, rng, p)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        want = np.array(shadertune.matmul(dA, dB, backend=be, config=cfg.key))    # learned
        np.array(shadertune.matmul(dA, dB, backend=be, config=cfg.key))           # kept buffers made
        (k,) = be.built
        kept_ws = {v[0] for v in k._ws.values()} | {v[0] for v in k._cnt.values()}
        pinned = capture.pinned()
        s.begin_capture()
        with fake_cupy.recording() as log:
            r = shadertune.matmul(dA, dB, backend=be, config=cfg.key)
        g = s.end_capture()
    assert len(checks) == 1                                    # the lane, in the capture too
    launched = [e for e in log if e[0] == "captured"]
    assert launched and not [e for e in log if e[0] == "launch"]
    used = {int(x) for e in launched for x in e[6] if type(x) is int}
    assert not used & kept_ws                                 # fresh buffers, not the stream's kept ones
    buffers = cfg["KG"] > 1 or cfg.get("PS", 0) or cfg.get("SK", 0)
    assert k._pinned == bool(buffers) and (capture.pinned() > pinned) == bool(buffers)
    r[...] = np.nan
    front.clear_cache()                                       # the cache drops and releases it
    assert k.released and k._main is not None                 # its module stays (CUDAKernel.release)
    import gc
    gc.collect()
    g.launch(s)
    np.testing.assert_array_equal(np.array(r), want)
    np.testing.assert_allclose(want, _ref(p, A, B), rtol=1e-4, atol=1e-4)


def test_a_first_call_in_a_capture_takes_the_regular_path_without_a_sync(cp, rng, checks):
    be = Backend()
    p, cfg = CASES[2]
    A, B, dA, dB = operands(cp, rng, p)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        r = shadertune.matmul(dA, dB, backend=be, config=cfg.key)
        g = s.end_capture()
    assert len(checks) == 1 and be.built[-1]._pinned
    g.launch(s)
    np.testing.assert_allclose(np.array(r), _ref(p, A, B), rtol=1e-4, atol=1e-4)


# --- DLPack objects ---------------------------------------------------------------------

class DLPackArray:
    """A CUDA DLPack object that is not a CuPy array (a JAX array's interface)."""

    def __init__(self, a):
        self._a, self.shape, self.dtype = a, a.shape, a.dtype

    def __dlpack__(self, stream=None, **kw):
        return self._a.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_objects_repeat_through_the_lane(cp, rng, checks):
    be = Backend()
    A, B = rng.uniform(-1, 1, (24, 16)).astype("float32"), rng.uniform(-1, 1, (16, 8)).astype("float32")
    dA, dB = DLPackArray(cp.asarray(A)), DLPackArray(cp.asarray(B))
    for n in range(3):
        r = shadertune.matmul(dA, dB, backend=be, config="default")
        assert isinstance(r, cp.ndarray)
        np.testing.assert_allclose(np.asarray(r), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    assert len(checks) == 1
    A2 = rng.uniform(-1, 1, (24, 16)).astype("float32")
    r = shadertune.matmul(DLPackArray(cp.asarray(A2)), dB, backend=be, config="default")
    np.testing.assert_allclose(np.asarray(r), A2.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    assert len(checks) == 1


# --- the search's 'call' timing ------------------------------------------------------------

@pytest.mark.parametrize("p, cfg", [CASES[0], CASES[1], CASES[3]])
def test_call_timing_times_what_a_call_enqueues(cp, rng, p, cfg):
    """mode='call': per repeat, an event, the result allocated as the call
    allocates it, the call's launches, an event, and a sync; no spin kernel."""
    A, B, _, _ = operands(cp, rng, p)
    k = fake_kernel(cp, p, cfg)
    k.run(A, B)
    with fake_cupy.recording() as held_log:
        k.time(repeats=2, warmup=0, mode="held")
    syncs = []
    real = fake_cupy.Event.synchronize
    fake_cupy.Event.synchronize = lambda self: syncs.append(self.stream_ptr) or real(self)
    try:
        with fake_cupy.recording() as log:
            times = k.time(repeats=3, warmup=1, mode="call")
    finally:
        fake_cupy.Event.synchronize = real
    assert times == [1.0] * 3 and len(syncs) == 3
    assert not [e for e in log if e[0] == "launch" and e[1] == "st_hold"]
    marks = [i for i, e in enumerate(log) if e[0] == "event"]
    repeats = [log[marks[i] + 1:marks[i + 1]] for i in range(0, len(marks), 2)]
    hmarks = [i for i, e in enumerate(held_log) if e[0] == "event"]
    held = held_log[hmarks[0] + 1:hmarks[1]]
    for rep in repeats:
        assert rep[0][0] == "alloc" and rep[0][1] == p.M * p.N * p.batch * p.itemsize     # the result
        launches = [e[:6] for e in rep[1:] if e[0] == "launch"]
        assert launches == [e[:6] for e in held if e[0] == "launch"] and launches


def test_which_problems_a_search_times_as_calls():
    be = CUDABackend()
    assert be.call_timed(Problem(64, 64, 64)) and be.call_timed(Problem(900, 700, 1300))
    assert be.call_timed(Problem(64, 64, 64, batch=512))
    assert not be.call_timed(Problem(4096, 4096, 4096)) and not be.call_timed(Problem(2500, 2500, 2500, "float64"))


# --- a call that races the cache's release --------------------------------------------------

@pytest.mark.parametrize("p, cfg", CASES)
def test_launches_on_a_kernel_released_meanwhile_stay_valid(cp, rng, p, cfg):
    """The lane checks `released` before it takes the run lock, and clear_cache()
    releases without it: a call can launch a kernel released just before. Its
    launches must still be valid: the module and parameter arrays stay (every
    launch below goes through arrays a live _Params owns: the `cp` fixture's
    check), and the buffers it needs are its own for that call (nothing is kept
    on a released kernel, so a later release cannot free them under it)."""
    A, B, _, _ = operands(cp, rng, p)
    k = fake_kernel(cp, p, cfg)
    dA, dB = cp.asarray(A), cp.asarray(B)
    sa, sb = (p.M * p.K, p.K * p.N) if p.batch > 1 else (0, 0)
    go = k.launcher(sa, sb, p.batch)
    st = cp.cuda.get_current_stream()
    C = cp.empty(p.out_shape, p.dtype)
    go(dA.data.ptr, dB.data.ptr, C.data.ptr, 1.0, 0.0, st)
    k.release()
    assert k.released and not k._ws and not k._cnt
    for _ in range(2):
        C[...] = np.nan
        go(dA.data.ptr, dB.data.ptr, C.data.ptr, 1.0, 0.0, st)
        np.testing.assert_allclose(np.array(C), _ref(p, A, B), rtol=1e-4, atol=1e-4)
    assert not k._ws and not k._cnt                 # nothing kept on it


def test_a_dict_of_knobs_changed_between_calls_is_a_new_key(cp, rng, checks):
    """The lane keeps the last dict's key while that same dict holds the same items
    (api._lane_config): a dict changed in place is a first call again, run with
    its new knobs; an equal dict (another object) is the same key."""
    be = Backend()
    p = Problem(16, 8, 16)
    base = be.default_config(p).to_dict()
    other = next(c for c in be.candidates(p, 8) if c != be.default_config(p)).to_dict()
    A = cp.asarray(rng.uniform(-1, 1, (16, 16)).astype("float32"))
    B = cp.asarray(rng.uniform(-1, 1, (16, 8)).astype("float32"))
    knobs = dict(base)
    for _ in range(3):
        shadertune.matmul(A, B, backend=be, config=knobs)
    assert len(checks) == 1 and be.built[-1].built_for == be.default_config(p)
    knobs.clear()
    knobs.update(other)
    shadertune.matmul(A, B, backend=be, config=knobs)
    assert len(checks) == 2 and be.built[-1].built_for.to_dict() == other
    shadertune.matmul(A, B, backend=be, config=dict(base))      # the first key, learned: the lane
    assert len(checks) == 2
    knobs["KG"] = np.array([1, 2])                               # a value that will not compare
    with pytest.raises((TypeError, ValueError)):
        shadertune.matmul(A, B, backend=be, config=knobs)
