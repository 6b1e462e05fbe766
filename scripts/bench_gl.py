#!/usr/bin/env python3
"""GL matmul benchmark (a script, not a test): hand-picked and hand-tuned kernels at large sizes.

    scripts/bench-gl --out DIR [--sizes 1024,2048,4096] [--repeats 5]

For each size: the naive one-output-per-fragment shader, the other hand-tuned
baselines and a handful of generated configs of both output paths (MRT and
image), each verified against a float64 reference on a sampled block of rows
and timed with GL timer queries (median, warm-up excluded).  Writes
DIR/gl-configs.json and DIR/gl-configs.md and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from shadertune.backends.gl import GLBackend, handtuned  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

# MRT configs (glsl 330, texelFetch; the image-path knobs at their MRT values) ...
HANDFUL = [
    dict(mc="1x4", mrt_h=4, mrt_w=2, np=128, unroll=4),
    dict(mc="1x4", mrt_h=4, mrt_w=2, np=512, unroll=8),
    dict(mc="1x4", mrt_h=2, mrt_w=4, np=256, unroll=4),
    dict(mc="2x2", mrt_h=2, mrt_w=4, np=256, unroll=4),
    dict(mc="2x2", mrt_h=4, mrt_w=2, np=256, unroll=8),
    dict(mc="1x4", mrt_h=4, mrt_w=1, np=256, unroll=4),
    dict(mc="1x4", mrt_h=2, mrt_w=2, np=64, unroll=4),
    dict(mc="1x4", mrt_h=4, mrt_w=2, np=4096, unroll=8),
]
# ... and image-path configs (a block of C per fragment, imageStore; glsl: the device's)
IMAGE_HANDFUL = [
    dict(block_h=8, block_w=16, a_src="texture", b_src="ssbo", np=256, unroll=2),
    dict(block_h=8, block_w=16, a_src="texture", b_src="texture", np=256, unroll=2),
    dict(block_h=16, block_w=8, a_src="texture", b_src="texture", np=256, unroll=2),
    dict(block_h=16, block_w=8, a_src="texture", b_src="ssbo", np=1024, unroll=1),
    dict(block_h=8, block_w=8, a_src="texture", b_src="ssbo", np=256, unroll=4),
    dict(block_h=4, block_w=16, a_src="ssbo", b_src="ssbo", np=256, unroll=2),
]


def verify(out, A, B, rows=64) -> float:
    """Relative error on a sample of rows (the full float64 product is slow at 4096)."""
    idx = np.linspace(0, A.shape[0] - 1, min(rows, A.shape[0])).astype(int)
    ref = A[idx].astype(np.float64) @ B.astype(np.float64)
    return float(np.linalg.norm(out[idx] - ref) / np.linalg.norm(ref))


def measure(kern, A, B, repeats):
    t0 = time.perf_counter()
    out = kern.run(A, B)
    first_s = time.perf_counter() - t0
    err = verify(out, A, B)
    if not (np.isfinite(err) and err <= 1e-5):
        return None, err
    reps = repeats if first_s < 2.0 else 2        # very slow kernels: fewer repeats
    return kern.time(repeats=reps, warmup=1), err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-naive-above", type=int, default=4096)
    ap.add_argument("--only", help="comma-separated substrings: run only kernels whose label has one")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    be = GLBackend()
    dev = be.device()
    print(f"GL device: {dev.renderer} | {dev.driver}\nlimits: {dev.limits}", flush=True)
    rows, doc = [], {"device": dev.to_dict(), "rows": []}
    rng = np.random.default_rng(0)
    sizes = [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        p = Problem(n, n, n)
        A = rng.standard_normal((n, n)).astype(np.float32)
        B = rng.standard_normal((n, n)).astype(np.float32)
        kernels = [("handtuned:" + name, lambda name=name: handtuned.build(be, p, name))
                   for name in handtuned.BASELINES if not (name == "naive" and n > args.skip_naive_above)]
        asm_ok, asm_note = handtuned.assembly_support(be)
        if asm_ok:
            kernels.append(("handtuned:expert-4x4-mrt-asm", lambda: handtuned.build_assembly(be, p)))
        elif n == sizes[0]:
            print("  " + asm_note, flush=True)
        kpad = -(-n // 4) * 4
        space = be.space(p)
        configs = [Config(glsl="330", fetch="texelFetch", out="mrt", block_h=0, block_w=0, a_src="texture",
                          b_src="texture", **dict(kw, np=min(kw["np"], kpad))) for kw in HANDFUL]
        if "image" in space.knobs["out"]:
            configs += [Config(out="image", glsl=space.constants["image_glsl"], fetch="texelFetch", mc="1x4",
                               mrt_h=1, mrt_w=1, **dict(kw, np=min(kw["np"], kpad))) for kw in IMAGE_HANDFUL]
        for cfg in configs:
            kw = {k: v for k, v in cfg.items() if k not in ("glsl", "fetch") and
                  (cfg["out"] == "image" or k not in ("out", "block_h", "block_w", "a_src", "b_src"))}
            why = space.why_invalid(cfg)
            if why:
                print(f"  skip {kw}: {why}")
                continue
            kernels.append((json.dumps(kw, sort_keys=True), lambda cfg=cfg: be.build(p, cfg)))
        if args.only:
            kernels = [(lb, mk) for lb, mk in kernels if any(o in lb for o in args.only.split(","))]
        for label, make in kernels:
            try:
                with make() as k:
                    times, err = measure(k, A, B, args.repeats)
                    compile_ms = k.compile_ms
            except Exception as e:
                print(f"  {n} {label}: FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
                doc["rows"].append({"n": n, "kernel": label, "status": "failed", "message": str(e)[:500]})
                continue
            if times is None:
                print(f"  {n} {label}: WRONG (error {err:.2e})", flush=True)
                doc["rows"].append({"n": n, "kernel": label, "status": "wrong", "error": err})
                continue
            ms = statistics.median(times)
            gf = 2 * n ** 3 / ms / 1e6
            row = {"n": n, "kernel": label, "status": "ok", "median_ms": ms, "times_ms": times,
                   "gflops": gf, "error": err, "compile_ms": compile_ms}
            doc["rows"].append(row)
            print(f"  {n:5d} {gf:9.1f} GFLOP/s {ms:9.3f} ms err {err:.1e}  {label}", flush=True)
    with open(os.path.join(args.out, "gl-configs.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = [f"GL kernels on {dev.renderer} ({dev.driver})", "",
             "| n | kernel | GFLOP/s | ms (median) | x naive | rel. error |", "|---|---|---|---|---|---|"]
    for n in sorted({r["n"] for r in doc["rows"]}):
        naive = next((r["gflops"] for r in doc["rows"] if r["n"] == n and r["kernel"] == "handtuned:naive"
                      and r["status"] == "ok"), None)
        for r in [r for r in doc["rows"] if r["n"] == n and r["status"] == "ok"]:
            x = f"{r['gflops'] / naive:.1f}" if naive else "-"
            lines.append(f"| {n} | `{r['kernel']}` | {r['gflops']:.1f} | {r['median_ms']:.3f} | {x} | {r['error']:.1e} |")
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "gl-configs.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
