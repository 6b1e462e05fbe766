"""Where a chained GL-array call's host time goes, GL call by GL call (a device probe).

    python3 tools/probe_gl_call_steps.py [--sizes 1024] [--calls 200] [--config JSON ...]

Wraps moderngl's dispatch, barrier, buffer binding and error query and shadertune's glFlush
with clocks before the first call, then runs Y = A @ X chains on GL arrays (the express
lane's launcher captures the wrapped methods) and prints microseconds a call per step."""
import argparse
import collections
import json
import time

import moderngl

from shadertune.backends.gl.platform import glraw

spent = collections.Counter()
count = collections.Counter()


def clocked(name, fn):
    def wrapper(*a, **k):
        t0 = time.perf_counter_ns()
        try:
            return fn(*a, **k)
        finally:
            spent[name] += time.perf_counter_ns() - t0
            count[name] += 1
    return wrapper


moderngl.ComputeShader.run = clocked("dispatch", moderngl.ComputeShader.run)
moderngl.Context.memory_barrier = clocked("barrier", moderngl.Context.memory_barrier)
moderngl.Buffer.bind_to_storage_buffer = clocked("bind", moderngl.Buffer.bind_to_storage_buffer)
_error = moderngl.Context.error
moderngl.Context.error = property(clocked("glGetError", _error.fget))
glraw.flush = clocked("glFlush", glraw.flush)

from profile_gl_chain import chain_operands, run_chain  # noqa: E402  (after the clocks: it imports shadertune)
from shadertune.front import matmul as api  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--config", action="append", default=[])
    args = ap.parse_args()
    be = api.backend("gl")
    for n in map(int, args.sizes.split(",")):
        for text in args.config or ["auto"]:
            req = json.loads(text) if text.startswith("{") else text
            cfg, gA, X, Y = chain_operands(be, n, req, warmup=5)
            spent.clear()
            count.clear()
            host, wall, X, Y = run_chain(cfg, gA, X, Y, args.calls)
            steps = ", ".join(f"{k} {spent[k] / args.calls / 1e3:.1f} us ({count[k] // args.calls}x)"
                              for k in sorted(spent, key=lambda k: -spent[k]))
            short = {k: cfg[k] for k in ("bm", "bn", "bk", "ks", "kred", "np", "db", "tm", "tn") if k in cfg}
            print(f"n={n} {short}: host {host / args.calls * 1e6:.0f} us/call, wall {wall / args.calls * 1e6:.0f}"
                  f" us/call; {steps}", flush=True)


if __name__ == "__main__":
    main()
