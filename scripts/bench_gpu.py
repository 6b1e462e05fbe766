#!/usr/bin/env python3
"""The whole GPU measurement in one call (a benchmark script, not a test).

    scripts/bench-gpu OUT_DIR [--quick] [--gl-sizes 1024,2048,4096] [--gl-time full|S,S,S]
                      [--sq-sizes 1024,2048] [--skip STAGES]

On a machine with an NVIDIA GPU (NVIDIA EGL for GL, CuPy for CUDA), in order:
  1. the roofline: fragment FMA peak, texel-fetch rate, storage-buffer load rate,
     GL compute FMA peak, CUDA FMA peak and DRAM bandwidth -> ceilings.json
  2. GL hand-tuned baselines and a handful of configs of both output paths
     (MRT and image)                                -> gl-configs.{json,md}
  3. a phased GL tune per size, complete unless --gl-time limits it
     (store: tune.sqlite; its wall time is the report's `seconds`) -> gl.json
  3a. GL end to end: matmul on numpy arrays with the tuned config against its
     kernel, upload / read-back GB/s, at the largest GL size and skinny
     N x N x 32 (scripts/bench-gl-e2e)             -> gl-e2e.{json,md}
  3b. (only with --sq-sizes) search quality on the MRT subspace glsl=330, texelFetch,
     unroll=4, np in 16..2048 (phased, random, exhaustive) -> sq-N.json
  4. the CUDA benchmark, tuned kernels vs cuBLAS    -> bench-cuda.{json,md}, cuda.json
  5. numpy.matmul on the CPU as a baseline of both   -> baselines in gl.json, cuda.json
  6. reports with baselines and rooflines           -> printed, and *.png
Every stage's output is logged to bench-gpu.log; a failing stage is reported
and the rest still run.

The GL targets of issue 12 in one call (within one 10-minute device command):
    scripts/bench-gpu OUT --skip cuda,numpy,sq --gl-sizes 4096
(roofline with the storage-buffer rate, hand-tuned and handful configs, the
complete phased tune at 4096 with its seconds, end to end at 4096^3 and
4096x4096x32); the 1024 and 2048 tunes in a second call:
    scripts/bench-gpu OUT2 --skip roofline,gl-configs,gl-e2e,cuda,numpy,sq --gl-sizes 1024,2048
The default run does not fit one 10-minute device command: its CUDA stage tunes
every bench-cuda problem through the search core for 60 s each (--quick: 7
problems, 20 s each). Split it: the GL stages as above, then the CUDA stage alone
(--skip roofline,gl-configs,gl-tune,gl-e2e,numpy,sq --quick), or scripts/bench-cuda
by problem group (BENCHMARKS.md, "Not measured yet").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def stage(name, cmd, log, timeout):
    t0 = time.time()
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    log.write(f"\n== {name}: {' '.join(cmd)}\n")
    log.flush()
    try:
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), "timeout"
    log.write(out)
    tail = "\n".join(out.strip().splitlines()[-40:])
    print(tail, flush=True)
    print(f"== {name}: rc={rc} in {time.time() - t0:.0f} s", flush=True)
    log.write(f"== {name}: rc={rc} in {time.time() - t0:.0f} s\n")
    return rc == 0


# the subspace exhaustive search can cover on a GPU in minutes (456 configs at 1024): the
# MRT path's, as measured before the image path existed
SQ_SUBSPACE = ["--fix", "out=mrt", "--fix", "glsl=330", "--fix", "fetch=texelFetch", "--fix", "unroll=4",
               "--fix", "np=16,24,32,48,64,96,128,192,256,384,512,768,1024,2048"]


def gl_baselines(report_path, configs_path):
    """Put the hand-tuned GL kernels' numbers into the GL report as baselines."""
    if not (os.path.exists(report_path) and os.path.exists(configs_path)):
        return
    rep = json.load(open(report_path))
    rows = json.load(open(configs_path))["rows"]
    for prob in rep["problems"]:
        base = prob.setdefault("baselines", {})
        for r in rows:
            if r["status"] == "ok" and r["n"] == prob["M"] == prob["N"] == prob["K"] \
                    and r["kernel"].startswith("handtuned:"):
                base["handtuned-" + r["kernel"].split(":", 1)[1]] = {
                    "median_ms": r["median_ms"], "gflops": r["gflops"]}
    json.dump(rep, open(report_path, "w"), indent=1)


def numpy_baselines(report_path, repeats=5):
    """numpy.matmul on this machine's CPU (float32 or float64 as the problem), as a baseline."""
    import statistics

    import numpy as np
    from shadertune.core.problem import Problem
    if not os.path.exists(report_path):
        return
    rep = json.load(open(report_path))
    rng = np.random.default_rng(0)
    for prob in rep["problems"]:
        p = Problem.from_dict(prob)
        sa, sb = p.stored_shapes
        A = rng.uniform(-1, 1, sa).astype(p.dtype)
        B = rng.uniform(-1, 1, sb).astype(p.dtype)
        a, b = (A.T if p.trans_a else A), (B.T if p.trans_b else B)
        a @ b                                   # warm-up (threads, pages)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            times.append((time.perf_counter() - t0) * 1e3)
        ms = statistics.median(times)
        prob.setdefault("baselines", {})["numpy-cpu"] = {"median_ms": ms, "gflops": p.flops / ms / 1e6}
        print(f"  numpy-cpu {p.key}: {p.flops / ms / 1e6:.1f} GFLOP/s", flush=True)
    json.dump(rep, open(report_path, "w"), indent=1)


def cuda_report(bench_path, report_path):
    """bench-cuda.json -> a report document (schema 1) with cuBLAS as a baseline."""
    if not os.path.exists(bench_path):
        return False
    b = json.load(open(bench_path))
    problems = []
    for r in b["rows"]:
        p = r["problem"]
        best = None
        if r.get("best_config"):
            best = {"config": r["best_config"], "median_ms": r["ours_ms"],
                    "gflops": r["ours_tflops"] * 1e3, "error": r["best_error"]}
        entry = {**p, "space_size": r.get("space_size", r["evaluated"]),
                 "full_space_size": r.get("full_space_size", r["evaluated"]),
                 "evaluated": r["evaluated"], "measured": r["evaluated"], "cached": 0,
                 "seconds": r.get("seconds", 0.0), "best": best, "results": [], "group": r["group"]}
        if r.get("cublas_ms"):
            entry["baselines"] = {"cublas": {"median_ms": r["cublas_ms"], "gflops": r["cublas_tflops"] * 1e3}}
        problems.append(entry)
    strategies = sorted({r["strategy"] for r in b["rows"] if r.get("strategy")})
    doc = {"schema": 1, "backend": "cuda", "device": b["device"],
           "strategy": ", ".join(strategies) or "unknown",
           "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "problems": problems}
    json.dump(doc, open(report_path, "w"), indent=1)
    return True


GL_STAGES = {"gl-configs", "gl-tune", "gl-e2e", "sq"}


def software_warning(skip: set) -> str | None:
    """One line where the GL stages would run on a software renderer (Mesa llvmpipe without
    a GPU): they take far longer there, and what they measure is the host's cores."""
    if GL_STAGES <= skip:
        return None
    try:
        from shadertune.backends.gl import GLBackend
        device = GLBackend().device()
    except Exception:      # noqa: BLE001 (no GL at all: each GL stage reports its own error)
        return None
    if not device.limits.get("software_renderer"):
        return None
    return (f"bench-gpu: GL runs on a software renderer ({device.renderer}): its stages take far "
            f"longer than on a GPU and measure this host's cores, not a GPU; --quick, --skip "
            f"or a GPU machine (BENCHMARKS.md, 'The GPU machine')")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and shorter tunes")
    ap.add_argument("--gl-sizes", default="1024,2048,4096")
    ap.add_argument("--gl-time", default="full",
                    help="phased tune seconds per GL size, comma-separated; 'full' (default): no limit")
    ap.add_argument("--sq-sizes", default="",
                    help="sizes for the search-quality stage, e.g. 1024,2048 (default none: it adds "
                         "about 70 s per size, past one 10-minute device call with the rest)")
    ap.add_argument("--skip", default="",
                    help="comma-separated stages to skip: roofline,gl-configs,gl-tune,gl-e2e,sq,cuda,numpy,"
                         "reports")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    warning = software_warning(skip)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    py = sys.executable
    t_all = time.time()
    with open(os.path.join(out, "bench-gpu.log"), "a") as log:
        if "roofline" not in skip:
            stage("roofline", [py, "-m", "shadertune.report", "roofline", "--quick", "--backend", "all",
                               "--out", f"{out}/ceilings.json"], log, 90)
        sizes = args.gl_sizes.split(",")
        if "gl-configs" not in skip:
            stage("gl-configs", [py, "scripts/bench-gl", "--out", out, "--sizes", args.gl_sizes,
                                 "--repeats", "5"], log, 150)
        if "gl-tune" not in skip:
            times = (args.gl_time.split(",") * len(sizes))[:len(sizes)]
            for n, t in zip(sizes, times):
                limit = [] if t == "full" else ["--time-limit", t]
                stage(f"gl-tune {n}", [py, "-m", "shadertune.search", "--backend", "gl", "--size", n,
                                       "--strategy", "phased", *limit, "--db", f"{out}/tune.sqlite",
                                       "--report", f"{out}/gl-{n}.json", "-q"], log,
                      600 if t == "full" else float(t) + 60)
            # one GL report over all sizes
            docs = [json.load(open(f"{out}/gl-{n}.json")) for n in sizes if os.path.exists(f"{out}/gl-{n}.json")]
            if docs:
                merged = dict(docs[0], problems=[p for d in docs for p in d["problems"]])
                json.dump(merged, open(f"{out}/gl.json", "w"), indent=1)
                for n in sizes:
                    os.remove(f"{out}/gl-{n}.json") if os.path.exists(f"{out}/gl-{n}.json") else None
            gl_baselines(f"{out}/gl.json", f"{out}/gl-configs.json")
        if "gl-e2e" not in skip:
            n = max(sizes, key=int)
            db = ["--db", f"{out}/tune.sqlite"] if os.path.exists(f"{out}/tune.sqlite") else []
            stage("gl-e2e", [py, "scripts/bench-gl-e2e", "--out", out, *db, "--shapes", f"{n},{n}x{n}x32"],
                  log, 240)
        if "sq" not in skip:
            for n in filter(None, args.sq_sizes.split(",")):
                stage(f"search-quality {n}", [py, "scripts/search-quality", "--backend", "gl", "--size", n,
                                              *SQ_SUBSPACE, "-q", "--json", f"{out}/sq-{n}.json"], log, 400)
        if "cuda" not in skip:
            # --unheld: the best and cuBLAS also timed the old way, host launch cost included
            # (columns kept in bench-cuda.{md,json}; the report uses the device times)
            # bench-cuda tunes each problem for --time-limit seconds (7 problems quick, 30 full)
            stage("cuda", [py, "scripts/bench-cuda", "--out", out, "--unheld"]
                  + (["--quick", "--time-limit", "20"] if args.quick else ["--time-limit", "60"]),
                  log, 7 * 60 if args.quick else 30 * 100)
            cuda_report(f"{out}/bench-cuda.json", f"{out}/cuda.json")
        if "numpy" not in skip:
            print("== numpy-cpu baselines", flush=True)
            for name in ("gl", "cuda"):
                numpy_baselines(f"{out}/{name}.json")
        if "reports" not in skip:
            ce = ["--ceilings", f"{out}/ceilings.json"] if os.path.exists(f"{out}/ceilings.json") else []
            for name in ("gl", "cuda"):
                if os.path.exists(f"{out}/{name}.json"):
                    stage(f"report {name}", [py, "-m", "shadertune.report", "show", f"{out}/{name}.json", *ce,
                                             "--plot", f"{out}/{name}.png"], log, 60)
            if os.path.exists(f"{out}/gl.json") and os.path.exists(f"{out}/cuda.json"):
                stage("compare", [py, "-m", "shadertune.report", "compare", f"{out}/gl.json",
                                  f"{out}/cuda.json", *ce, "--plot", f"{out}/compare.png"], log, 60)
        print(f"bench-gpu: done in {time.time() - t_all:.0f} s; outputs in {out}", flush=True)


if __name__ == "__main__":
    main()
