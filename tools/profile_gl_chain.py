"""Where a chained GL-array call's host time goes (a device-session probe, not a benchmark).

    python3 tools/profile_gl_chain.py [--sizes 1024,2048] [--calls 40] [--config JSON]

Per size: Y = A @ X on GL arrays as scripts/bench-gl-arrays' chain stage makes it (the
config auto resolves to, or --config), the host microseconds a call without a profiler, then
the profiler's top functions by own time over the same calls, and how many of the calls the
express lane ran (backends/gl/express.py: a compute config whose places are in place)."""
import argparse
import contextlib
import cProfile
import io
import json
import pstats
import time

import numpy as np

import shadertune
import shadertune.gl as gl
from shadertune.core.problem import Problem
from shadertune.front import matmul as api
from shadertune.front.requests import resolve


def chain_operands(be, n: int, request, warmup: int = 3):
    """The config `request` resolves to at n x n x n, A and the chain's X and Y as GL
    arrays (singular values up to about 2: a long chain stays finite), after `warmup`
    calls and a finish."""
    cfg = dict(resolve(be, Problem(n, n, n), request))
    A = (np.random.default_rng(n).uniform(-1, 1, (n, n)) * np.sqrt(3.0 / n)).astype(np.float32)
    gA, X, Y = gl.asarray(A), gl.asarray(A), gl.empty((n, n))
    for _ in range(warmup):
        shadertune.matmul(gA, X, out=Y, config=cfg)
    gl.home().enter().finish()
    return cfg, gA, X, Y


def run_chain(cfg, gA, X, Y, calls: int, around=None):
    """Y = A @ X `calls` times (X and Y swapped each call): (host seconds, wall seconds
    to the GPU's finish, X, Y); `around`, a context manager, is held over the calls."""
    t0 = time.perf_counter()
    with around or contextlib.nullcontext():
        for _ in range(calls):
            shadertune.matmul(gA, X, out=Y, config=cfg)
            X, Y = Y, X
    host = time.perf_counter() - t0
    gl.home().enter().finish()
    return host, time.perf_counter() - t0, X, Y


@contextlib.contextmanager
def profiled(prof):
    prof.enable()
    try:
        yield
    finally:
        prof.disable()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--config", default="auto")
    args = ap.parse_args()
    be = api.backend("gl")
    req = json.loads(args.config) if args.config.startswith("{") else args.config
    for n in map(int, args.sizes.split(",")):
        cfg, gA, X, Y = chain_operands(be, n, req)
        lane = api.door("gl").express
        hits = getattr(lane, "hits", 0)
        prof = cProfile.Profile()
        for label, around in (("plain", None), ("profiled", profiled(prof))):
            host, wall, X, Y = run_chain(cfg, gA, X, Y, args.calls, around)
            print(f"n={n} {label}: host {host / args.calls * 1e6:.0f} us/call, wall {wall / args.calls * 1e6:.0f} us/call")
        print(f"n={n}: the express lane ran {getattr(lane, 'hits', 0) - hits} of {2 * args.calls} calls")
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
        print(s.getvalue())

if __name__ == "__main__":
    main()
