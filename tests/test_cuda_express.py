"""matmul's express lane on the CUDA backend (backends/cuda/express.py), on the
host-memory stand-in for CuPy (tests/fake_cupy.py): a repeated call on device
arrays launches what the regular path launched for the same key, without the
front door's analysis; any call the key does not describe, and any call where
what the regular path would decide has changed (device, kernel cache, auto's
selection, fork), takes the regular path."""
import numpy as np
import pytest

import fake_cupy
import shadertune
from shadertune.front import matmul as front
from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.core.result import Result

from test_cuda_call_host import close, dev
from test_host_overhead import be, cp, entered  # noqa: F401  (fixtures: the CuPy stand-in, a fresh
#                                                 backend, the device switches)


def launches(be):
    return [c for k in be.built for c in k.calls]


def mm(be, A, B, out=None, **kw):
    return shadertune.matmul(A, B, out, backend=be, **{"config": "default", **kw})


def test_a_repeated_call_takes_the_lane_and_computes_the_same(cp, rng, be, checks):
    A, B = rng.uniform(-1, 1, (33, 20)), rng.uniform(-1, 1, (20, 17))
    dA, dB = dev(cp, A), dev(cp, B)
    r1 = mm(be, dA, dB)
    assert len(checks) == 1
    r2 = mm(be, dA, dB, alpha=2)                  # alpha is the call's own, an int too
    r3 = mm(be, dA, dB, alpha=-0.5)
    assert len(checks) == 1 and len(launches(be)) == 3 and len(be.built) == 1
    assert isinstance(r2, cp.ndarray) and r2 is not r1 and r2.data.ptr != r1.data.ptr
    close(r1, A.astype(np.float32) @ B.astype(np.float32))
    close(r2, 2 * (A.astype(np.float32) @ B.astype(np.float32)), 1e-4)
    close(r3, -0.5 * (A.astype(np.float32) @ B.astype(np.float32)), 1e-4)
    k = launches(be)[-1]
    assert k[:2] == (dA.data.ptr, dB.data.ptr)    # read in place, as the regular path does
    # new operands of the same layout: their own addresses
    A2 = dev(cp, rng.uniform(-1, 1, (33, 20)))
    close(mm(be, A2, dB), np.asarray(A2) @ B.astype(np.float32))
    assert len(checks) == 1 and launches(be)[-1][0] == A2.data.ptr


def test_the_lane_launches_on_the_callers_current_stream(cp, rng, be, checks):
    A = dev(cp, rng.uniform(-1, 1, (16, 16)))
    mm(be, A, A)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        mm(be, A, A)
    assert len(checks) == 1 and launches(be)[-1][6] == s.ptr
    mm(be, A, A)
    assert launches(be)[-1][6] == 0


def test_batches_and_transposed_views_repeat_their_launch(cp, rng, be, checks):
    A, B = rng.uniform(-1, 1, (6, 9, 5)), rng.uniform(-1, 1, (5, 7))
    dA, dB = dev(cp, A), dev(cp, B)
    Bt = dev(cp, B.T.copy())
    for _ in range(2):
        close(mm(be, dA, dB), A.astype(np.float32) @ B.astype(np.float32))
        close(mm(be, dA, Bt.T), A.astype(np.float32) @ B.astype(np.float32))
    assert len(checks) == 2
    first, second = launches(be)[0], launches(be)[2]
    assert first[3:6] == second[3:6] == (45, 0, 6)       # A's stride, B broadcast, 6 products


@pytest.mark.parametrize("change", ["shape", "dtype", "transposed", "misaligned", "out", "beta",
                                    "dict config", "other config", "store", "mixed kinds", "numpy"])
def test_a_call_the_key_does_not_describe_takes_the_regular_path(cp, rng, be, checks, change, tmp_path):
    A = dev(cp, rng.uniform(-1, 1, (16, 16)))
    mm(be, A, A)
    mm(be, A, A)
    assert len(checks) == 1
    big = dev(cp, rng.uniform(-1, 1, (17 * 16 + 1,)))
    args, kw = {
        "shape": ((dev(cp, np.ones((8, 16))), A), {}),
        "dtype": ((dev(cp, np.ones((16, 16)), np.float64), dev(cp, np.ones((16, 16)), np.float64)), {}),
        "transposed": ((A.T, A), {}),
        "misaligned": ((big[1:257].reshape(16, 16), A), {}),      # 4 bytes past an aligned base
        "out": ((A, A), {"out": cp.empty((16, 16), np.float32)}),
        "beta": ((A, A), {"out": cp.zeros((16, 16), np.float32), "beta": 1.0}),
        "dict config": ((A, A), {"config": {"ST": 0}}),
        "other config": ((A, A), {"config": "ffma"}),
        "store": ((A, A), {"db": str(tmp_path / "none.sqlite")}),
        "mixed kinds": ((np.asarray(A), A), {}),
        "numpy": ((np.asarray(A), np.asarray(A)), {}),
    }[change]
    r = mm(be, *args, **kw)
    assert len(checks) == 2
    x, y = (np.asarray(a, np.float64) for a in args)
    close(r, x @ y, 1e-4)                 # beta's out is zeros


def test_bool_inputs_are_never_learned(cp, be, checks):
    T = dev(cp, np.eye(4, dtype=bool), bool)
    for _ in range(3):
        r = mm(be, T, T)
        assert r.dtype == np.bool_ and np.array_equal(np.asarray(r), np.eye(4, dtype=bool))
    assert len(checks) == 3


def test_a_dropped_kernel_is_not_launched(cp, rng, be, checks):
    A = dev(cp, rng.uniform(-1, 1, (16, 16)))
    mm(be, A, A)
    d = front.door(be)
    (k,) = be.built
    d.kernels.clear()                    # released (as the cache does to what it drops)
    mm(be, A, A)
    assert len(checks) == 2 and len(be.built) == 2 and not k.calls[1:]
    mm(be, A, A)
    assert len(checks) == 2 and len(be.built[1].calls) == 2


def test_another_current_device_takes_the_regular_path(cp, rng, be, checks, monkeypatch, entered):
    A = dev(cp, rng.uniform(-1, 1, (8, 8)))
    mm(be, A, A)
    monkeypatch.setattr(fake_cupy._Runtime, "getDevice", staticmethod(lambda: 1))
    mm(be, A, A)
    assert len(checks) == 2 and entered == [0]      # switched to the backend's device


def test_auto_follows_the_store(cp, rng, be, checks, tmp_path, monkeypatch):
    p = Problem(16, 8, 16)
    first, second = [c for c in be.candidates(p, 8) if c != be.default_config(p)][:2]
    db = str(tmp_path / "t.sqlite")
    monkeypatch.setattr(be, "device", lambda: type("D", (), {"key": "x"})())
    with Store(db) as s:
        s.put(Result("cuda", "x", p, first, "ok", times_ms=[2.0], error=0.0), be.template_hash())
    A, B = dev(cp, rng.uniform(-1, 1, (16, 16))), dev(cp, rng.uniform(-1, 1, (16, 8)))
    for _ in range(3):
        mm(be, A, B, config="auto", db=db)
    assert len(checks) == 1 and be.built[-1].built_for == first and len(be.built[-1].calls) == 3
    with Store(db) as s:                 # a faster result: auto's selection changes
        s.put(Result("cuda", "x", p, second, "ok", times_ms=[1.0], error=0.0), be.template_hash())
    mm(be, A, B, config="auto", db=db)
    assert len(checks) == 2 and be.built[-1].built_for == second
    mm(be, A, B, config="auto", db=db)
    assert len(checks) == 2 and len(be.built[-1].calls) == 2


def test_knob_configs_and_store_objects_take_the_lane(cp, rng, be, checks, tmp_path, monkeypatch):
    """A tuned config passed as knobs (a dict, a Config) and a store passed as an
    object repeat through the lane like a config name: after one regular call,
    the same launch, no analysis. A dict is keyed by its items (another order is
    a first call again) and one whose values cannot be hashed stays regular."""
    p = Problem(16, 8, 16)
    other = next(c for c in be.candidates(p, 8) if c != be.default_config(p))
    A, B = dev(cp, rng.uniform(-1, 1, (16, 16))), dev(cp, rng.uniform(-1, 1, (16, 8)))
    ref = np.asarray(A, np.float64) @ np.asarray(B, np.float64)
    for n, config in enumerate([other.to_dict(), other, dict(reversed(list(other.items())))], 1):
        for _ in range(3):
            close(mm(be, A, B, config=config), ref, 1e-4)
        assert len(checks) == n and be.built[-1].built_for == other
    odd = {**other.to_dict(), "ST": [other["ST"]]}             # not a knob value: matmul refuses it
    for _ in range(2):
        with pytest.raises(TypeError, match="must be a JSON scalar"):
            mm(be, A, B, config=odd)
    assert len(checks) == 5
    monkeypatch.setattr(be, "device", lambda: type("D", (), {"key": "x"})())
    with Store(tmp_path / "t.sqlite") as s:
        s.put(Result("cuda", "x", p, other, "ok", times_ms=[2.0], error=0.0), be.template_hash())
        for _ in range(3):
            close(mm(be, A, B, config="auto", db=s), ref, 1e-4)
        assert len(checks) == 6 and be.built[-1].built_for == other


def test_the_lane_keeps_a_bounded_number_of_plans(cp, rng, be, checks, monkeypatch):
    from shadertune.backends import express_rules
    monkeypatch.setattr(express_rules, "KEEP", 3)          # every lane's bound
    arrays = [dev(cp, rng.uniform(-1, 1, (8, n))) for n in range(1, 6)]
    B = dev(cp, rng.uniform(-1, 1, (8, 8)))
    for a in arrays:
        mm(be, B, a)
    assert len(front.door(be).express._plans) == 3
    mm(be, B, arrays[-1])                 # kept
    mm(be, B, arrays[0])                  # dropped: the regular path again
    assert len(checks) == 6


def test_out_in_place_repeats_and_beta_reads_it(cp, rng, be, checks):
    A, B = rng.uniform(-1, 1, (16, 8)), rng.uniform(-1, 1, (8, 12))
    dA, dB = dev(cp, A), dev(cp, B)
    ref = A.astype(np.float32).astype(np.float64) @ B.astype(np.float32)
    o = cp.empty((16, 12), np.float32)
    assert mm(be, dA, dB, o) is o
    C0 = rng.uniform(-1, 1, (16, 12))
    for alpha, beta in [(1.0, 0.0), (2.0, 0.5), (-1, 3)]:
        o2 = dev(cp, C0)
        assert mm(be, dA, dB, o2, alpha=alpha, beta=beta) is o2
        assert launches(be)[-1][2] == o2.data.ptr
        close(o2, alpha * ref + beta * C0.astype(np.float32), 1e-4)
    assert len(checks) == 1


def test_an_out_that_overlaps_an_input_takes_the_regular_path(cp, rng, be, checks):
    S = dev(cp, rng.uniform(-1, 1, (16, 16)))
    ref = np.asarray(S).astype(np.float64) @ np.asarray(S)
    mm(be, S, S, cp.empty((16, 16), np.float32))     # learned: a separate out
    mm(be, S, S, S)                                  # the same key, out is A and B this time
    assert len(checks) == 2 and launches(be)[-1][2] != S.data.ptr    # through a temporary
    close(S, ref, 1e-4)


def test_an_out_of_another_kind_takes_the_regular_path(cp, rng, be, checks):
    A = dev(cp, rng.uniform(-1, 1, (8, 8)))
    h = np.empty((8, 8), np.float32)
    for _ in range(2):
        assert mm(be, A, A, h) is h
    assert len(checks) == 2
    close(h, np.asarray(A).astype(np.float64) @ np.asarray(A), 1e-4)
