"""matmul from several threads and in forked processes (docs/threads.md)."""
import os
import threading

import numpy as np
import pytest
from subproc import run_python

import shadertune
from shadertune.front import matmul as api
from shadertune.errors import ContextError

from numerics import rel_err

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(5, 7, 3), (16, 9, 12), (33, 20, 17)]


def _in_threads(n, fn):
    """Run fn(i) in n threads at once; the exceptions they raised."""
    errors, start = [], threading.Barrier(n)

    def run(i):
        try:
            start.wait()
            fn(i)
        except BaseException as e:   # noqa: BLE001 - reported to the test
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def test_eight_threads_on_mixed_shapes_get_correct_results():
    """Concurrent first calls, cached shapes and new shapes, alpha/beta and stacks."""
    bad = []

    def work(i):
        rng = np.random.default_rng(i)
        for r in range(4):
            M, N, K = SHAPES[(i + r) % len(SHAPES)]
            A, B = rng.standard_normal((2, M, K)), rng.standard_normal((K, N))
            C = rng.standard_normal((2, M, N)).astype(np.float32)
            ref = 0.5 * (A @ B) + 2.0 * C
            got = shadertune.matmul(A, B, C, config="default", alpha=0.5, beta=2.0)
            if rel_err(got, ref) > 1e-5:
                bad.append((i, r, rel_err(got, ref)))
    assert _in_threads(8, work) == []
    assert bad == []


def test_each_thread_has_its_own_context_and_kernels():
    main_ctx = api.backend("gl").ctx
    seen = []

    def work(i):
        be = api.backend("gl")
        shadertune.matmul(np.ones((3, 4)), np.ones((4, 5)), config="default")
        seen.append((be.ctx, len(api.door("gl").kernels)))
    assert _in_threads(2, work) == []
    (c1, n1), (c2, n2) = seen
    assert len({id(main_ctx), id(c1), id(c2)}) == 3 and n1 == n2 == 1


def test_a_gl_backend_used_from_another_thread_is_a_clear_error():
    """It used to run with no context current: silently wrong numbers."""
    be = api.backend("gl")
    be.ctx

    def work(i):
        be.ctx
    errors = _in_threads(1, work)
    assert len(errors) == 1 and isinstance(errors[0], ContextError)
    assert "current in another thread" in str(errors[0])


def _py(code: str, timeout: int = 120):
    return run_python(code, timeout=timeout)


def test_a_thread_that_ends_releases_its_context():
    """Contexts go with their threads: 30 short-lived threads leave no context behind, and
    no memory (EGL kept 2.3 MB per thread until eglReleaseThread)."""
    r = _py("""
        import gc, threading, numpy as np, shadertune
        from shadertune.backends.gl.platform import context
        made = []
        orig = context.create_egl_context
        def counting(*a, **k):
            ctx = orig(*a, **k)
            made.append(ctx)
            return ctx
        context.create_egl_context = counting
        def rss_mb():
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
        def work():
            shadertune.matmul(np.ones((30, 40)), np.ones((40, 20)), config="default")
        for i in range(30):
            if i == 10:
                before = rss_mb()
            t = threading.Thread(target=work)
            t.start(); t.join()
        gc.collect()
        live = [c for c in made if type(c.mglo).__name__ != "InvalidObject"]
        print(len(made), len(live), rss_mb() - before)
    """)
    assert r.returncode == 0, r.stderr
    made, live, grown = r.stdout.split()
    assert (made, live) == ("30", "0")
    assert float(grown) < 20, f"{grown} MB kept by 20 finished threads"


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
def test_forked_child_gets_a_clear_error_not_a_hang(how):
    """After the parent used GL, a forked child's matmul hung in ctx.finish(); a fresh
    context in the child hangs too (llvmpipe), so the child is told why instead."""
    r = _py(f"""
        import os, multiprocessing as mp, numpy as np, shadertune
        A, B = np.ones((5, 6)), np.ones((6, 7))
        assert shadertune.matmul(A, B, config="default").sum() == 210
        def child(q):
            try:
                shadertune.matmul(A, B, config="default")
                q.put("no error")
            except Exception as e:
                q.put(type(e).__name__ + ": " + str(e))
        if {how!r} == "os.fork":
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                class Q:
                    def put(self, s):
                        os.write(w, s.encode())
                child(Q())
                os._exit(0)
            os.close(w)
            os.waitpid(pid, 0)
            print(os.read(r, 4096).decode())
        else:
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start(); p.join(60)
            print(q.get(timeout=10))
        assert shadertune.matmul(A, B, config="default").sum() == 210   # the parent goes on
    """, timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ContextError: GL cannot be used in this process"), r.stdout
    assert "forked from pid" in r.stdout and "'spawn'" in r.stdout
