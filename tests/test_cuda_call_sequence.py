"""The search times what a call costs (issue 32 item 5): what CUDAKernel.time
enqueues per timed repeat (the evaluator's timing) is, launch for launch, what
shadertune.matmul enqueues for the same problem and config, on the regular path
and on the express lane: the same kernels (pack, GEMM, K_G reduce), grids,
blocks, shared memory, stream, constants, and the same buffers in each role
(the operands, C, the kernel's K_G workspace and counters, the packed operands),
with the same allocations (a workspace above WORKSPACE_KEEP comes from the pool
in both). Recorded on the host-memory stand-in for CuPy (fake_cupy.recording),
whose kernels also compute their contract, so each path's result is checked too."""
import sys

import numpy as np
import pytest

import fake_cupy
import shadertune
import shadertune.front.matmul
from shadertune.backends.cuda import CUDABackend, driver, express
from shadertune.backends.cuda.device import DEFAULT_LIMITS as L
from shadertune.backends.cuda.space import make_space
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from test_cuda_call_host import FFMA, _ref, fake_kernel
from test_host_overhead import cp  # noqa: F401  (fixture: the CuPy stand-in)


class Backend(CUDABackend):
    """The CUDA backend (space, plan, run_call, express lane) building CUDAKernels
    whose compiled functions are the stand-in's."""

    def build(self, problem, config):
        return fake_kernel(sys.modules["cupy"], problem, config)


MMA3 = Config(AR=0, BK=32, BM=32, BN=64, DB=1, KG=4, KL=1, KR=0, MMA=3, PAD=4, ST=3, TM=4, TN=4, VEC=4,
              WM=16, WN=16, trans=1)
PS = Config(AR=0, BK=32, BM=64, BN=64, DB=1, KG=1, KL=1, KR=0, MMA=4, PAD=4, ST=3, TM=4, TN=4, VEC=1,
            WM=64, WN=64, trans=1, PS=1)
CASES = [
    (Problem(40, 24, 40), FFMA),                                     # one launch
    (Problem(45, 37, 3000, "float32", False, True), MMA3),           # GEMM + the K_G reduce kernel
    (Problem(45, 37, 3000, "float32", False, True), MMA3.replace(KR=1)),   # in-launch reduction: counters
    (Problem(130, 70, 200), PS),                                     # the pack kernel, then the GEMM
    (Problem(40, 24, 40, batch=3), FFMA),                            # one launch of a batch
    (Problem(130, 72, 1000), MMA3.replace(KG=1, VEC=4, SK=1)),       # stream-K: the persistent grid, counters
    (Problem(130, 72, 1000), PS.replace(SK=1)),                      # ... after the pack
]


def _roles(k, a, b, c):
    """Address -> the role of the buffer it points into, for one path's kernel k
    and its operands a, b and result c."""
    named = {a: "A", b: "B", c: "C"}
    ws = [v for v in k._ws.values()]
    cnt = [v[0] for v in k._cnt.values()]

    def role(x):
        x = int(x)
        if x in named:
            return named[x]
        if x in cnt:
            return "counters"
        if x == 0:
            return "none"
        for w in ws:
            if w[0] <= x < w[0] + w[2] * k.problem.itemsize:
                return f"W+{x - w[0]}"
        return "W(pool)"            # a workspace above WORKSPACE_KEEP: the pool's, this call only
    return role


def _sequence(log, role):
    """The device's view of one call: launches with pointers as roles, and
    allocations by size (the result's own, made by the caller, is named)."""
    out = []
    for e in log:
        if e[0] == "launch":
            _, name, grid, block, smem, stream, args = e
            args = tuple(role(x) if type(x) is int else (type(x).__name__, float(x)) for x in args)
            out.append(("launch", name, tuple(grid) + (1,) * (3 - len(grid)), block, smem, stream, args))
        elif e[0] == "alloc":
            out.append(("alloc", e[1], e[2]))
    return out


def _timed_repeats(log):
    """The evaluator's timed repeats: what lies between each pair of events."""
    marks = [i for i, e in enumerate(log) if e[0] == "event"]
    return [log[marks[i] + 1:marks[i + 1]] for i in range(0, len(marks), 2)]


@pytest.mark.parametrize("p, cfg", CASES)
def test_the_timed_repeat_is_the_calls_sequence(cp, rng, monkeypatch, p, cfg):
    assert make_space(p, L).why_invalid(cfg) is None
    A = rng.uniform(-1, 1, p.stored_shapes[0]).astype(p.dtype)
    B = rng.uniform(-1, 1, p.stored_shapes[1]).astype(p.dtype)
    ref = _ref(p, A, B)
    tol = 1e-4

    # the evaluator: run (verify), then time() with the stream held (its default)
    timed = fake_kernel(cp, p, cfg)
    C = timed.run(A, B)
    np.testing.assert_allclose(C, ref, rtol=tol, atol=tol)
    with fake_cupy.recording() as log:
        times = timed.time(repeats=3, warmup=1)
    assert times == [1.0] * 3
    (hold,) = [i for i, e in enumerate(log) if e[0] == "launch" and e[1] == "st_hold"]
    role = _roles(timed, *(x.data.ptr for x in timed._keep))
    repeats = [_sequence(r, role) for r in _timed_repeats(log[hold + 1:])]     # the warm-up, the hold, the repeats
    assert len(repeats) == 3 and repeats[0] == repeats[1] == repeats[2] == _sequence(log[:hold], role)
    assert repeats[0]

    # matmul: a first call (the kernel's first use: its kept workspace and counters
    # are allocated, as the evaluator's run() did), then calls on the regular path,
    # and a repeated call on the express lane
    be = Backend()
    dA, dB = cp.asarray(A), cp.asarray(B)
    if p.trans_a or p.trans_b:       # the stored layouts, read through the trans flags
        dA = dA.T if p.trans_a else dA
        dB = dB.T if p.trans_b else dB
    door = shadertune.front.matmul.door(be)
    lane, door.express = door.express, None
    taken = []
    monkeypatch.setattr(express.Express, "run", lambda self, *a, _run=express.Express.run, **kw:
                        taken.append(r := _run(self, *a, **kw)) or r)
    for path in ("first", "regular", "regular (learned by the lane)", "express lane"):
        if path.startswith("regular ("):
            door.express = lane
        with fake_cupy.recording() as log:
            r = shadertune.matmul(dA, dB, backend=be, config=cfg.key)
        np.testing.assert_allclose(np.asarray(r), ref, rtol=tol, atol=tol)
        (k,) = door.kernels._kernels.values()
        result = [e for e in log if e[0] == "alloc" and e[3] == r.data.ptr]
        assert len(result) == 1                     # the result, allocated by the call
        seq = _sequence([e for e in log if e is not result[0]], _roles(k, dA.data.ptr, dB.data.ptr, r.data.ptr))
        if path == "first":
            kept = [e for e in seq if e[0] == "alloc" and e not in repeats[0]]
            assert len(kept) == bool(k._ws) + bool(k._cnt)      # the kept workspace, the counters
            seq = [e for e in seq if e not in kept]
        assert seq == repeats[0], path
        assert (bool(taken) and taken[-1] is not None) == (path == "express lane")


def test_a_workspace_above_the_kept_size_is_allocated_per_call_in_both(cp, rng, monkeypatch):
    """Above WORKSPACE_KEEP the K_G workspace comes from the pool on every call:
    the timed repeats allocate it as the calls do."""
    p, cfg = CASES[1]
    monkeypatch.setattr(driver, "WORKSPACE_KEEP", 64)
    test_the_timed_repeat_is_the_calls_sequence(cp, rng, monkeypatch, p, cfg)
    k = fake_kernel(cp, p, cfg)
    k.run(rng.uniform(-1, 1, p.stored_shapes[0]).astype("float32"),
          rng.uniform(-1, 1, p.stored_shapes[1]).astype("float32"))
    with fake_cupy.recording() as log:
        k.time(repeats=2, warmup=0)
    allocs = [e for e in log if e[0] == "alloc"]
    assert len(allocs) == 2 and all(e[1] == 4 * p.M * p.N * cfg["KG"] for e in allocs)
