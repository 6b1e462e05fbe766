#!/usr/bin/env python3
"""Probe the GL image path on a GPU (a measurement script, not a test).

    scripts/probe-gl-image --out DIR [--budget 330] [--stages correct,ceilings,grid,big,transfer,e2e,tune]

Stages, each within what is left of --budget seconds (a stage that would not fit
is skipped and says so):
  correct   image kernels at odd shapes (every source pair, several blocks, both
            carries, alpha/beta into out=, both transfer paths) against float64,
            outputs NaN-poisoned before every run
  ceilings  the quick roofline, with the storage-buffer load rate
  grid      a grid of blocks (past the register budget too) x operand sources x
            unroll at --grid-size, median of timed runs
  big       the grid's best at 4096 over np, carries and unrolls
  transfer  upload / read-back GB/s of a 4096^2 operand, direct and staged
  e2e       scripts/bench-gl-e2e with the best config found (matmul and
            kernel.run against the kernel's own time, 4096^2 and 4096x4096x32)
  tune      python -m shadertune.search --backend gl --size 4096 with what is left
Writes DIR/probe.json (and the tune's report) and prints a summary last.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from shadertune.backends.gl import GLBackend  # noqa: E402
from shadertune.backends.gl.image.codegen import image_source, plan_layout  # noqa: E402
from shadertune.backends.gl.image.driver import ImageKernel  # noqa: E402
from shadertune.backends.gl.platform.transfer import Transfers  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

T0 = time.monotonic()
DOC: dict = {}


def left(budget) -> float:
    return budget - (time.monotonic() - T0)


def say(*a):
    print(f"[{time.monotonic() - T0:6.1f}s]", *a, flush=True)


def cfg(glsl, **kw):
    base = dict(out="image", glsl=glsl, fetch="texelFetch", unroll=1, np=256, mc="1x4", mrt_h=1, mrt_w=1,
                block_h=8, block_w=16, a_src="texture", b_src="ssbo")
    return Config({**base, **kw})


def kernel(be, p, c, carry="rmw", transfers=None):
    layout = plan_layout(p, c)
    return ImageKernel(be.ctx, p, c, layout, image_source(layout, c, carry=carry), pool=be.pool,
                       transfers=transfers or be.transfers, carry=carry)


def rel(out, ref) -> float:
    return float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))


def sampled_error(out, A, B, rows=64) -> float:
    idx = np.linspace(0, A.shape[0] - 1, min(rows, A.shape[0])).astype(int)
    ref = A[idx].astype(np.float64) @ B.astype(np.float64)
    return rel(out[idx], ref)


def stage_correct(be, glsl):
    rows = []
    rng = np.random.default_rng(1)
    shapes = [(37, 61, 129), (257, 130, 333), (1000, 1001, 999), (512, 512, 512)]
    blocks = [(8, 16), (16, 8), (4, 4), (1, 4), (12, 8), (2, 12)]
    srcs = [("texture", "texture"), ("texture", "ssbo"), ("ssbo", "texture"), ("ssbo", "ssbo")]
    for M, N, K in shapes:
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        C = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        ref = A.astype(np.float64) @ B.astype(np.float64)
        p = Problem(M, N, K)
        for i, (blk, src) in enumerate([(b, s) for b in blocks for s in srcs]):
            np_ = min((16, 256, 4 * -(-K // 4))[i % 3], 4 * -(-K // 4))
            unroll = (1, 2)[i % 2] if (np_ // 4) % 2 == 0 else 1
            carry = "pingpong" if i % 5 == 0 else "rmw"
            c = cfg(glsl, block_h=blk[0], block_w=blk[1], a_src=src[0], b_src=src[1], np=np_, unroll=unroll)
            row = {"shape": [M, N, K], "config": c.to_dict(), "carry": carry}
            try:
                with kernel(be, p, c, carry) as k:
                    e1 = rel(k.run(A, B), ref)
                    out = np.full((M, N), np.nan, np.float32)
                    k.run(A, B, C, alpha=-0.5, beta=2.0, out=out)
                    e2 = rel(out, -0.5 * ref + 2.0 * C)
                    got, _ = k.checked_run(A, B, limit_ms=1e9)
                    e3 = rel(got, ref)
                row.update(errors=[e1, e2, e3], ok=bool(max(e1, e2, e3) <= 1e-5))
            except Exception as e:
                row.update(ok=False, message=f"{type(e).__name__}: {str(e)[:300]}")
            rows.append(row)
            if not row["ok"]:
                say("WRONG/FAILED", row)
        # the direct transfer path too
        tr = Transfers(be.ctx, mode="direct")
        try:
            with kernel(be, p, cfg(glsl, block_h=4, block_w=8, np=16), transfers=tr) as k:
                e = rel(k.run(A, B, C, alpha=1.0, beta=1.0), ref + C)
            rows.append({"shape": [M, N, K], "transfer": "direct", "errors": [e], "ok": bool(e <= 1e-5)})
        finally:
            tr.release()
    bad = [r for r in rows if not r["ok"]]
    say(f"correct: {len(rows) - len(bad)} of {len(rows)} ok")
    return {"rows": rows, "failed": len(bad)}


def time_kernel(k, A, B, repeats=3):
    k.run(A, B)
    return statistics.median(k.time(repeats=repeats, warmup=1))


def stage_grid(be, glsl, n, budget_end, unrolls=(1, 2)):
    rng = np.random.default_rng(2)
    A = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    B = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    p = Problem(n, n, n)
    blocks = [(8, 16), (16, 8), (8, 8), (4, 16), (8, 12), (12, 8), (16, 4), (4, 8), (2, 16), (12, 12),
              (16, 12), (12, 16), (16, 16), (8, 4), (4, 12), (1, 16)]
    srcs = [("texture", "ssbo"), ("texture", "texture"), ("ssbo", "ssbo"), ("ssbo", "texture")]
    rows = []
    for u in unrolls:
        for src in srcs:
            for blk in blocks:
                if time.monotonic() > budget_end:
                    say("grid: out of time")
                    return rows
                c = cfg(glsl, block_h=blk[0], block_w=blk[1], a_src=src[0], b_src=src[1], unroll=u, np=256)
                row = {"n": n, "config": c.to_dict()}
                try:
                    t = time.perf_counter()
                    with kernel(be, p, c) as k:
                        row["compile_ms"] = k.compile_ms
                        out = k.run(A, B)
                        row["error"] = sampled_error(out, A, B)
                        ms = statistics.median(k.time(repeats=3, warmup=1))
                    row.update(ms=ms, gflops=2 * n ** 3 / ms / 1e6, wall_s=time.perf_counter() - t)
                    say(f"grid {n} {blk[0]}x{blk[1]} A={src[0]} B={src[1]} u={u}: {row['gflops']:.0f} GFLOP/s "
                        f"err {row['error']:.1e} compile {row['compile_ms']:.0f} ms")
                except Exception as e:
                    row["message"] = f"{type(e).__name__}: {str(e)[:300]}"
                    say("grid failed", row)
                rows.append(row)
    return rows


def stage_big(be, glsl, grid, budget_end, n=4096):
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    B = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    p = Problem(n, n, n)
    ok = sorted((r for r in grid if "gflops" in r and r["error"] <= 1e-5), key=lambda r: -r["gflops"])
    tops = [Config(r["config"]) for r in ok[:6]] or [cfg(glsl)]
    trials = []
    for i, c in enumerate(tops):
        for np_ in ((256, 1024, n) if i < 3 else (256,)):
            trials.append((c.replace(np=np_), "rmw"))
    for c in tops[:2]:
        trials.append((c, "pingpong"))
        trials.append((c.replace(unroll=4), "rmw"))
        trials.append((c.replace(unroll=1), "rmw"))
        trials.append((c.replace(np=512), "rmw"))
    rows = []
    seen = set()
    for c, carry in trials:
        if (c, carry) in seen:
            continue
        seen.add((c, carry))
        if time.monotonic() > budget_end:
            say("big: out of time")
            break
        row = {"n": n, "config": c.to_dict(), "carry": carry}
        try:
            with kernel(be, p, c, carry) as k:
                out = k.run(A, B)
                row["error"] = sampled_error(out, A, B)
                ms = statistics.median(k.time(repeats=3, warmup=1))
                row.update(ms=ms, gflops=2 * n ** 3 / ms / 1e6, compile_ms=k.compile_ms)
            say(f"big {c['block_h']}x{c['block_w']} A={c['a_src']} B={c['b_src']} u={c['unroll']} np={c['np']} "
                f"{carry}: {row['gflops']:.0f} GFLOP/s err {row['error']:.1e}")
        except Exception as e:
            row["message"] = f"{type(e).__name__}: {str(e)[:300]}"
            say("big failed", row)
        rows.append(row)
    return rows


def _timed(fn, ctx, repeats=3):
    ts = []
    for _ in range(repeats):
        ctx.finish()
        t = time.perf_counter()
        fn()
        ctx.finish()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def stage_transfer(be, n=4096):
    ctx = be.ctx
    A = np.random.default_rng(4).uniform(-1, 1, (n, n)).astype(np.float32)
    out = np.empty_like(A)
    nbytes = A.nbytes
    tex = ctx.texture((n // 4, n), 4, dtype="f4")
    buf = ctx.buffer(reserve=nbytes)
    res = {}
    try:
        for mode in ("direct", "staged"):
            tr = Transfers(ctx, mode=mode)
            try:
                tr.write_texture(tex, A)                  # first use: staging made
                res[f"{mode}_upload_texture_gbs"] = nbytes / _timed(lambda: tr.write_texture(tex, A), ctx) / 1e9
                res[f"{mode}_upload_buffer_gbs"] = nbytes / _timed(lambda: tr.write_buffer(buf, A), ctx) / 1e9
                tr.read_texture(tex, out)
                res[f"{mode}_readback_gbs"] = nbytes / _timed(lambda: tr.read_texture(tex, out), ctx) / 1e9
                res[f"{mode}_roundtrip_ok"] = bool(np.array_equal(out, A))
            finally:
                tr.release()
        res["host_memcpy_gbs"] = nbytes / _timed(lambda: np.copyto(out, A), ctx) / 1e9
    finally:
        tex.release()
        buf.release()
    say("transfer", {k: round(v, 2) if isinstance(v, float) else v for k, v in res.items()})
    return res


def stage_e2e(best: Config, out_dir: str, n: int, budget_s: float):
    """scripts/bench-gl-e2e with the probe's best config, at n^3 and n x n x 32."""
    cmd = [sys.executable, "scripts/bench-gl-e2e", "--out", out_dir, "--config", json.dumps(best.to_dict()),
           "--shapes", f"{n},{n}x{n}x32"]
    say("e2e:", " ".join(cmd))
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=budget_s)
    say("e2e rc", p.returncode, "\n" + p.stdout[-3000:] + p.stderr[-2000:])
    path = os.path.join(out_dir, "gl-e2e.json")
    return json.load(open(path))["rows"] if p.returncode == 0 and os.path.exists(path) else {"rc": p.returncode}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=330.0)
    ap.add_argument("--grid-size", type=int, default=2048)
    ap.add_argument("--big-size", type=int, default=4096, help="size of the big, transfer, e2e and tune stages")
    ap.add_argument("--grid-seconds", type=float, default=110.0)
    ap.add_argument("--stages", default="correct,ceilings,grid,big,transfer,e2e,tune")
    args = ap.parse_args(argv)
    args.out = os.path.abspath(args.out)     # the e2e and tune stages run in the checkout
    os.makedirs(args.out, exist_ok=True)
    stages = args.stages.split(",")
    be = GLBackend()
    dev = be.device()
    DOC["device"] = dev.to_dict()
    say(f"device: {dev.renderer} | {dev.driver}\n  limits: {dev.limits}")
    sp = be.space(Problem(args.big_size, args.big_size, args.big_size))
    glsl = sp.constants["image_glsl"]
    say(f"space at 4096: out {sp.knobs['out']}, srcs {sp.knobs['a_src']}, start {sp.phases.start}")

    def save():
        with open(os.path.join(args.out, "probe.json"), "w") as f:
            json.dump(DOC, f, indent=1, default=str)

    if "correct" in stages:
        DOC["correct"] = stage_correct(be, glsl)
        save()
    if "ceilings" in stages and left(args.budget) > 60:
        from shadertune.backends.gl.microbench import measure_gl
        m = measure_gl(be.ctx, preset="quick")
        DOC["ceilings"] = m
        say("ceilings", m["ceilings"])
        save()
    best = cfg(glsl)
    if "grid" in stages and left(args.budget) > 120:
        DOC["grid"] = stage_grid(be, glsl, args.grid_size,
                                 time.monotonic() + min(args.grid_seconds, left(args.budget) - 100))
        save()
    if "big" in stages and left(args.budget) > 80:
        DOC["big"] = stage_big(be, glsl, DOC.get("grid", []), time.monotonic() + min(60, left(args.budget) - 60),
                               n=args.big_size)
        ok = [r for r in DOC["big"] if "gflops" in r and r["error"] <= 1e-5 and r["carry"] == "rmw"]
        if ok:
            best = Config(max(ok, key=lambda r: r["gflops"])["config"])
        save()
    be.pool.clear()
    if "transfer" in stages and left(args.budget) > 40:
        DOC["transfer"] = stage_transfer(be, n=args.big_size)
        save()
    if "e2e" in stages and left(args.budget) > 40:
        DOC["e2e"] = stage_e2e(best, args.out, args.big_size, max(30.0, left(args.budget) - 30))
        save()
    be.pool.clear()
    be.transfers.release()
    if "tune" in stages and left(args.budget) > 60:
        limit = int(left(args.budget) - 30)
        cmd = [sys.executable, "-m", "shadertune.search", "--backend", "gl", "--size", str(args.big_size),
               "--strategy", "phased", "--time-limit", str(limit), "--db", f"{args.out}/tune.sqlite",
               "--report", f"{args.out}/gl-{args.big_size}.json", "-q"]
        say("tune:", " ".join(cmd))
        t = time.monotonic()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=limit + 60)
        DOC["tune"] = {"rc": p.returncode, "seconds": time.monotonic() - t, "tail": p.stdout[-3000:] + p.stderr[-2000:]}
        say("tune rc", p.returncode, "\n" + DOC["tune"]["tail"])
        save()
    # summary
    say("SUMMARY")
    if "correct" in DOC:
        print(f"  correct: {DOC['correct']['failed']} failed of {len(DOC['correct']['rows'])}")
    if "ceilings" in DOC:
        print("  ceilings:", {k: round(v, 2) for k, v in DOC["ceilings"]["ceilings"].items()})
    for key in ("grid", "big"):
        ok = sorted((r for r in DOC.get(key, []) if "gflops" in r), key=lambda r: -r["gflops"])[:8]
        for r in ok:
            c = r["config"]
            print(f"  {key} {r['n']} {c['block_h']}x{c['block_w']} A={c['a_src']} B={c['b_src']} u={c['unroll']} "
                  f"np={c['np']} {r.get('carry', '')}: {r['gflops']:.0f} GFLOP/s")
    if "transfer" in DOC:
        print("  transfer:", {k: round(v, 2) if isinstance(v, float) else v for k, v in DOC["transfer"].items()})
    for r in DOC.get("e2e", []) if isinstance(DOC.get("e2e"), list) else []:
        print(f"  e2e {r['shape']}: matmul / kernel {r['matmul_over_kernel']:.0%}, kernel "
              f"{r['kernel_gflops']:.0f} GFLOP/s, runs {[round(x['run_ms'], 1) for x in r['runs']]} ms")
    save()


if __name__ == "__main__":
    main()
