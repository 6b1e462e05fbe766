#!/usr/bin/env python3
"""How a GPU's clock follows GL work (a measurement script, not a test).

    scripts/probe-gl-clock OUT_DIR

At 4096^3 with the compute family's default config: the same kernel timed right
after a run and after pauses of 0.5, 2 and 5 s (drift.json); then, after 5 s idle,
2 s of runs back to back, with 50 ms gaps and with 200 ms gaps, each run's GPU time
and nvidia-smi's SM clock before and after (ramp.json).  It times with the raw timer
(backends/gl/platform/timing.timed), never with the clock keeper that kernels' time() use.
(The session-12 data in benchmarks/h200-2026-11-26-s12 came from the two loops
this script joins.)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("moderngl", "numpy")

import numpy as np  # noqa: E402

from shadertune.core.atomic import write_json  # noqa: E402
from shadertune.backends.gl import GLBackend  # noqa: E402
from shadertune.backends.gl.platform.timing import timed  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402


def clocks() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,pstate", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        return "nvidia-smi not found"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/probe-gl-clock", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", metavar="OUT_DIR", help="folder for drift.json and ramp.json")
    out = ap.parse_args(argv).out
    os.makedirs(out, exist_ok=True)
    be = GLBackend()
    n = 4096
    p = Problem(n, n, n)
    g = np.random.default_rng(0)
    A = g.uniform(-1, 1, (n, n)).astype(np.float32)
    B = g.uniform(-1, 1, (n, n)).astype(np.float32)
    k = be.build(p, be.default_config(p))
    k.run(A, B)
    q = be.ctx.query(time=True)

    def ten():
        return [timed(be.ctx, q, k.execute)[0] for _ in range(10)]
    drift = []
    for pause in (0, 0.5, 2, 5):
        time.sleep(pause)
        ms = statistics.median(ten())
        drift.append({"pause_s": pause, "ms": ms, "tflops": 2 * n ** 3 / ms / 1e9})
        print(drift[-1], flush=True)
    ramp = {}
    for label, gap in (("back to back", 0), ("50 ms gaps", 0.05), ("200 ms gaps", 0.2)):
        time.sleep(5)
        before, t0, runs = clocks(), time.perf_counter(), []
        while time.perf_counter() - t0 < 2.0:
            runs.append((time.perf_counter() - t0, timed(be.ctx, q, k.execute)[0]))
            if gap:
                time.sleep(gap)
        ramp[label] = {"clock_before": before, "clock_after": clocks(), "runs": runs}
        print(label, before, "->", ramp[label]["clock_after"], [round(r[1], 2) for r in runs[:3]],
              [round(r[1], 2) for r in runs[-3:]], flush=True)
    k.release()
    write_json(os.path.join(out, "drift.json"), drift)
    write_json(os.path.join(out, "ramp.json"), ramp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
