"""matmul's express lane on GL arrays (backends/gl/express.py), on llvmpipe: a repeated
call on GL arrays that one compute kernel reads and writes in place runs the kernel's
launcher (ComputeKernel.launcher) without the front door's analysis, bit for bit what
the regular path computes; any call the key does not describe, and any call where what
the regular path would decide has changed (a released array, another thread's array,
an out that overlaps an input, a dropped kernel, auto's selection), takes the regular
path, which raises its own errors.

The regular path is asked for by an alpha of numpy's float64 type (the lane takes
Python floats and ints only), so both paths run in one test on the same arrays."""
import threading

import numpy as np
import pytest

import shadertune
import shadertune.gl as gl
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import Result
from shadertune.db import Store
from shadertune.errors import ContextError
from shadertune.front import matmul as front
from shadertune.front.requests import resolve

pytestmark = pytest.mark.usefixtures("gl")

N = 32
REGULAR = np.float64(1.0)          # alpha of a type the lane does not take: the regular path
COMPUTE = {
    "ssbo": {"family": "compute"},
    "texture": {"family": "compute", "a_src": "texture", "b_src": "texture"},
    "splits": {"family": "compute", "ks": 2},           # a reduce dispatch after each pass
}


@pytest.fixture
def lane():
    """This thread's GL lane, with no plans (a test's keys are its own)."""
    express = front.door("gl").express
    express.forget()
    express.hits = 0
    return express


def full(cfg, n=N):
    """The config a request resolves to for an n x n x n product, as knobs (a dict)."""
    return dict(resolve(front.backend("gl"), Problem(n, n, n), cfg))


def matrix(rng, *shape):
    return (rng.uniform(-1, 1, shape) * np.sqrt(3.0 / shape[-1])).astype(np.float32)


def chain(A, X0, steps, cfg, *, alpha=1.0, out=True):
    """X <- A @ X, `steps` times on GL arrays (out given: two buffers swapped; else a new
    result each step); every X on the host."""
    gA, X = gl.asarray(A), gl.asarray(X0)
    Y = gl.empty(X0.shape) if out else None
    seen = []
    for _ in range(steps):
        if out:
            shadertune.matmul(gA, X, out=Y, config=cfg, alpha=alpha)
            X, Y = Y, X
        else:
            X = shadertune.matmul(gA, X, config=cfg, alpha=alpha)
        seen.append(X.numpy())
    return seen


@pytest.mark.parametrize("name", sorted(COMPUTE))
@pytest.mark.parametrize("out", [True, False], ids=["out", "new"])
def test_a_chain_takes_the_lane_and_equals_the_regular_path(name, out, rng, lane, checks):
    cfg = full(COMPUTE[name])
    A, X0 = matrix(rng, N, N), matrix(rng, N, N)
    got = chain(A, X0, 6, cfg, out=out)
    assert len(checks) == 1 and lane.hits == 5           # learned once, then the lane
    want = chain(A, X0, 6, cfg, alpha=REGULAR, out=out)
    assert len(checks) == 7 and lane.hits == 5
    ref = X0.astype(np.float64)
    for g, w in zip(got, want):
        ref = A.astype(np.float64) @ ref
        assert np.array_equal(g, w)                       # bit for bit the regular path's
        assert np.linalg.norm(g - ref) <= 1e-5 * np.linalg.norm(ref)


def test_passes_over_k_repeat_with_their_barriers(rng, lane, checks):
    """Two passes over K: the launcher's pass loop, with other B buffers and alpha/beta
    each call, bit for bit the regular path's."""
    M, K, Nn = 16, 2048, 16
    cfg = dict(resolve(front.backend("gl"), Problem(M, Nn, K), {"family": "compute", "np": 1024}))
    gA = gl.asarray(matrix(rng, M, K))
    Bs = [gl.asarray(matrix(rng, K, Nn)) for _ in range(3)]
    C0 = matrix(rng, M, Nn)
    outs = []
    for alpha in (1.0, REGULAR):
        C = gl.asarray(C0)
        for i, (a, b) in enumerate(((1.0, 0.0), (0.5, 1.0), (2.0, -1.0), (1, 0.5))):
            shadertune.matmul(gA, Bs[i % 3], out=C, config=cfg, alpha=a * alpha, beta=b)
        outs.append(C.numpy())
    assert lane.hits == 3 and len(checks) == 5
    assert np.array_equal(outs[0], outs[1])
    want = C0.astype(np.float64)
    A64 = gA.numpy().astype(np.float64)
    for i, (a, b) in enumerate(((1.0, 0.0), (0.5, 1.0), (2.0, -1.0), (1, 0.5))):
        want = a * A64 @ Bs[i % 3].numpy() + b * want
    assert np.linalg.norm(outs[0] - want) <= 1e-5 * np.linalg.norm(want)


def test_a_new_result_each_call_is_its_own_array(rng, lane):
    cfg = full(COMPUTE["ssbo"])
    gA, gB = gl.asarray(matrix(rng, N, N)), gl.asarray(matrix(rng, N, N))
    made = [shadertune.matmul(gA, gB, config=cfg) for _ in range(3)]
    assert lane.hits == 2
    assert len({id(m._storage) for m in made}) == 3 and all(m.shape == (N, N) for m in made)
    assert all(np.array_equal(m.numpy(), made[0].numpy()) for m in made)


def test_views_transposes_and_alpha_beta_repeat_in_place(rng, lane, checks):
    """Operands and out as views of larger matrices (an offset, a leading dimension: whole
    vectors of the config's loads, so read in place), A as a transposed view (A.T read in
    place), alpha and beta the call's own."""
    cfg = full(COMPUTE["ssbo"])
    M, K, Nn = N, N, N
    P, Q, R = matrix(rng, M + 8, K + 8), matrix(rng, Nn + 4, K + 4), matrix(rng, M + 4, Nn + 8)
    gP, gQT, gR = gl.asarray(P), gl.asarray(Q), gl.asarray(R)
    a = gP[4:4 + M, 8:8 + K]                   # offset 4 rows + 8, leading dimension K + 8
    b = gQT[2:2 + Nn, 4:4 + K].T               # B stored transposed: read as its transpose
    c = gR[2:2 + M, 4:4 + Nn]
    want = R.astype(np.float64)
    a64, b64 = P[4:4 + M, 8:8 + K].astype(np.float64), Q[2:2 + Nn, 4:4 + K].T.astype(np.float64)
    for alpha, beta in ((1.0, 0.0), (0.5, 2.0), (-1, 1), (2.0, -0.25)):
        got = shadertune.matmul(a, b, out=c, config=cfg, alpha=alpha, beta=beta)
        assert got is c
        want[2:2 + M, 4:4 + Nn] = alpha * a64 @ b64 + beta * want[2:2 + M, 4:4 + Nn]
        host = gR.numpy()
        assert np.linalg.norm(host - want) <= 1e-5 * np.linalg.norm(want)
    assert len(checks) == 1 and lane.hits == 3
    # the same four calls through the regular path: the same bits (from the same start)
    gR2 = gl.asarray(R)
    c2 = gR2[2:2 + M, 4:4 + Nn]
    for alpha, beta in ((1.0, 0.0), (0.5, 2.0), (-1, 1), (2.0, -0.25)):
        shadertune.matmul(a, b, out=c2, config=cfg, alpha=np.float64(alpha), beta=beta)
    assert np.array_equal(gR2.numpy(), gR.numpy()) and lane.hits == 3


def test_every_form_of_a_config_takes_the_lane(rng, lane, checks):
    """A dict (its items), JSON text, a Config: one regular call each, then the lane."""
    cfg = full(COMPUTE["ssbo"])
    import json
    gA, X, Y = gl.asarray(matrix(rng, N, N)), gl.asarray(matrix(rng, N, N)), gl.empty((N, N))
    for form in (cfg, json.dumps(cfg), Config(cfg)):
        before = (len(checks), lane.hits)
        for _ in range(3):
            shadertune.matmul(gA, X, out=Y, config=form)
        assert (len(checks), lane.hits) == (before[0] + 1, before[1] + 2)


def test_a_fragment_config_is_never_learned(rng, lane, checks):
    """The fragment family packs its operands (no in-place places): every call is regular."""
    A, X0 = matrix(rng, N, N), matrix(rng, N, N)
    got = chain(A, X0, 3, "jiang")
    assert len(checks) == 3 and lane.hits == 0
    assert np.linalg.norm(got[-1] - A @ (A @ (A @ X0))) <= 1e-4


def test_a_copied_operand_is_never_learned(rng, lane, checks):
    """An operand whose offset is not whole vectors of the config's loads goes through the
    kernel's own buffer (a GPU copy): the regular path, every call."""
    cfg = full(COMPUTE["ssbo"])
    P = matrix(rng, N, N + 1)
    gP, gB = gl.asarray(P), gl.asarray(matrix(rng, N, N))
    for _ in range(3):
        got = shadertune.matmul(gP[:, 1:], gB, config=cfg)
    assert len(checks) == 3 and lane.hits == 0
    assert np.linalg.norm(got.numpy() - P[:, 1:] @ gB.numpy()) <= 1e-5 * np.linalg.norm(P[:, 1:] @ gB.numpy())


def _store_with(be, p, cfg, ms, db):
    with Store(db) as s:
        s.put(Result("gl", be.device().key, p, Config(cfg), "ok", times_ms=[ms], error=0.0), be.template_hash())


def test_auto_follows_the_store_between_calls(rng, lane, checks, tmp_path):
    be = front.backend("gl")
    p = Problem(N, N, N)
    first, second = full(COMPUTE["ssbo"]), full(COMPUTE["splits"])
    assert first != second
    db = str(tmp_path / "t.sqlite")
    _store_with(be, p, first, 2.0, db)
    gA, X, Y = gl.asarray(matrix(rng, N, N)), gl.asarray(matrix(rng, N, N)), gl.empty((N, N))
    for _ in range(3):
        shadertune.matmul(gA, X, out=Y, config="auto", db=db)
    kernel = front.door("gl").kernels._kernels[next(reversed(front.door("gl").kernels._kernels))]
    assert len(checks) == 1 and lane.hits == 2 and dict(kernel.config) == dict(Config(first))
    _store_with(be, p, second, 1.0, db)                 # a faster config: auto's pick changes
    shadertune.matmul(gA, X, out=Y, config="auto", db=db)
    assert len(checks) == 2 and lane.hits == 2          # asked again: the regular path, the new config
    kernel = front.door("gl").kernels._kernels[next(reversed(front.door("gl").kernels._kernels))]
    assert dict(kernel.config) == dict(Config(second))
    shadertune.matmul(gA, X, out=Y, config="auto", db=db)
    assert len(checks) == 2 and lane.hits == 3          # the new config's launch, learned
    np.testing.assert_allclose(Y.numpy(), gA.numpy() @ X.numpy(), rtol=1e-4, atol=1e-5)


def _error_of(fn):
    try:
        fn()
    except Exception as e:      # noqa: BLE001  (the error itself is what is compared)
        return type(e), str(e)
    return None


@pytest.mark.parametrize("which", ["A", "B", "out"])
def test_a_released_array_after_learning_raises_the_regular_paths_error(which, rng, lane):
    cfg = full(COMPUTE["ssbo"])
    arrays = {"A": gl.asarray(matrix(rng, N, N)), "B": gl.asarray(matrix(rng, N, N)), "out": gl.empty((N, N))}

    def call(alpha=1.0):
        return shadertune.matmul(arrays["A"], arrays["B"], out=arrays["out"], config=cfg, alpha=alpha)
    call()
    call()
    assert lane.hits == 1
    arrays[which].release()
    lane_error, regular_error = _error_of(call), _error_of(lambda: call(REGULAR))
    assert lane_error == regular_error and lane_error[0] is ValueError
    assert f"{which} is a GL array that was released" in lane_error[1]
    assert lane.hits == 1


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:      # noqa: BLE001  (handed to the test's thread)
            box["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_another_threads_arrays_raise_the_regular_paths_error(rng):
    """A thread whose own lane learned the key, called with this thread's arrays (same
    geometry): ContextError, as the regular path raises it."""
    cfg = full(COMPUTE["ssbo"])
    A = matrix(rng, N, N)
    mine = gl.asarray(A), gl.asarray(A), gl.empty((N, N))

    def there():
        theirs = gl.asarray(A), gl.asarray(A), gl.empty((N, N))
        for _ in range(2):
            shadertune.matmul(theirs[0], theirs[1], out=theirs[2], config=cfg)
        hits = front.door("gl").express.hits
        errors = [_error_of(lambda: shadertune.matmul(mine[0], mine[1], out=mine[2], config=cfg, alpha=alpha))
                  for alpha in (1.0, REGULAR)]
        return hits, front.door("gl").express.hits, errors
    before, after, (lane_error, regular_error) = _in_thread(there)
    assert before == after >= 1
    assert lane_error == regular_error and lane_error[0] is ContextError
    assert "serves one thread" in lane_error[1]


def test_a_backend_object_used_from_another_thread_raises_the_regular_paths_error(rng):
    """A door on a Backend object is one for every thread: its lane's plans are there, and
    a call from a thread that does not own the backend's context takes the regular path."""
    be = front.backend("gl")
    cfg = full(COMPUTE["ssbo"])
    gA, X, Y = gl.asarray(matrix(rng, N, N)), gl.asarray(matrix(rng, N, N)), gl.empty((N, N))
    express = front.door(be).express
    for _ in range(3):
        shadertune.matmul(gA, X, out=Y, config=cfg, backend=be)
    hits = express.hits
    assert hits >= 2
    errors = _in_thread(lambda: [_error_of(lambda: shadertune.matmul(gA, X, out=Y, config=cfg, backend=be,
                                                                     alpha=alpha)) for alpha in (1.0, REGULAR)])
    assert errors[0] == errors[1] and errors[0][0] is ContextError and express.hits == hits


def test_an_out_that_overlaps_an_input_takes_the_regular_path(rng, lane, checks):
    """Learned with out apart from A; called with out sharing A's elements (numpy's a @= b):
    the regular path's temporary, a correct result.  out in A's buffer but apart from it:
    the lane."""
    cfg = full(COMPUTE["ssbo"])
    P, R, B = matrix(rng, N, 2 * N), matrix(rng, N, 2 * N), matrix(rng, N, N)
    gP, gR, gB = gl.asarray(P), gl.asarray(R), gl.asarray(B)
    for _ in range(2):                                               # learned: out in another buffer
        shadertune.matmul(gP[:, :N], gB, out=gR[:, :N], config=cfg)
        shadertune.matmul(gP[:, :N], gB, out=gR[:, N:], config=cfg)
    assert (len(checks), lane.hits) == (2, 2)
    shadertune.matmul(gP[:, N:], gB, out=gR[:, N:], config=cfg)      # out in A's buffer, apart from it
    assert (len(checks), lane.hits) == (3, 2)                        # (another key: A's offset)
    gP2 = gl.asarray(P)
    shadertune.matmul(gP2[:, :N], gB, out=gP2[:, N:], config=cfg)    # A's buffer, apart: the lane
    assert (len(checks), lane.hits) == (3, 3)
    np.testing.assert_allclose(gP2.numpy()[:, N:], P[:, :N] @ B, rtol=1e-5, atol=1e-5)
    shadertune.matmul(gP[:, :N], gB, out=gP[:, :N], config=cfg)      # out is A: a @= b
    assert (len(checks), lane.hits) == (4, 3)
    np.testing.assert_allclose(gP.numpy()[:, :N], P[:, :N] @ B, rtol=1e-5, atol=1e-5)


def test_a_dropped_kernel_is_never_launched(rng, lane, checks):
    cfg = full(COMPUTE["ssbo"])
    gA, X, Y = gl.asarray(matrix(rng, N, N)), gl.asarray(matrix(rng, N, N)), gl.empty((N, N))
    shadertune.matmul(gA, X, out=Y, config=cfg)
    shadertune.matmul(gA, X, out=Y, config=cfg)
    kernel = next(iter(lane._plans.values())).kernel
    front.clear_cache()                               # releases the cached kernels
    assert kernel.released
    shadertune.matmul(gA, X, out=Y, config=cfg)
    assert (len(checks), lane.hits) == (2, 1)         # the regular path built it again
    shadertune.matmul(gA, X, out=Y, config=cfg)
    assert (len(checks), lane.hits) == (2, 2)
    np.testing.assert_allclose(Y.numpy(), gA.numpy() @ X.numpy(), rtol=1e-5, atol=1e-5)


def test_threads_run_their_own_lanes_at_once(rng):
    """Two threads, each with its own context, arrays and lane, chaining at the same time."""
    cfg = full(COMPUTE["ssbo"])
    A, X0 = matrix(rng, N, N), matrix(rng, N, N)
    want = X0.astype(np.float64)
    for _ in range(8):
        want = A.astype(np.float64) @ want
    start = threading.Barrier(2)
    results, errors = {}, []

    def work(i):
        try:
            express = front.door("gl").express
            gA, X, Y = gl.asarray(A), gl.asarray(X0), gl.empty((N, N))
            start.wait()
            for _ in range(8):
                shadertune.matmul(gA, X, out=Y, config=cfg)
                X, Y = Y, X
            results[i] = (X.numpy(), express.hits, id(express))
        except BaseException as e:    # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    (x0, h0, e0), (x1, h1, e1) = results[0], results[1]
    assert e0 != e1 and h0 == h1 == 7
    assert np.array_equal(x0, x1) and np.linalg.norm(x0 - want) <= 1e-5 * np.linalg.norm(want)


@pytest.mark.parametrize("argv, lane_runs", [(["--sizes", "32", "--calls", "3"], None),
                                             (["--sizes", "32", "--calls", "3", "--config", '{"family": "compute"}'],
                                              "the express lane ran 6 of 6 calls")])
def test_the_chain_profile_runs_and_says_what_the_lane_ran(argv, lane_runs, monkeypatch, capsys):
    """tools/profile_gl_chain.py (the GPU batch's command, at a tiny size): a compute config's
    chain runs on the lane; auto's (a fragment config on llvmpipe at 32) says how many did."""
    import pathlib
    import runpy
    import sys
    tool = pathlib.Path(__file__).resolve().parents[1] / "tools" / "profile_gl_chain.py"
    monkeypatch.setattr(sys, "argv", [str(tool), *argv])
    runpy.run_path(str(tool), run_name="__main__")
    out = capsys.readouterr().out
    assert "n=32 plain: host" in out and "the express lane ran" in out
    if lane_runs is not None:
        assert lane_runs in out
