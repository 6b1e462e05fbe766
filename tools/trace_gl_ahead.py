"""`python -m shadertune.search ARGS` with each GL build's take of a program compiled
ahead traced on stderr (how long it waited for the driver, whether the compile had been
started) and each batch of compiles started: why a search compiles in its own thread
although it announced the configs (session 24).  $TRACE_FIXED_HEAT=SECONDS: every compile
heated that long, as before session 24's per-family rule (an A/B of that rule in one run)."""
import os
import sys
import time

import shadertune.backends.gl as gl_backend

from shadertune.backends.gl.platform import compile_ahead as ca
from shadertune.backends.gl.platform.context import state_of

_take, _start = ca.take, ca.start


def take(ctx, source):
    job = state_of(ctx).compiling.get(source)
    done = job is not None and job.done()
    t = time.perf_counter()
    out = _take(ctx, source)
    print(f"trace take started={job is not None} done={done} waited "
          f"{1e3 * (time.perf_counter() - t):.0f} ms", file=sys.stderr)
    return out


def start(ctx, sources):
    sources = list(sources)
    t = time.perf_counter()
    _start(ctx, sources)
    print(f"trace start {len(sources)} sources in {1e3 * (time.perf_counter() - t):.0f} ms", file=sys.stderr)


ca.take, ca.start = take, start
if os.environ.get("TRACE_FIXED_HEAT"):
    _fixed = float(os.environ["TRACE_FIXED_HEAT"])
    gl_backend.compile_heat_s = lambda last_s: _fixed

if __name__ == "__main__":
    from shadertune.cli.search import main
    sys.argv[0] = "shadertune.search"
    sys.exit(main())
