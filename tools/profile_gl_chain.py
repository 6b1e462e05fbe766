"""Where a chained GL-array call's host time goes (a device-session probe, not a benchmark).

    python3 tools/profile_gl_chain.py [--sizes 1024,2048] [--calls 40] [--config JSON]

Per size: Y = A @ X on GL arrays as scripts/bench-gl-arrays' chain stage makes it (the
config auto resolves to, or --config), the host microseconds a call without a profiler, then
the profiler's top functions by own time over the same calls, and how many of the calls the
express lane ran (backends/gl/express.py: a compute config whose places are in place)."""
import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--config", default="auto")
    args = ap.parse_args()
    be = api.backend("gl")
    for n in map(int, args.sizes.split(",")):
        req = json.loads(args.config) if args.config.startswith("{") else args.config
        cfg = dict(resolve(be, Problem(n, n, n), req))
        A = (np.random.default_rng(n).uniform(-1, 1, (n, n)) * np.sqrt(3.0 / n)).astype(np.float32)
        gA, X, Y = gl.asarray(A), gl.asarray(A), gl.empty((n, n))
        for _ in range(3):
            shadertune.matmul(gA, X, out=Y, config=cfg)
        gl.home().enter().finish()
        lane = api.door("gl").express
        hits = getattr(lane, "hits", 0)
        for label in ("plain", "profiled"):
            prof = cProfile.Profile() if label == "profiled" else None
            t0 = time.perf_counter()
            if prof:
                prof.enable()
            for _ in range(args.calls):
                shadertune.matmul(gA, X, out=Y, config=cfg)
                X, Y = Y, X
            if prof:
                prof.disable()
            host = time.perf_counter() - t0
            gl.home().enter().finish()
            wall = time.perf_counter() - t0
            print(f"n={n} {label}: host {host / args.calls * 1e6:.0f} us/call, wall {wall / args.calls * 1e6:.0f} us/call")
        print(f"n={n}: the express lane ran {getattr(lane, 'hits', 0) - hits} of {2 * args.calls} calls")
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
        print(s.getvalue())


if __name__ == "__main__":
    main()
