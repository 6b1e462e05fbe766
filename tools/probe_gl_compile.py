#!/usr/bin/env python3
"""Where a GL evaluation's compile goes, measured on one GPU: the driver's compile of the
compute family's shaders, cold (disk cache off), from the driver's disk cache filled by
another process, and with several processes compiling at once (a host's cluster workers).

    source .gl/prelude.sh; python3 tools/probe_gl_compile.py OUT [--shape 1024x1024x1024]
        [--configs 24] [--procs 4]

Writes OUT/compile.json and prints a table: ms a compile (median, mean) for each mode.
Each child process compiles its share of the configs through moderngl's compute_shader,
as the compute family's driver does (glFinish after each), and reports each time.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def sources(shape: str, n: int, seed: int = 1) -> list[str]:
    from shadertune.backends.gl import GLBackend
    from shadertune.core.problem import Problem
    m, nn, k = (int(v) for v in shape.split("x"))
    backend = GLBackend()
    problem = Problem(m, nn, k)
    space = backend.space(problem)
    rng = random.Random(seed)
    out, seen, tries = [], set(), 0
    for c in backend.candidates(problem, n):
        if c.get("family") == "compute":
            out.append(backend.source(problem, c))
    while len(out) < n and tries < 20000:
        tries += 1
        c = space.draw(rng)
        if c is None or c.get("family") != "compute" or c in seen:
            continue
        seen.add(c)
        out.append(backend.source(problem, c))
    return out[:n]


def child(src_file: str, out_file: str) -> None:
    from shadertune.backends.gl.platform.context import create_egl_context
    ctx = create_egl_context()
    srcs = json.load(open(src_file))
    times = []
    for s in srcs:
        t0 = time.perf_counter()
        try:
            prog = ctx.compute_shader(s)
            ctx.finish()
            ok = True
        except Exception:
            prog, ok = None, False
        times.append({"ms": (time.perf_counter() - t0) * 1e3, "ok": ok})
        if prog is not None:
            prog.release()
    ext = ctx.extensions if hasattr(ctx, "extensions") else set()
    json.dump({"times": times, "renderer": ctx.info.get("GL_RENDERER"),
               "parallel_compile": any("parallel_shader_compile" in e for e in ext)},
              open(out_file, "w"))


def run_mode(out: str, name: str, groups: list[list[str]], env_extra: dict) -> dict:
    procs, files = [], []
    t0 = time.perf_counter()
    for i, g in enumerate(groups):
        sf = os.path.join(out, f"{name}-{i}.src.json")
        of = os.path.join(out, f"{name}-{i}.json")
        json.dump(g, open(sf, "w"))
        env = dict(os.environ, **env_extra)
        procs.append(subprocess.Popen([sys.executable, __file__, "--child", sf, of], env=env))
        files.append(of)
    for p in procs:
        p.wait()
    wall = time.perf_counter() - t0
    times, info = [], {}
    for f in files:
        try:
            d = json.load(open(f))
        except (OSError, ValueError):
            continue
        times += [t["ms"] for t in d["times"] if t["ok"]]
        info = {k: d[k] for k in ("renderer", "parallel_compile")}
    row = {"mode": name, "processes": len(groups), "compiles": len(times),
           "median_ms": statistics.median(times) if times else None,
           "mean_ms": statistics.fmean(times) if times else None, "wall_s": wall, **info}
    print(f"| {name} | {len(groups)} | {len(times)} | {row['median_ms'] or 0:.1f} | "
          f"{row['mean_ms'] or 0:.1f} | {wall:.2f} |", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--shape", default="1024x1024x1024")
    ap.add_argument("--configs", type=int, default=24)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    os.makedirs(a.out, exist_ok=True)
    srcs = sources(a.shape, a.configs)
    p = a.procs
    split = [srcs[i::p] for i in range(p)]
    off = {"__GL_SHADER_DISK_CACHE": "0"}
    cache = tempfile.mkdtemp(prefix="glcache-", dir=a.out)
    on = {"__GL_SHADER_DISK_CACHE": "1", "__GL_SHADER_DISK_CACHE_PATH": cache,
          "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP": "1", "__GL_SHADER_DISK_CACHE_SIZE": str(4 << 30)}
    print(f"{len(srcs)} compute-family shaders of {a.shape}, mean {statistics.fmean(map(len, srcs)):.0f} chars")
    print("| mode | processes | compiles | median ms | mean ms | wall s |\n|---|---:|---:|---:|---:|---:|")
    rows = [run_mode(a.out, "cold", [srcs], off),
            run_mode(a.out, f"cold-{p}-at-once", split, off),
            run_mode(a.out, "fill-cache", [srcs], on),
            run_mode(a.out, "from-cache-new-process", [srcs], on),
            run_mode(a.out, f"from-cache-{p}-at-once", split, on)]
    # the host's compile-ahead as it would run: p processes fill the cache, one times
    cache2 = tempfile.mkdtemp(prefix="glcache2-", dir=a.out)
    on2 = dict(on, __GL_SHADER_DISK_CACHE_PATH=cache2)
    rows.append(run_mode(a.out, f"fill-{p}-at-once", split, on2))
    rows.append(run_mode(a.out, "after-parallel-fill", [srcs], on2))
    json.dump({"shape": a.shape, "configs": len(srcs), "rows": rows},
              open(os.path.join(a.out, "compile.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
