#!/usr/bin/env python3
"""The GL compute family on a GPU, against cuBLAS and the other kernels (a benchmark
script, not a test).  Every tuned number comes from the search core and lands in the
store; every ratio is taken in this one run.

    scripts/bench-gl-compute OUT STAGE [STAGE ...] [--sizes 1024,2048,4096,8192]
        [--phased-size 4096] [--phased-seconds 200] [--seconds 45] [--model-seconds 60]
        [--db STORE] [--skinny 4096x4096x32,64x4096x4096,512x512x65536] [--lu 2048,4096]

Stages:
  tune     per size, the compute family tuned through the search core (phased at
           --phased-size, complete unless --phased-seconds stops it; the model strategy
           elsewhere, --seconds each), then at --phased-size the model strategy again on
           a fresh store for --model-seconds; each best re-timed warm beside cuBLAS
           SGEMM (torch, TF32 off) in the same run
  compare  at --phased-size: the fragment family (phased, --seconds), CUDA's FFMA
           kernels and its 3xTF32 kernels (--seconds each), cuBLAS, and the compute
           family's best from the store: one table and reports for `report compare`
  client   shadertune.matmul on numpy --e2e-size^2 operands end to end against numpy.matmul on
           the host's cores, and a blocked LU (trailing updates through matmul) with GL
           against numpy, at --lu sizes (the store's tuned configs; --db)
  skinny   the --skinny shapes: tuned (model, --seconds) and re-timed beside cuBLAS
  retime   the store's best compute config of each --sizes and --skinny shape re-timed
           beside cuBLAS with today's templates (no search; --db)
Writes OUT/bench-gl-compute.json (every row) and .md (the tables), the store
(OUT/tune.sqlite unless --db) and OUT/reports.tgz (one search report per family).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("moderngl", "numpy")

import numpy as np  # noqa: E402

from shadertune.core.atomic import write_bytes, write_text  # noqa: E402
from shadertune.backends.gl import GLBackend  # noqa: E402
from shadertune.backends.gl.platform.timing import ensure_clock  # noqa: E402
from shadertune.db import Store  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.search import Budget  # noqa: E402
from shadertune.search.report_json import make_report  # noqa: E402
from shadertune.search.restrict import RestrictedBackend  # noqa: E402
from shadertune.search.tune import tune  # noqa: E402


def shape(text: str) -> Problem:
    dims = [int(x) for x in text.lower().split("x")]
    return Problem(*(dims * 3 if len(dims) == 1 else dims))


def gflops(p: Problem, ms: float) -> float:
    return p.flops / (ms * 1e6)


# --- cuBLAS -----------------------------------------------------------------------
def cublas_ms(p: Problem, repeats: int = 20) -> float | None:
    """torch's SGEMM (TF32 off) on random operands: CUDA events, median after warm-up."""
    try:
        import torch
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(p.M, p.K, device="cuda") - 0.5
    b = torch.rand(p.K, p.N, device="cuda") - 0.5
    for _ in range(5):
        torch.mm(a, b)
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.mm(a, b)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


# --- ours, re-timed -----------------------------------------------------------------
def retime(backend, p: Problem, config, repeats: int = 20) -> dict:
    """The config verified on sampled rows, then timed warm (GL timer queries, median)."""
    from shadertune.search.evaluate import make_operands
    A, B = make_operands(p, seed=1)
    with backend.build(p, config) as k:
        C = k.run(A, B)
        idx = np.linspace(0, p.M - 1, min(64, p.M)).astype(int)
        a64 = (A.T if p.trans_a else A).astype(np.float64)
        b64 = (B.T if p.trans_b else B).astype(np.float64)
        ref = a64[idx] @ b64
        err = float(np.linalg.norm(C[idx] - ref) / np.linalg.norm(ref))
        ensure_clock(k.ctx)
        ms = statistics.median(k.time(repeats=repeats, warmup=3))
    return {"ms": ms, "gflops": gflops(p, ms), "error_rows": err}


def tuned(backend, p, store, strategy, seconds, fixed=None, label=None) -> dict:
    """One search through the core: its report entry and where it stopped."""
    be = RestrictedBackend(backend, fixed) if fixed else backend
    t0 = time.monotonic()
    entry = tune(be, p, strategy=strategy, budget=Budget(seconds=seconds), store=store)
    entry["label"] = label or strategy
    entry["wall_seconds"] = time.monotonic() - t0
    return entry


def best_of(entry):
    b = entry.get("best")
    return (b["config"], b["median_ms"]) if b else (None, None)


# --- stages ---------------------------------------------------------------------------
def stage_tune(args, backend, store, rows, reports):
    for n in args.sizes:
        p = Problem(n, n, n)
        phased = n == args.phased_size
        entry = tuned(backend, p, store, "phased" if phased else "model",
                      args.phased_seconds if phased else args.seconds, {"family": ("compute",)},
                      label="compute, phased" if phased else "compute, model")
        reports.setdefault("gl-compute", []).append(entry)
        cfg, search_ms = best_of(entry)
        row = {"stage": "tune", "shape": p.key, "strategy": entry["label"],
               "evaluations": len(entry.get("results", [])), "tune_seconds": entry["wall_seconds"],
               "search_ms": search_ms, "config": cfg}
        if cfg:
            row.update(retime(backend, p, cfg))
        row["cublas_ms"] = cublas_ms(p)
        if row.get("ms") and row["cublas_ms"]:
            row["vs_cublas"] = row["cublas_ms"] / row["ms"]
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("shape", "strategy", "evaluations", "tune_seconds",
                                                  "gflops", "vs_cublas")}), flush=True)
        if phased and args.model_seconds:
            fresh = Store(os.path.join(args.out, "model-fresh.sqlite"))
            try:
                m = tuned(backend, p, fresh, "model", args.model_seconds, {"family": ("compute",)},
                          label="compute, model (fresh store)")
            finally:
                fresh.close()
            mcfg, mms = best_of(m)
            mrow = {"stage": "tune", "shape": p.key, "strategy": m["label"],
                    "evaluations": len(m.get("results", [])), "tune_seconds": m["wall_seconds"],
                    "search_ms": mms, "config": mcfg}
            if mcfg:
                mrow.update(retime(backend, p, mcfg))
                mrow["vs_phased"] = row["ms"] / mrow["ms"] if row.get("ms") else None
            rows.append(mrow)
            print(json.dumps({k: mrow.get(k) for k in ("shape", "strategy", "evaluations", "gflops",
                                                       "vs_phased")}), flush=True)


def stage_compare(args, backend, store, rows, reports):
    p = Problem(args.phased_size, args.phased_size, args.phased_size)
    out = {"stage": "compare", "shape": p.key}
    frag = tuned(backend, p, store, "phased", args.seconds, {"family": ("fragment",)}, "fragment, phased")
    reports.setdefault("gl-fragment", []).append(frag)
    cfg, _ = best_of(frag)
    if cfg:
        out["fragment"] = retime(backend, p, cfg, repeats=5) | {"config": cfg}
    best = store.best("gl", backend.device().key, p, backend.template_hash())
    if best is not None:
        out["compute"] = retime(backend, p, best.config) | {"config": best.config.to_dict()}
    try:
        from shadertune.backends.cuda import CUDABackend
        cuda = CUDABackend()
        for label, fixed in (("cuda FFMA", {"MMA": (0,)}), ("cuda 3xTF32", {"MMA": (3, 4)})):
            e = tuned(cuda, p, store, "model", args.seconds, fixed, label)
            reports.setdefault("cuda-" + label.split()[1].lower(), []).append(e)
            c, ms = best_of(e)
            if c:
                out[label] = {"ms": ms, "gflops": gflops(p, ms), "config": c}
    except Exception as e:           # the comparison goes on without CUDA, and says why
        out["cuda_skipped"] = f"{type(e).__name__}: {e}"[:300]
    out["cublas_ms"] = cublas_ms(p)
    if out["cublas_ms"]:
        out["cublas_gflops"] = gflops(p, out["cublas_ms"])
    rows.append(out)
    print(json.dumps({k: (v.get("gflops") if isinstance(v, dict) else v) for k, v in out.items()}),
          flush=True)


def blocked_lu(A: np.ndarray, nb: int, mm) -> np.ndarray:
    """Right-looking blocked LU with partial pivoting in place (rows swapped as it goes);
    panels and triangular solves in numpy, the trailing updates through mm(X, Y, out):
    out -= X @ Y.  Returns the permutation."""
    n = A.shape[0]
    perm = np.arange(n)
    for k in range(0, n, nb):
        e = min(k + nb, n)
        for j in range(k, e):                                   # the panel, unblocked
            p = j + int(np.argmax(np.abs(A[j:, j])))
            if p != j:
                A[[j, p]] = A[[p, j]]
                perm[[j, p]] = perm[[p, j]]
            A[j + 1:, j] /= A[j, j]
            A[j + 1:, j + 1:e] -= np.outer(A[j + 1:, j], A[j, j + 1:e])
        if e < n:
            L11 = np.tril(A[k:e, k:e], -1) + np.eye(e - k, dtype=A.dtype)
            A[k:e, e:] = np.linalg.solve(L11, A[k:e, e:])
            mm(A[e:, k:e], A[k:e, e:], A[e:, e:])
    return perm


def stage_client(args, backend, store, rows, reports):
    import shadertune
    n = args.e2e_size
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    B = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    out = np.empty((n, n), np.float32)
    db = store.path

    def wall(fn, reps=5):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)
    gl_s = wall(lambda: shadertune.matmul(A, B, out=out, db=db))
    np_s = wall(lambda: np.matmul(A, B, out=out))
    idx = np.linspace(0, n - 1, 64).astype(int)
    shadertune.matmul(A, B, out=out, db=db)
    err = float(np.linalg.norm(out[idx] - A[idx].astype(np.float64) @ B) /
                np.linalg.norm(A[idx].astype(np.float64) @ B))
    row = {"stage": "client", "what": f"matmul {n}^2 numpy in/out", "gl_s": gl_s, "numpy_s": np_s,
           "speedup": np_s / gl_s, "gl_gflops": 2 * n ** 3 / gl_s / 1e9, "error_rows": err,
           "explain": str(shadertune.explain(A, B, db=db)).splitlines()[:2]}
    rows.append(row)
    print(json.dumps(row), flush=True)
    for size in args.lu:
        M0 = rng.uniform(-1, 1, (size, size)).astype(np.float32) + size ** 0.5 * np.eye(size, dtype=np.float32)

        def gl_mm(X, Y, C):
            C[...] = shadertune.matmul(X, Y, out=np.ascontiguousarray(C), alpha=-1.0, beta=1.0, db=db)

        def np_mm(X, Y, C):
            C -= X @ Y
        times = {}
        for label, mm in (("gl", gl_mm), ("numpy", np_mm)):
            work = M0.copy()
            blocked_lu(work.copy()[:256, :256], 64, mm)                 # warm: kernels, caches
            t0 = time.perf_counter()
            perm = blocked_lu(work, 256, mm)
            times[label] = time.perf_counter() - t0
            L = np.tril(work, -1).astype(np.float64) + np.eye(size)
            U = np.triu(work).astype(np.float64)
            resid = float(np.linalg.norm(M0[perm].astype(np.float64) - L @ U) / np.linalg.norm(M0))
            times[label + "_residual"] = resid
        row = {"stage": "client", "what": f"blocked LU n={size}, nb=256", "gl_s": times["gl"],
               "numpy_s": times["numpy"], "speedup": times["numpy"] / times["gl"],
               "gl_residual": times["gl_residual"], "numpy_residual": times["numpy_residual"]}
        rows.append(row)
        print(json.dumps(row), flush=True)


def stage_skinny(args, backend, store, rows, reports):
    for text in args.skinny:
        p = shape(text)
        e = tuned(backend, p, store, "model", args.seconds, {"family": ("compute",)}, "compute, model")
        reports.setdefault("gl-compute", []).append(e)
        cfg, search_ms = best_of(e)
        row = {"stage": "skinny", "shape": p.key, "tune_seconds": e["wall_seconds"],
               "evaluations": len(e.get("results", [])), "search_ms": search_ms, "config": cfg}
        if cfg:
            row.update(retime(backend, p, cfg))
        row["cublas_ms"] = cublas_ms(p)
        if row.get("ms") and row["cublas_ms"]:
            row["vs_cublas"] = row["cublas_ms"] / row["ms"]
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("shape", "gflops", "vs_cublas", "evaluations")}), flush=True)


def stage_retime(args, backend, store, rows, reports):
    """The store's best compute config of each --sizes square (and --skinny shape) re-timed
    beside cuBLAS, with today's templates (a store's configs re-run: no search)."""
    device = backend.device().key
    for p in [Problem(n, n, n) for n in args.sizes] + [shape(t) for t in args.skinny]:
        found = [r for r in store.results("gl", device, p) if r.ok and r.config.get("family") == "compute"]
        if not found:
            continue
        best = min(found, key=lambda r: r.median_ms)
        row = {"stage": "retime", "shape": p.key, "stored_ms": best.median_ms, "config": best.config.to_dict()}
        row.update(retime(backend, p, best.config))
        row["cublas_ms"] = cublas_ms(p)
        if row["cublas_ms"]:
            row["vs_cublas"] = row["cublas_ms"] / row["ms"]
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("shape", "stored_ms", "ms", "gflops", "vs_cublas")}), flush=True)


STAGES = {"retime": stage_retime, "tune": stage_tune, "compare": stage_compare, "client": stage_client, "skinny": stage_skinny}


def markdown(rows) -> str:
    lines = ["| stage | shape / what | strategy | evals | tune s | ours GFLOP/s | cuBLAS GFLOP/s | ratio |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["stage"] in ("tune", "skinny", "retime"):
            cub = gflops(shape(r["shape"].split(":")[0]), r["cublas_ms"]) if r.get("cublas_ms") else None
            lines.append(f"| {r['stage']} | {r['shape']} | {r.get('strategy', 'model')} | "
                         f"{r.get('evaluations', '')} | {r.get('tune_seconds', 0):.0f} | "
                         f"{r.get('gflops', 0):,.0f} | {cub or 0:,.0f} | "
                         f"{r.get('vs_cublas') or r.get('vs_phased') or 0:.2f} |")
        elif r["stage"] == "compare":
            for k in ("compute", "fragment", "cuda FFMA", "cuda 3xTF32"):
                if k in r:
                    lines.append(f"| compare | {r['shape']} | {k} | | | {r[k]['gflops']:,.0f} | "
                                 f"{r.get('cublas_gflops', 0):,.0f} | "
                                 f"{r[k]['gflops'] / r['cublas_gflops'] if r.get('cublas_gflops') else 0:.2f} |")
        else:
            lines.append(f"| client | {r['what']} | GL {r['gl_s']:.3f} s, numpy {r['numpy_s']:.3f} s | | | | | "
                         f"{r['speedup']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the folder for the outputs")
    ap.add_argument("stages", nargs="+", choices=sorted(STAGES), help="what to run, in order")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1024, 2048, 4096, 8192],
                    help="square sizes of the tune stage")
    ap.add_argument("--phased-size", type=int, default=4096, help="the size tuned by the phased strategy")
    ap.add_argument("--phased-seconds", type=float, default=200.0, help="the phased tune's time limit")
    ap.add_argument("--seconds", type=float, default=45.0, help="each other tune's time limit")
    ap.add_argument("--model-seconds", type=float, default=60.0,
                    help="the model strategy's time on a fresh store at --phased-size (0: none)")
    ap.add_argument("--db", help="the store (default OUT/tune.sqlite)")
    ap.add_argument("--skinny", type=lambda s: s.split(","), default=["4096x4096x32", "64x4096x4096",
                                                                       "512x512x65536"],
                    help="shapes of the skinny stage, MxNxK")
    ap.add_argument("--e2e-size", type=int, default=4096, help="the client stage's square matmul")
    ap.add_argument("--lu", type=lambda s: [int(x) for x in s.split(",")], default=[2048, 4096],
                    help="sizes of the blocked-LU client")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    backend = GLBackend()
    dev = backend.device()
    print(f"GL device: {dev.renderer} | {dev.driver}", flush=True)
    store = Store(args.db or os.path.join(args.out, "tune.sqlite"))
    rows, reports = [], {}
    doc = {"device": dev.to_dict(), "argv": sys.argv[1:], "rows": rows}
    try:
        for name in args.stages:
            t0 = time.monotonic()
            STAGES[name](args, backend, store, rows, reports)
            print(f"== stage {name}: {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        store.close()
        write_text(os.path.join(args.out, "bench-gl-compute.json"), json.dumps(doc, indent=1, default=str))
        write_text(os.path.join(args.out, "bench-gl-compute.md"), markdown(rows))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, entries in reports.items():
                data = json.dumps(make_report("cuda" if name.startswith("cuda") else "gl", dev,
                                              "mixed", entries), indent=1, default=str).encode()
                info = tarfile.TarInfo(f"{name}.json")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        write_bytes(os.path.join(args.out, "reports.tgz"), buf.getvalue())
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
