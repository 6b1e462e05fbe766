"""GL arrays' lifetime and threads: storage goes back to the texture pool with the last
array that uses it (no GL object leaked), and an array is used in the thread whose
context holds it (elsewhere: ContextError; dropped elsewhere: given back in its thread)."""
import gc
import threading

import numpy as np
import pytest

import shadertune
import shadertune.gl as gl
from shadertune.backends.gl.platform import glraw
from shadertune.errors import ContextError

pytestmark = pytest.mark.usefixtures("gl")


def _newest_name(home) -> int:
    """The name the context gives a new buffer or texture now (names grow; a freed one may
    come back, never one past the newest)."""
    ctx = home.enter()
    buf, tex = ctx.buffer(reserve=16), ctx.texture((1, 1), 1)
    top = max(buf.glo, tex.glo)
    buf.release()
    tex.release()
    return top


def _gl_objects(home, upto: int):
    """Live buffer and texture names of the context among 1 .. upto (glIsBuffer / glIsTexture)."""
    counts = glraw.live_objects(home.enter(), upto)
    if counts is None:
        pytest.skip("glIsBuffer does not reach this context")
    return counts


def test_a_thousand_allocations_keep_gl_object_counts_flat(rng):
    home = gl.home()
    A = rng.uniform(-1, 1, (8, 8)).astype(np.float32)
    cfg = {"family": "compute"}

    def once(i):
        a = gl.asarray(A)
        b = gl.zeros((8, 8)) if i % 2 else gl.empty(8 + i % 3)
        v = a[1:, 2:]
        c = shadertune.matmul(v, a[2:, 1:], config=cfg)    # a temporary GL array
        if i % 3 == 0:
            b.release()
        c.copy()
        return float(c[0, 0])
    for i in range(6):                                      # kernels built, pool filled
        once(i)
    gc.collect()
    upto = _newest_name(home) + 20000          # every name there is, and room for a leak to show
    before, live = _gl_objects(home, upto), home.live
    pool_before = home.backend.pool.bytes
    for i in range(1000):
        once(i)
    gc.collect()
    assert _newest_name(home) < upto
    after = _gl_objects(home, upto)
    assert after == before, (before, after)
    assert home.live == live                                # every storage given back
    assert home.backend.pool.bytes <= max(home.backend.pool.max_bytes, pool_before)


def test_release_gives_the_buffer_back_to_the_pool_within_its_limit(rng):
    home = gl.home()
    pool = home.backend.pool
    a = gl.zeros((64, 64))
    n = len(pool)
    a.release()
    assert len(pool) == n + 1                               # kept for the next array
    b = gl.zeros((64, 64))
    assert len(pool) == n and not b.numpy().any()           # ... and taken by it
    old = pool.max_bytes
    try:
        pool.max_bytes = 1024                               # past the limit: released outright
        held = len(pool)
        b.release()
        assert len(pool) == held
    finally:
        pool.max_bytes = old


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:   # noqa: BLE001 - handed to the test
            box["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join(120)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_an_array_used_from_another_thread_raises_context_error(rng):
    A = rng.uniform(-1, 1, (4, 4)).astype(np.float32)
    a = gl.asarray(A)
    assert _in_thread(lambda: (a.shape, a.dtype, repr(a))) == ((4, 4), np.float32, repr(a))
    for use in (lambda: a.numpy(), lambda: a.__setitem__(0, 1.0), lambda: shadertune.matmul(a, a),
                lambda: a.copy(), lambda: a.release(), lambda: gl.asarray(a)):
        with pytest.raises(ContextError, match="lives in the GL context of thread .* serves one thread"):
            _in_thread(use)
    # the other thread's own arrays work there, beside this thread's
    got = _in_thread(lambda: shadertune.matmul(gl.asarray(A), gl.asarray(A), config="default").numpy())
    assert np.allclose(got, A.astype(np.float64) @ A, atol=1e-5)
    assert np.array_equal(a.numpy(), A)


def test_an_array_dropped_in_another_thread_goes_back_in_its_own(rng):
    home = gl.home()
    gc.collect()                    # garbage of earlier tests is not this test's drop
    a = gl.zeros((32, 32))
    buf = a._storage.buffer
    box = [a]
    del a
    live = home.live
    _in_thread(lambda: (box.clear(), gc.collect()))         # the last reference goes there
    assert home.live == live - 1 and [b for b, _ in home._pending] == [buf]
    assert id(buf) not in home.backend.pool._free
    gl.zeros(3)                                             # this thread's next GL-array call
    # (what else the pool holds depends on the tests before: the dropped buffer is there)
    assert not home._pending and id(buf) in home.backend.pool._free


def test_arrays_of_a_thread_that_ended_raise_context_error(rng):
    a = _in_thread(lambda: gl.asarray(np.ones((3, 3), np.float32)))
    assert a.released and a.shape == (3, 3)
    with pytest.raises(ContextError, match="thread that made this GL array has ended"):
        a.numpy()
    a.release()                                             # nothing to give back: no error
    del a
    gc.collect()
