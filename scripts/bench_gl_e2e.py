#!/usr/bin/env python3
"""GL end to end (a benchmark script, not a test): matmul on numpy arrays against its kernel.

    scripts/bench-gl-e2e --out DIR [--db tune.sqlite] [--config JSON] [--shapes 4096,4096x4096x32]
                         [--repeats 5]

For each shape, the config matmul(config="auto") takes from the store (or
--config), verified against float64 on a sample of rows, then:
  kernel     the kernel's own GPU time (GL timer queries, warm, median)
  run        kernel.run(A, B, out=out): uploads, passes and one read-back into
             the caller's array (wall, median), for the 'staged' and 'direct'
             transfer paths, with the upload and read-back parts timed apart
  matmul     shadertune.matmul(A, B, out=out, db=...) through the front door (wall,
             median, kernels cached after the first call)
and the ratio of the kernel's time to each (the issue's target: matmul >= 0.85).
Writes DIR/gl-e2e.json and DIR/gl-e2e.md and prints the table.
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

import shadertune  # noqa: E402
from shadertune.front import matmul as api  # noqa: E402
from shadertune.backends.gl import GLBackend  # noqa: E402
from shadertune.backends.gl.platform.transfer import Transfers  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.selection.chain import select_config  # noqa: E402


def parse_shape(s: str) -> tuple[int, int, int]:
    parts = [int(x) for x in s.lower().split("x")]
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3:
        raise SystemExit(f"shape must be N or MxNxK, got {s!r}")
    return tuple(parts)


def sampled_error(out, A, B, rows=64) -> float:
    idx = np.linspace(0, A.shape[0] - 1, min(rows, A.shape[0])).astype(int)
    ref = A[idx].astype(np.float64) @ B.astype(np.float64)
    return float(np.linalg.norm(out[idx] - ref) / np.linalg.norm(ref))


def wall_ms(fn, ctx, repeats) -> float:
    ts = []
    for _ in range(repeats):
        ctx.finish()
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def measure_run(be, p, cfg, A, B, out, mode, repeats) -> dict:
    """kernel time, run() wall time and its parts, on transfer path `mode`."""
    from shadertune.backends.gl.image import PATH as IMAGE
    from shadertune.backends.gl.paths import path_of
    tr = Transfers(be.ctx, mode=mode)
    path = path_of(cfg)
    layout = path.plan(p, cfg)
    # the image path on transfer path `mode`; the render-target path on the driver's own calls
    k = path.build(be.ctx, p, cfg, layout, path.source(layout, cfg), transfers=tr if path is IMAGE else None)
    try:
        k.run(A, B, out=out)
        err = sampled_error(out, A, B)
        kernel = statistics.median(k.time(repeats=repeats, warmup=1))
        run = wall_ms(lambda: k.run(A, B, out=out), be.ctx, repeats)
        load = wall_ms(lambda: (k.load(A, B), be.ctx.finish()), be.ctx, repeats)
        which = k.execute()
        read = wall_ms(lambda: k.read(which, out), be.ctx, repeats)
    finally:
        k.release()
        tr.release()
    # MRT kernels pack on the host and read every target: their 'GB/s' include that
    return {"transfer": mode, "error": err, "kernel_ms": kernel, "run_ms": run, "load_ms": load,
            "read_ms": read, "upload_gbs": (A.nbytes + B.nbytes) / load / 1e6,
            "readback_gbs": out.nbytes / read / 1e6}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--db", help="tuning store matmul(config='auto') reads (default: shadertune's)")
    ap.add_argument("--config", help="a config (JSON) for every shape instead of the store's")
    ap.add_argument("--shapes", default="4096,4096x4096x32")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    be = GLBackend()
    dev = be.device()
    print(f"GL device: {dev.renderer} | {dev.driver}", flush=True)
    rng = np.random.default_rng(0)
    doc = {"device": dev.to_dict(), "rows": []}
    for shape in args.shapes.split(","):
        M, N, K = parse_shape(shape)
        p = Problem(M, N, K)
        cfg, how = select_config(be, p, db=args.db)
        if args.config:
            # the given config, its passes no longer than this K
            given = Config.from_json(args.config)
            given = given.replace(np=min(int(given["np"]), -(-K // 4) * 4))
            if be.space(p).why_invalid(given) is None:
                cfg, how = given, "given"
            else:
                how += f" (the given config is not valid here: {be.space(p).why_invalid(given)})"
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        out = np.empty((M, N), np.float32)
        row = {"shape": [M, N, K], "config": cfg.to_dict(), "config_from": how, "runs": []}
        for mode in ("staged", "direct"):
            r = measure_run(be, p, cfg, A, B, out, mode, args.repeats)
            row["runs"].append(r)
            print(f"  {M}x{N}x{K} {mode}: kernel {r['kernel_ms']:.2f} ms, run {r['run_ms']:.2f} ms "
                  f"(upload {r['upload_gbs']:.1f} GB/s, read-back "
                  f"{r['readback_gbs']:.1f} GB/s), error {r['error']:.1e}", flush=True)
        api.clear_cache()
        mm_kw = dict(config=cfg.to_dict() if how == "given" else "auto", db=args.db, out=out)
        shadertune.matmul(A, B, **mm_kw)
        row["matmul_error"] = sampled_error(out, A, B)
        row["matmul_ms"] = wall_ms(lambda: shadertune.matmul(A, B, **mm_kw), be.ctx, args.repeats)
        api.clear_cache()
        kernel = min(r["kernel_ms"] for r in row["runs"])
        row["kernel_gflops"] = p.flops / kernel / 1e6
        row["matmul_gflops"] = p.flops / row["matmul_ms"] / 1e6
        row["matmul_over_kernel"] = kernel / row["matmul_ms"]
        print(f"  {M}x{N}x{K}: kernel {row['kernel_gflops']:.0f} GFLOP/s, matmul {row['matmul_gflops']:.0f} "
              f"GFLOP/s ({row['matmul_ms']:.1f} ms a call) = {row['matmul_over_kernel']:.0%} of the kernel "
              f"[{how}: {cfg.to_dict()}]", flush=True)
        doc["rows"].append(row)
    with open(os.path.join(args.out, "gl-e2e.json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = [f"GL end to end on {dev.renderer} ({dev.driver})", "",
             "| problem | config | kernel GFLOP/s | matmul ms | matmul / kernel | run ms staged / direct "
             "| upload GB/s staged / direct | read-back GB/s staged / direct |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        s, d = r["runs"]
        c = r["config"]
        desc = (f"{c.get('block_h')}x{c.get('block_w')} A={c.get('a_src')} B={c.get('b_src')}"
                if c.get("out") == "image" else f"mrt {c.get('mc')} {c.get('mrt_h')}x{c.get('mrt_w')}")
        fmt = "{:.1f}".format
        lines.append(f"| {'x'.join(map(str, r['shape']))} | {desc} np={c.get('np')} | {r['kernel_gflops']:.0f} "
                     f"| {r['matmul_ms']:.1f} | {r['matmul_over_kernel']:.0%} | {s['run_ms']:.1f} / {d['run_ms']:.1f} "
                     f"| {fmt(s['upload_gbs'])} / {fmt(d['upload_gbs'])} "
                     f"| {fmt(s['readback_gbs'])} / {fmt(d['readback_gbs'])} |")
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "gl-e2e.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
