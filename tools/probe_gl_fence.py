"""Does the compute kernel's memoryBarrierShared() before each barrier() cost time? (a device probe)

    python3 tools/probe_gl_fence.py [--repeats 20] [SIZE:CONFIG_JSON ...]

GLSL: values a work group's invocations write to shared variables before a barrier() are
safe to read after it; the fence before it orders nothing more. Per given config: the
kernel as generated and the same source without memoryBarrierShared(), each verified on
64 rows against float64 and timed (GL timer queries, median of --repeats, 3 interleaved
rounds)."""
import argparse
import json
import statistics
import sys

import numpy as np

from shadertune.backends.gl import GLBackend
from shadertune.backends.gl.compute.codegen import compute_source, reduce_source
from shadertune.backends.gl.compute.driver import ComputeKernel
from shadertune.backends.gl.compute.layout import ComputeLayout
from shadertune.core.config import Config
from shadertune.core.problem import Problem


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("cases", nargs="+", help="SIZE:CONFIG_JSON")
    args = ap.parse_args()
    be = GLBackend()
    print(f"GL device: {be.device().renderer}", flush=True)
    for case in args.cases:
        size, text = case.split(":", 1)
        n = int(size)
        p = Problem(n, n, n)
        cfg = Config(json.loads(text))
        L = ComputeLayout.plan(p, cfg)
        g = np.random.default_rng(0)
        A = g.uniform(-1, 1, (n, n)).astype(np.float32)
        B = g.uniform(-1, 1, (n, n)).astype(np.float32)
        rows = np.linspace(0, n - 1, 64).astype(int)
        ref = A[rows].astype(np.float64) @ B.astype(np.float64)
        src = compute_source(L, cfg)
        kernels = {}
        for label, s in (("fenced", src), ("barrier only", src.replace("memoryBarrierShared();", ""))):
            k = ComputeKernel(be.ctx, p, cfg, L, s, reduce_source(L) if L.reduces else None,
                              pool=be.pool, transfers=be.transfers)
            C = k.run(A, B)
            err = float(np.linalg.norm(C[rows] - ref) / np.linalg.norm(ref))
            kernels[label] = (k, err)
        times = {label: [] for label in kernels}
        for _ in range(3):
            for label, (k, _) in kernels.items():
                times[label] += k.time(repeats=args.repeats, warmup=3)
        med = {label: statistics.median(t) for label, t in times.items()}
        f, b = med["fenced"], med["barrier only"]
        print(f"n={n} {dict(cfg)}: fenced {f:.4f} ms ({2 * n ** 3 / f / 1e9:.1f} TFLOP/s, err "
              f"{kernels['fenced'][1]:.1e}), barrier only {b:.4f} ms ({2 * n ** 3 / b / 1e9:.1f} TFLOP/s, err "
              f"{kernels['barrier only'][1]:.1e}): x{f / b:.3f}", flush=True)
        for k, _ in kernels.values():
            k.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
