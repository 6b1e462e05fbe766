"""The repeated-call fast paths of shadertune.matmul on the CUDA backend (issue 16
item 4: host cost per call), on the host-memory stand-in for CuPy
(tests/fake_cupy.py): what is kept between calls (check_call's per-signature
analysis, the Layout, the config, 'auto's selection, the run lock, the launch
scalars) is never reused for a call that differs in what it was derived from,
and every check that depends on the call's values still runs every call."""
import dataclasses
import os
import sys

import numpy as np
import pytest

import fake_cupy
import shadertune
from shadertune.call import inputs
from shadertune.core.frozen import quick_init
from shadertune.errors import ContextError
from shadertune.backends.cuda import api, call
from shadertune.core.problem import Problem

from test_cuda_call_host import Backend, close, dev, fake_kernel, FFMA


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(call, "_STREAMS", {})
    monkeypatch.setitem(api._visible, 0, True)
    fake_cupy._STACK[:] = [fake_cupy._NULL]
    return fake_cupy


@pytest.fixture
def be():
    return Backend()


def mm(be, A, B, out=None, **kw):
    for k in be.built:
        k.calls.clear()
    return shadertune.matmul(A, B, out, backend=be, **{"config": "default", **kw})


def used(be):
    """The kernel the last mm() launched."""
    (k,) = [k for k in be.built if k.calls]
    return k


def last_call(be):
    return [c for k in be.built for c in k.calls][-1]


# --- check_call: the analysis kept per signature ------------------------------------

def test_check_call_keeps_a_signature_but_checks_each_call(rng):
    A, B = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, (3, 5))
    c1 = inputs.check_call(A, B)
    c2 = inputs.check_call(A, B, alpha=2)
    assert (c1.M, c1.N, c1.K, c1.batch, c2.alpha) == (4, 5, 3, (), 2.0)
    out = np.zeros((4, 5))
    assert inputs.check_call(A, B, out, beta=1.0).beta == 1.0
    with pytest.raises(ValueError, match="read-only"):           # the same signature, read-only this time
        ro = np.zeros((4, 5))
        ro.flags.writeable = False
        inputs.check_call(A, B, ro)
    with pytest.raises(ValueError, match="beta != 0"):           # no out: beta refused every call
        inputs.check_call(A, B, beta=0.5)
    with pytest.raises(TypeError, match="real number"):
        inputs.check_call(A, B, alpha=True)
    t = np.ones((2, 2), bool)
    assert inputs.check_call(t, t).logical
    with pytest.raises(TypeError, match="no scale"):             # bool @ bool seen before, now scaled
        inputs.check_call(t, t, alpha=2.0)
    # another shape, dtype or out of a seen signature is analysed afresh
    both = ("float32", "float64")
    assert inputs.check_call(A.astype(np.float32), B.astype(np.float32), dtypes=both).dtype == "float32"
    assert inputs.check_call(A, B, dtypes=both).dtype == "float64"
    assert inputs.check_call(A, B).dtype == "float32"            # a backend without float64
    with pytest.raises(ValueError, match="out has shape"):
        inputs.check_call(A, B, np.zeros((4, 6)))
    with pytest.raises(TypeError, match="Cannot cast"):
        inputs.check_call(A, B, np.zeros((4, 5), np.float32).astype(np.int32))


def test_check_call_errors_keep_numpys_order(rng):
    """The shapes' errors come before out's own, as when nothing was kept."""
    A, B = np.ones((4, 3)), np.ones((2, 5))
    ro = np.zeros((4, 5))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="core dimension"):
        inputs.check_call(A, B, ro)
    with pytest.raises(ValueError, match="core dimension"):
        inputs.check_call(A, B, "not an array")
    t = np.ones((2, 2), bool)
    with pytest.raises(TypeError, match="no scale"):            # before out's kind
        inputs.check_call(t, t, "not an array", alpha=2.0)


def test_quick_init_is_the_dataclass_but_faster():
    @quick_init
    @dataclasses.dataclass(frozen=True)
    class P:
        a: int
        b: tuple = ()
        c: object = None

    p = P(1, c=3)
    assert p == P(a=1, b=(), c=3) and hash(p) == hash(P(1, (), 3)) and repr(p).endswith("P(a=1, b=(), c=3)")
    assert dataclasses.replace(p, b=(2,)).b == (2,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.a = 2
    with pytest.raises(TypeError):
        P()

    @dataclasses.dataclass(frozen=True)
    class Q:
        a: int

        def __post_init__(self):
            pass
    with pytest.raises(TypeError, match="own __init__"):
        quick_init(Q)


# --- the CUDA call: layouts, kernels and launch arguments ---------------------------

def test_a_kept_plan_is_not_reused_when_the_call_differs(cp, rng, be):
    A, B = rng.uniform(-1, 1, (16, 8)), rng.uniform(-1, 1, (8, 12))
    dA, dB = dev(cp, A), dev(cp, B)
    close(mm(be, dA, dB), A @ B)
    k0 = last_call(be)
    assert k0[:2] == (dA.data.ptr, dB.data.ptr)
    # strides: a column-major A is another problem (trans_a), read in place
    At = dev(cp, A.T.copy())
    close(mm(be, At.T, dB), A @ B)
    assert be.built[-1].problem.trans_a and last_call(be)[0] == At.data.ptr
    # dtype: float64 operands, a float64 problem
    r = mm(be, dev(cp, A, np.float64), dev(cp, B, np.float64))
    assert r.dtype == np.float64 and be.built[-1].problem.dtype == "float64"
    close(r, A @ B, 1e-12)
    # out: written in place, then a strided out of the same shape through a temporary
    o = cp.empty((16, 12), np.float32)
    assert mm(be, dA, dB, o) is o and last_call(be)[2] == o.data.ptr
    big = cp.zeros((16, 24), np.float32)
    mm(be, dA, dB, big[:, ::2])
    assert last_call(be)[2] != big.data.ptr
    close(np.asarray(big)[:, ::2], A @ B)
    # alpha / beta: every call's own values on one layout
    C0 = rng.uniform(-1, 1, (16, 12))
    for alpha, beta in [(1.0, 0.0), (2.0, 0.5), (-1.0, 3.0), (2.0, 0.5)]:
        o = dev(cp, C0)
        mm(be, dA, dB, o, alpha=alpha, beta=beta)
        close(o, alpha * (A @ B) + beta * C0, 1e-4)
    # out shares memory with A this time, on a layout written in place before
    sq = dev(cp, rng.uniform(-1, 1, (16, 16)))
    ref = np.asarray(sq).astype(np.float64) @ np.asarray(sq)
    mm(be, sq, sq, cp.empty((16, 16), np.float32))
    mm(be, sq, sq, sq)
    close(sq, ref, 1e-4)


def test_an_array_on_another_gpu_is_refused_after_a_call_of_its_layout(cp, rng, be, monkeypatch):
    A = dev(cp, rng.uniform(-1, 1, (8, 8)))

    class CAI:      # another framework's array: its device is asked of the pointer, every call
        def __init__(self, a):
            self.__cuda_array_interface__ = {"shape": a.shape, "typestr": "<f4", "strides": None,
                                             "data": (a.data.ptr, False), "version": 2}
    mm(be, CAI(A), A)
    other = dev(cp, np.ones((8, 8)))
    monkeypatch.setattr(fake_cupy._Runtime, "pointerGetAttributes",
                        staticmethod(lambda p: type("Attr", (), {"device": 1 if p == other.data.ptr else 0})))
    with pytest.raises(ValueError, match="A is on CUDA device 1"):
        mm(be, CAI(other), A)
    mm(be, CAI(A), A)


@pytest.fixture
def entered(monkeypatch):
    """The device ids the call path switched to (cupy.cuda.Device entered), in order."""
    ids = []

    class Device(fake_cupy.Device):
        def __enter__(self):
            ids.append(self.id)
            return self
    monkeypatch.setattr(fake_cupy.cuda, "Device", Device)
    return ids


def test_the_device_is_switched_only_when_another_is_current(cp, be, monkeypatch, entered):
    A = dev(cp, np.ones((4, 4)))
    mm(be, A, A)
    assert entered == []
    monkeypatch.setattr(fake_cupy._Runtime, "getDevice", staticmethod(lambda: 1))
    mm(be, A, A)
    assert entered == [0]


def test_the_run_lock_is_kept_and_made_again_after_a_fork(be, monkeypatch):
    lock = api._lock_of(be)
    assert api._lock_of(be) is lock and api._lock_of(Backend()) is not lock
    monkeypatch.setattr(api, "_generation", api._generation + 1)      # as _forget_after_fork does
    assert api._lock_of(be) is not lock


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_a_child_forked_after_a_cuda_call_is_refused(cp, rng, be):
    """The fork check compares with the pid kept since the last fork (the
    at-fork hook sets it again in the child), not a getpid() per call: a child
    forked after a CUDA call still gets the ContextError."""
    A = dev(cp, rng.uniform(-1, 1, (8, 8)))
    mm(be, A, A)
    assert api._cuda_pid == api._pid == os.getpid()
    pid = os.fork()
    if pid == 0:     # the child: report through the exit code, never return into pytest
        code = 3
        try:
            mm(be, A, A)
            code = 1
        except ContextError as e:
            code = 0 if f"forked from pid {os.getppid()}" in str(e) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    mm(be, A, A)     # the parent goes on


def test_producer_streams_only_where_a_layout_can_have_them(cp, rng, be):
    A = dev(cp, rng.uniform(-1, 1, (8, 8)))
    lay = call.prepare(inputs.check_call(A, A)).layout
    assert not lay.waits

    class Produced:
        def __init__(self, stream):
            self.__cuda_array_interface__ = {"shape": (8, 8), "typestr": "<f4", "strides": None,
                                             "data": (A.data.ptr, False), "version": 3, "stream": stream}
    assert call.prepare(inputs.check_call(Produced(None), A)).layout.waits
    s = cp.cuda.Stream()
    with s:
        mm(be, Produced(None), A)
        assert s.waited == []
        mm(be, Produced(77), A)                 # the same layout, a producer stream this call
        assert s.waited == [77]


def test_launch_scalars_follow_each_calls_alpha_and_beta(cp, rng):
    p = Problem(16, 16, 16)
    k = fake_kernel(cp, p, FFMA)
    A, B = rng.uniform(-1, 1, (16, 16)).astype(np.float32), rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    C0 = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    for alpha, beta in [(1.0, 0.0), (2.0, 0.0), (2.0, -1.0), (1, 0)]:
        out = k.run(A, B, C0 if beta else None, alpha=alpha, beta=beta)
        close(out, alpha * (A.astype(np.float64) @ B) + beta * C0, 1e-4)
        args = k._main.calls[-1]["args"]
        assert len(args) == 11 and (args[9], args[10]) == (alpha, beta)
        assert type(args[9]) is np.float32 and k._main.calls[-1]["grid"] == (1, 1, 1)


# --- config resolution: 'default' and 'auto' ----------------------------------------

def test_auto_selects_again_when_the_store_changes(cp, rng, be, tmp_path, monkeypatch):
    from shadertune.selection import chain as select
    from shadertune.db import Store
    from shadertune.core.result import Result
    p = Problem(16, 8, 16)
    first, second = [c for c in be.candidates(p, 8) if c != be.default_config(p)][:2]
    db = tmp_path / "t.sqlite"
    with Store(db) as s:
        s.put(Result("cuda", "x", p, first, "ok", times_ms=[2.0], error=0.0), be.template_hash())
    reads = []
    real = select._from_store
    monkeypatch.setattr(select, "_from_store", lambda *a: reads.append(1) or real(*a))
    monkeypatch.setattr(be, "device", lambda: type("D", (), {"key": "x"})())
    A, B = dev(cp, rng.uniform(-1, 1, (16, 16))), dev(cp, rng.uniform(-1, 1, (16, 8)))
    for _ in range(3):
        mm(be, A, B, config="auto", db=db)
    assert len(reads) == 1 and be.built[-1].built_for == first
    with Store(db) as s:                                 # a faster result: the stamp changes
        s.put(Result("cuda", "x", p, second, "ok", times_ms=[1.0], error=0.0), be.template_hash())
    mm(be, A, B, config="auto", db=db)
    assert len(reads) == 2, reads
    assert be.built[-1].built_for == second
    mm(be, A, B, config="auto", db=db)
    assert len(reads) == 2
    # the default store follows SHADERTUNE_DB: another store, another selection
    monkeypatch.setenv("SHADERTUNE_DB", str(tmp_path / "none.sqlite"))
    mm(be, A, B, config="auto")
    assert used(be).built_for == be.default_config(p)
    monkeypatch.setenv("SHADERTUNE_DB", str(db))
    mm(be, A, B, config="auto")
    assert used(be).built_for == second


def test_door_and_requests_of_the_common_call(monkeypatch):
    from shadertune.front import matmul as front
    from shadertune.front.requests import parse_request
    d = front.door("cuda")
    assert front.door("cuda") is d and front.door("cuda", 0) is not d
    for bad in (True, -1, 1.0):
        with pytest.raises(ValueError, match="device_index"):
            front.door("cuda", bad)
    assert parse_request("default", d.backend) is parse_request("default", d.backend)
    assert parse_request("auto", d.backend).kind == "auto"
    assert parse_request(" default ", d.backend).kind == "default"
    with pytest.raises(ValueError, match="needs config='auto'"):
        parse_request("default", d.backend, tune="first-use")
