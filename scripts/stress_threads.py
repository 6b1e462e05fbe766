#!/usr/bin/env python3
"""Threads calling shadertune.matmul at once for a while; every result checked.

    scripts/stress-threads [--threads 8] [--seconds 60] [--backend gl] [--shapes 12]

Each thread draws calls from a shared set of shapes (2-D, stacked, GEMV, 1-D @ 1-D,
alpha/beta with out, strided views), so threads meet the same shapes (kernels cached
per thread) and new ones (compiles while others run).  Every result is compared with
a float64 reference (error <= 1e-5 x |alpha| |A| |B| + |beta| |C|, per element).  Prints calls and failures per thread;
exit status 1 on any wrong result or exception.
"""
import argparse
import pathlib
import sys
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import shadertune  # noqa: E402


def shapes(n: int, seed: int = 0) -> list[tuple[int, int, int]]:
    rng = np.random.default_rng(seed)
    return [tuple(int(x) for x in rng.integers(1, 48, 3)) for _ in range(n)]


def one_call(rng, shape, backend) -> float:
    """One random call on `shape`; its error against float64."""
    M, N, K = shape
    kind = rng.integers(0, 5)
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    alpha, beta = 1.0, 0.0
    out = None
    if kind == 1:          # stacked, broadcast B
        A = rng.standard_normal((3, M, K))
    elif kind == 2:        # GEMV with beta
        B = rng.standard_normal(K)
        out = rng.standard_normal(M).astype(np.float32)
        alpha, beta = 0.7, 1.3
    elif kind == 3:        # strided views, alpha/beta into a float64 out
        A = rng.standard_normal((2 * M, 2 * K))[::2, ::2]
        out = rng.standard_normal((M, N))
        alpha, beta = 1.5, -0.5
    elif kind == 4:        # 1-D @ 1-D
        A, B = rng.standard_normal(K), rng.standard_normal(K)
    C0 = None if out is None else out.astype(np.float64)
    ref = alpha * np.matmul(A, B) + (beta * C0 if beta else 0.0)
    # each element's own scale: |alpha| |A| |B| + |beta| |C| (cancellation makes |ref| no scale)
    bound = abs(alpha) * np.matmul(np.abs(A), np.abs(B)) + (abs(beta) * np.abs(C0) if beta else 0.0)
    got = shadertune.matmul(A, B, out, backend=backend, config="default", alpha=alpha, beta=beta)
    got = np.asarray(got, np.float64)
    return float(np.max(np.abs(got - ref) / np.maximum(bound, 1e-300)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--backend", default="gl")
    p.add_argument("--shapes", type=int, default=12, help="distinct shapes shared by the threads")
    args = p.parse_args()
    pool = shapes(args.shapes)
    stats = [{"calls": 0, "wrong": 0, "errors": [], "max_err": 0.0} for _ in range(args.threads)]
    start = threading.Barrier(args.threads)
    stop_at = [0.0]

    def work(i):
        rng = np.random.default_rng(1000 + i)
        s = stats[i]
        start.wait()
        while time.perf_counter() < stop_at[0]:
            shape = pool[int(rng.integers(len(pool)))]
            try:
                err = one_call(rng, shape, args.backend)
            except Exception as e:   # noqa: BLE001 - reported below
                s["errors"].append(f"{shape}: {type(e).__name__}: {e}")
                continue
            s["calls"] += 1
            s["max_err"] = max(s["max_err"], err)
            if not err <= 1e-5:
                s["wrong"] += 1

    stop_at[0] = time.perf_counter() + args.seconds
    threads = [threading.Thread(target=work, args=(i,), name=f"stress-{i}") for i in range(args.threads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    bad = 0
    for i, s in enumerate(stats):
        print(f"thread {i}: {s['calls']} calls, {s['wrong']} wrong, {len(s['errors'])} exceptions, "
              f"max error/bound {s['max_err']:.2e}")
        for e in s["errors"][:3]:
            print(f"    {e}")
        bad += s["wrong"] + len(s["errors"])
    total = sum(s["calls"] for s in stats)
    print(f"{args.threads} threads, {wall:.1f} s, {total} calls, {len(pool)} shapes: "
          f"{'all correct' if not bad else f'{bad} FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
