#!/usr/bin/env python3
"""The GL compute family on a GPU, against cuBLAS and the other kernels (a benchmark
script, not a test).  Every tuned number comes from the search core and lands in the
store; every ratio is taken in this one run.

    scripts/bench-gl-compute OUT STAGE [STAGE ...] [--sizes 1024,2048,4096,8192]
        [--phased-size 4096] [--phased-seconds 200] [--seconds 45] [--model-seconds 60]
        [--db STORE] [--skinny 4096x4096x32,64x4096x4096,512x512x65536] [--lu 2048,4096]
        [--knob-sizes 4096,2048,8192] [--budget SECONDS] [--stage-seconds STAGE=S,...]
        [--coopmat DIR] [--sass-size 4096]

Stages:
  tune     per size, the compute family tuned through the search core (phased at
           --phased-size, complete unless --phased-seconds stops it; the model strategy
           elsewhere, --seconds each), then at --phased-size the model strategy again on
           a fresh store for --model-seconds; each best re-timed warm beside cuBLAS
           SGEMM (torch, TF32 off) in the same run; the phased search's phases and
           when its plan ended
  compare  at --phased-size: the fragment family (phased, --seconds), CUDA's FFMA
           kernels and its 3xTF32 kernels (--seconds each), cuBLAS, and the compute
           family's best from the store: one table and reports for `report compare`
  client   shadertune.matmul on numpy --e2e-size^2 operands end to end against numpy.matmul on
           the host's cores, and a blocked LU (trailing updates through matmul) with GL
           against numpy, at --lu sizes (the store's tuned configs; --db)
  skinny   the --skinny shapes: the untuned default and the model strategy's best
           (--seconds) re-timed beside cuBLAS, each against its bound (DRAM bytes at the
           copy bandwidth measured in this run, or the nominal FMA peak); at K <= 64 a
           C-write probe (a shader that only writes C, into a fresh buffer and into the
           kernel's own)
  retime   the store's best compute config of each --sizes and --skinny shape re-timed
           beside cuBLAS with today's templates (no search; --db)
  sweep    the knobs of issue 39 on the device: each new value built on odd shapes
           (transposes, alpha/beta, batches) and checked against float64 (the values a
           software renderer cannot run, subgroup shuffles, among them)
  knobs    each new knob's effect alone: at each --knob-sizes square, one knob moved at
           a time from the default config and from the H200's session-12 best, timed
           warm beside cuBLAS (and the warps a SM holds where the driver says)
  sass     the driver's machine code (nvdisasm) of the fastest config the knobs stage
           timed at --sass-size and of the default: registers, FFMA per LDS, memory ops
  coopmat  the cooperative-matrix probe (--coopmat DIR: probe_gl_coopmat.py, FORCE=1) in a
           process of its own: the driver's answers verbatim
--budget stops the run in time: a stage runs only with at least its minimum left, under
its own limit (--stage-seconds; defaults in STAGE_SECONDS), and the outputs are written
after every stage.  Writes OUT/bench-gl-compute.json (every row) and .md (the tables),
the store (OUT/tune.sqlite unless --db), OUT/reports.tgz (one search report per family),
OUT/sass.txt and OUT/coopmat.txt.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("moderngl", "numpy")

import numpy as np  # noqa: E402

import gl_probes  # noqa: E402
from shadertune.core.atomic import write_bytes, write_text  # noqa: E402
from shadertune.backends.gl import GLBackend  # noqa: E402
from shadertune.backends.gl.compute import codegen as compute_codegen  # noqa: E402
from shadertune.backends.gl.compute.driver import ComputeKernel  # noqa: E402
from shadertune.backends.gl.compute.layout import ADDED_KNOBS, ComputeLayout  # noqa: E402
from shadertune.backends.gl.cost import CLOCK_HZ, LANES  # noqa: E402
from shadertune.backends.gl.space import compute_default_config  # noqa: E402
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


# --- ours, re-timed -----------------------------------------------------------------
_OPERANDS: dict = {}


def operands(p: Problem):
    """Seeded operands of p and the float64 reference of 64 sampled rows (kept for the
    last problem asked: the knobs stage times many configs of one shape)."""
    from shadertune.search.evaluate import make_operands
    if p not in _OPERANDS:
        _OPERANDS.clear()
        A, B = make_operands(p, seed=1)
        idx = np.linspace(0, p.M - 1, min(64, p.M)).astype(int)
        a64 = np.swapaxes(A, -1, -2) if p.trans_a else A
        b64 = np.swapaxes(B, -1, -2) if p.trans_b else B
        _OPERANDS[p] = (A, B, idx, a64[..., idx, :].astype(np.float64) @ b64.astype(np.float64))
    return _OPERANDS[p]


def retime(backend, p: Problem, config, repeats: int = 20, warps: bool = False) -> dict:
    """The config verified on sampled rows, then timed warm (GL timer queries, median);
    with `warps`, the warps a SM held (gl_probes.resident_warps; NVIDIA only)."""
    A, B, idx, ref = operands(p)
    with backend.build(p, config) as k:
        C = k.run(A, B)
        err = float(np.linalg.norm(C[..., idx, :] - ref) / np.linalg.norm(ref))
        ensure_clock(k.ctx)
        ms = statistics.median(k.time(repeats=repeats, warmup=3))
    out = {"ms": ms, "gflops": gflops(p, ms), "error_rows": err, "verified": bool(err <= 1e-5)}
    if warps:
        out["warps_per_sm"] = gl_probes.resident_warps(backend, p, config, A, B)
    return out


def tuned(backend, p, store, strategy, seconds, fixed=None, label=None) -> dict:
    """One search through the core: its report entry and where it stopped."""
    be = RestrictedBackend(backend, fixed) if fixed else backend
    t0 = time.monotonic()
    entry = tune(be, p, strategy=strategy, budget=Budget(seconds=seconds), store=store)
    entry["label"] = label or strategy
    entry["wall_seconds"] = time.monotonic() - t0
    return entry


def plan_progress(entry) -> dict:
    """Where a search's phases began (evaluation index and seconds after its first result)
    and whether its plan ended before its budget (the phased strategy goes on to local
    search when its plan is done)."""
    results, phases = entry.get("results", []), entry.get("phases", [])
    t0 = results[0].get("timestamp") if results else None

    def at_s(i):
        if t0 is None or i >= len(results) or results[i].get("timestamp") is None:
            return None
        return round(results[i]["timestamp"] - t0, 1)
    marks = [{"label": ph["label"], "at": ph["at"], "at_s": at_s(ph["at"])} for ph in phases]
    local = next((m for m in marks if "local" in m["label"].lower()), None)
    return {"phases": marks, "plan_done": local is not None,
            "plan_seconds": local["at_s"] if local else None}


def best_of(entry):
    b = entry.get("best")
    return (b["config"], b["median_ms"]) if b else (None, None)


# --- stages ---------------------------------------------------------------------------
def search_seconds(args, state, wanted: list[float], overhead: float) -> list[float]:
    """The searches' seconds scaled down to fit the stage's limit less `overhead` (the
    re-timings, cuBLAS, the spaces) where the limit is smaller than they ask."""
    room = state.get("stage_limit")
    if not room or sum(wanted) + overhead <= room:
        return wanted
    scale = max(0.05, (room - overhead) / sum(wanted))
    return [max(5.0, w * scale) for w in wanted]


def stage_tune(args, backend, store, rows, reports, state):
    sizes = list(args.sizes)
    if args.phased_size not in sizes:
        # said, not silent: --phased-size names which of --sizes the phased strategy tunes
        print(f"tune: --phased-size {args.phased_size} is not among --sizes {sizes}: no phased tune, "
              f"and no model tune on a fresh store beside it", flush=True)
    phased_s, model_s, other_s = search_seconds(
        args, state, [args.phased_seconds if args.phased_size in sizes else 0.0, args.model_seconds,
                      args.seconds * sum(n != args.phased_size for n in sizes)], 15.0 * len(sizes) + 15.0)
    other_s /= max(1, sum(n != args.phased_size for n in sizes))
    for n in sizes:
        p = Problem(n, n, n)
        phased = n == args.phased_size
        entry = tuned(backend, p, store, "phased" if phased else "model",
                      phased_s if phased else other_s, {"family": ("compute",)},
                      label="compute, phased" if phased else "compute, model")
        reports.setdefault("gl-compute", []).append(entry)
        cfg, search_ms = best_of(entry)
        row = {"stage": "tune", "shape": p.key, "strategy": entry["label"],
               "evaluations": len(entry.get("results", [])), "tune_seconds": entry["wall_seconds"],
               "search_ms": search_ms, "config": cfg, "budget_seconds": phased_s if phased else other_s,
               **plan_progress(entry)}
        if cfg:
            row.update(retime(backend, p, cfg))
        row["cublas_ms"] = gl_probes.cublas_ms(p)
        if row.get("ms") and row["cublas_ms"]:
            row["vs_cublas"] = row["cublas_ms"] / row["ms"]
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("shape", "strategy", "evaluations", "tune_seconds",
                                                  "gflops", "vs_cublas")}), flush=True)
        if phased and args.model_seconds:
            fresh = Store(os.path.join(args.out, "model-fresh.sqlite"))
            try:
                m = tuned(backend, p, fresh, "model", model_s, {"family": ("compute",)},
                          label="compute, model (fresh store)")
            finally:
                fresh.close()
            mcfg, mms = best_of(m)
            mrow = {"stage": "tune", "shape": p.key, "strategy": m["label"],
                    "evaluations": len(m.get("results", [])), "tune_seconds": m["wall_seconds"],
                    "search_ms": mms, "config": mcfg, "budget_seconds": model_s}
            if mcfg:
                mrow.update(retime(backend, p, mcfg))
                mrow["vs_phased"] = row["ms"] / mrow["ms"] if row.get("ms") else None
            rows.append(mrow)
            print(json.dumps({k: mrow.get(k) for k in ("shape", "strategy", "evaluations", "gflops",
                                                       "vs_phased")}), flush=True)


def stage_compare(args, backend, store, rows, reports, state):
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
    out["cublas_ms"] = gl_probes.cublas_ms(p)
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


def stage_client(args, backend, store, rows, reports, state):
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


_COPY = """#version 450 core
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly restrict buffer SrcBuf { vec4 S[]; };
layout(std430, binding = 2) writeonly restrict buffer DstBuf { vec4 D[]; };
uniform int u_words;
void main() {
    const int i = int(gl_GlobalInvocationID.x) + int(gl_GlobalInvocationID.y) * 65535 * 256;
    if (i < u_words) D[i] = S[i];
}
"""


def _median_dispatch_s(ctx, prog, words: int, repeats: int) -> float:
    """Seconds of one dispatch of `prog` over `words` invocations (256 a group, the grid
    folded into y past 65535 groups; the program reads u_words), median of `repeats` timer
    queries after one run that also brings the clock up."""
    prog["u_words"].value = words
    groups = -(-words // 256)
    x, y = min(groups, 65535), -(-groups // 65535)
    q = ctx.query(time=True)
    prog.run(x, y, 1)
    ensure_clock(ctx)
    times = []
    for _ in range(repeats):
        ctx.finish()
        with q:
            prog.run(x, y, 1)
        ctx.finish()
        times.append(q.elapsed / 1e9)
    return statistics.median(times)


def copy_gbs(ctx, mb: int = 256) -> float:
    """Device memory bandwidth as a GL kernel sees it: a compute shader copying a buffer
    of `mb` MB into another (bytes read plus bytes written a second; median of 5, timer
    queries). Not glCopyBufferSubData: NVIDIA's driver runs it on a copy engine, which
    moved 177 GB/s on the H200 against 3.3 TB/s a shader writes."""
    src, dst = ctx.buffer(reserve=mb << 20), ctx.buffer(reserve=mb << 20)
    prog = ctx.compute_shader(_COPY)
    try:
        src.bind_to_storage_buffer(1)
        dst.bind_to_storage_buffer(2)
        return 2 * (mb << 20) / _median_dispatch_s(ctx, prog, (mb << 20) // 16, 5) / 1e9
    finally:
        prog.release()
        src.release()
        dst.release()


_WRITE_C = """#version 450 core
layout(local_size_x = 256) in;
layout(std430, binding = 2) writeonly restrict buffer CBuf { vec4 C[]; };
uniform int u_words;
void main() {
    const int i = int(gl_GlobalInvocationID.x) + int(gl_GlobalInvocationID.y) * 65535 * 256;
    if (i < u_words) C[i] = vec4(float(i));
}
"""


def write_probe(ctx, buf, floats: int) -> float:
    """GB/s of a shader that only writes `floats` floats into `buf` (as vec4 words):
    the rate a kernel bound by writing C can reach in that buffer (median of 10)."""
    prog = ctx.compute_shader(_WRITE_C)
    try:
        buf.bind_to_storage_buffer(2)
        words = floats // 4
        return 16 * words / _median_dispatch_s(ctx, prog, words, 10) / 1e9
    finally:
        prog.release()


def bounds(backend, p: Problem, state) -> dict:
    """p's bound in this run: its DRAM bytes (A, B read once, C written: beta = 0) at the
    copy bandwidth measured here, and its FMAs at the nominal FMA peak (compute units x
    128 lanes x 2 x the cost model's clock); the larger is the bound."""
    if "copy_gbs" not in state:
        state["copy_gbs"] = copy_gbs(backend.ctx)
    units = int(backend.device().limits.get("compute_units", 1))
    nbytes = 4 * p.batch * (p.M * p.K + p.K * p.N + p.M * p.N)
    mem_ms = nbytes / (state["copy_gbs"] * 1e6)
    fma_ms = p.flops / (units * LANES * 2 * CLOCK_HZ / 1e3)
    return {"bytes": nbytes, "copy_gbs": state["copy_gbs"], "memory_bound_ms": mem_ms,
            "fma_bound_ms": fma_ms, "bound_ms": max(mem_ms, fma_ms),
            "bound": "memory" if mem_ms >= fma_ms else "fma"}


def stage_skinny(args, backend, store, rows, reports, state):
    seconds = search_seconds(args, state, [args.seconds] * len(args.skinny), 12.0 * len(args.skinny))
    for text, secs in zip(args.skinny, seconds):
        p = shape(text)
        row = {"stage": "skinny", "shape": p.key}
        row.update(bounds(backend, p, state))
        default = compute_default_config(p, backend.space(p))
        if default is not None:
            row["default"] = retime(backend, p, default) | {"config": default.to_dict()}
        row["cublas_ms"] = gl_probes.cublas_ms(p)
        if p.K <= 64:                         # the output write is the bound: can GL reach it?
            fresh = backend.ctx.buffer(reserve=4 * p.batch * p.M * p.N)
            try:
                row["write_c_fresh_gbs"] = write_probe(backend.ctx, fresh, p.batch * p.M * p.N)
            finally:
                fresh.release()
            if default is not None:
                with backend.build(p, default) as k:
                    row["write_c_pooled_gbs"] = write_probe(backend.ctx, k.c_buf, p.batch * p.M * p.N)
        rows.append(row)
        e = tuned(backend, p, store, "model", secs, {"family": ("compute",)}, "compute, model")
        reports.setdefault("gl-compute", []).append(e)
        cfg, search_ms = best_of(e)
        row.update({"tune_seconds": e["wall_seconds"], "budget_seconds": secs, "evaluations": len(e.get("results", [])),
                    "search_ms": search_ms, "config": cfg})
        if cfg:
            row.update(retime(backend, p, cfg))
            row["vs_bound"] = row["bound_ms"] / row["ms"]
        if row.get("ms") and row["cublas_ms"]:
            row["vs_cublas"] = row["cublas_ms"] / row["ms"]
        print(json.dumps({k: row.get(k) for k in ("shape", "gflops", "vs_cublas", "vs_bound", "bound",
                                                  "evaluations", "write_c_fresh_gbs", "write_c_pooled_gbs")}),
              flush=True)


def stage_retime(args, backend, store, rows, reports, state):
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
        row["cublas_ms"] = gl_probes.cublas_ms(p)
        if row["cublas_ms"]:
            row["vs_cublas"] = row["cublas_ms"] / row["ms"]
        rows.append(row)
        print(json.dumps({k: row.get(k) for k in ("shape", "stored_ms", "ms", "gflops", "vs_cublas")}), flush=True)


# --- issue 39: the new knobs on the device ------------------------------------------
# The values the sweep builds on the device, and shapes each is built on (odd, both
# transposes, batches, deep K for the splits).
SWEEP_VALUES = (("db", 2), ("skew", 1), ("clamp", 1), ("shuffle", 1), ("kred", 1), ("bm", 16), ("bn", 16))
SWEEP_SHAPES = (Problem(37, 53, 29), Problem(40, 36, 64, trans_a=True), Problem(64, 48, 100, trans_b=True, batch=3),
                Problem(33, 20, 48, trans_a=True, trans_b=True), Problem(17, 40, 3000), Problem(70, 9, 640, batch=2))


def check_full(kernel, p: Problem, seed: int, alpha: float, beta: float) -> float:
    """C = alpha op(A) op(B) + beta C against float64, every element (NaN poison first)."""
    rng = np.random.default_rng(seed)
    a_shape, b_shape = p.stored_shapes
    A = rng.uniform(-1, 1, a_shape).astype(np.float32)
    B = rng.uniform(-1, 1, b_shape).astype(np.float32)
    C = rng.uniform(-1, 1, p.out_shape).astype(np.float32)
    got = kernel.run(A, B, C if beta else None, alpha=alpha, beta=beta)
    a64 = np.swapaxes(A, -1, -2) if p.trans_a else A
    b64 = np.swapaxes(B, -1, -2) if p.trans_b else B
    ref = alpha * np.matmul(a64.astype(np.float64), b64.astype(np.float64)) + (beta * C if beta else 0.0)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def stage_sweep(args, backend, store, rows, reports, state):
    """Each new knob value on the odd shapes whose space offers it (two configs each), and
    the swizzled walk built directly (the space offers it past an L2's bytes only)."""
    alphas = ((1.0, 0.0), (2.0, 0.5), (-1.5, 1.0))
    n = 0
    spaces = {p: backend.space(p) for p in SWEEP_SHAPES}
    for knob, value in SWEEP_VALUES:
        found = 0
        for p in SWEEP_SHAPES:
            space = spaces[p].narrowed({"family": ("compute",), knob: (value,)})
            configs = space.configs() if "compute" in space.parts else []
            for cfg in (configs[:1] + configs[-1:])[:2] if configs else []:
                alpha, beta = alphas[n % 3]
                n += 1
                row = {"stage": "sweep", "knob": f"{knob}={value}", "shape": p.key, "config": cfg.to_dict(),
                       "alpha": alpha, "beta": beta}
                try:
                    with backend.build(p, cfg) as k:
                        row["error"] = check_full(k, p, n, alpha, beta)
                    row["ok"] = bool(np.isfinite(row["error"]) and row["error"] <= 1e-5)
                except Exception as e:     # a probe reports every failure and goes on
                    row["ok"], row["failure"] = False, f"{type(e).__name__}: {str(e)[:300]}"
                rows.append(row)
                found += 1
        if not found:
            limits = backend.device().limits
            rows.append({"stage": "sweep", "knob": f"{knob}={value}", "ok": None,
                         "offered": "no config on this device", "subgroup_shuffle": limits.get("subgroup_shuffle"),
                         "atomic_float": limits.get("atomic_float")})
    for swz in (2, 8):                     # the walk, built directly: 10 tile rows, a short last strip
        p = Problem(300, 70, 40)
        cfg = dict(family="compute", out="buffer", glsl="450", bm=32, bn=32, bk=16, tm=4, tn=4, lanes_n=8, vec=2,
                   pad=4, a_t=1, db=0, ks=1, np=40, unroll="full", a_src="ssbo", b_src="ssbo",
                   **dict(ADDED_KNOBS, swz=swz))
        row = {"stage": "sweep", "knob": f"swz={swz}", "shape": p.key, "config": cfg}
        L = ComputeLayout.plan(p, cfg)
        k = ComputeKernel(backend.ctx, p, cfg, L, compute_codegen.compute_source(L, cfg), pool=backend.pool,
                          transfers=backend.transfers)
        try:
            row["error"] = check_full(k, p, 99, 1.5, -0.5)
            row["ok"] = bool(np.isfinite(row["error"]) and row["error"] <= 1e-5)
        except Exception as e:
            row["ok"], row["failure"] = False, f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            k.release()
        rows.append(row)
    done = [r for r in rows if r["stage"] == "sweep" and "knob" in r]
    print(json.dumps({"sweep": f"{sum(bool(r.get('ok')) for r in done)} of "
                               f"{sum(r.get('ok') is not None for r in done)} right",
                      "failed": [(r["knob"], r["shape"]) for r in done if r.get("ok") is False],
                      "not offered": [r["knob"] for r in done if r.get("ok") is None]}), flush=True)


# The H200's best at 4096 in session 12 (benchmarks/h200-2026-11-26-s12/gl-compute-retime,
# 40.0 TFLOP/s), with A from its storage buffer (it read A through a buffer texture, within
# 3% of this; the refinements are offered on storage buffers): the second base of the
# knobs stage.
S12_BEST = dict(bm=64, bn=128, bk=16, tm=8, tn=8, lanes_n=16, vec=4, pad=0, a_t=0, db=0, ks=1, unroll="full",
                a_src="ssbo", b_src="ssbo")
# One move from a base: a new knob alone, and the pairings the knobs were made for
# (8 x 16 tiles with their prefetch, shallow stages double-buffered, the two cheapest
# together).
KNOB_MOVES = (("db=1", {"db": 1}), ("db=2", {"db": 2}), ("skew", {"skew": 1, "pad": 0}), ("clamp", {"clamp": 1}),
              ("swz=8", {"swz": 8}), ("shuffle", {"shuffle": 1}), ("bk=8 db=1", {"bk": 8, "db": 1}),
              ("bk=8 db=2", {"bk": 8, "db": 2}), ("8x16 db=1", {"bn": 256, "tn": 16, "db": 1}),
              ("8x16 db=2", {"bn": 256, "tn": 16, "db": 2}), ("clamp+db=2", {"clamp": 1, "db": 2}),
              ("clamp+skew", {"clamp": 1, "skew": 1, "pad": 0}),
              # the slab loop: half the barriers a K (bk 32), and the operands read through
              # textures (the driver's read-only path) instead of storage buffers
              ("bk=32", {"bk": 32}), ("bk=32 db=1", {"bk": 32, "db": 1}),
              ("B texture", {"b_src": "texture"}), ("A,B textures", {"a_src": "texture", "b_src": "texture"}),
              # the small gains alone (skew, B through a texture, swz 8) together
              ("skew+B texture", {"skew": 1, "pad": 0, "b_src": "texture"}),
              ("skew+B texture+swz=8", {"skew": 1, "pad": 0, "b_src": "texture", "swz": 8}))
# at the other sizes: the new knobs alone, from the default
KNOB_ALONE = ("db=2", "skew", "clamp", "swz=8", "shuffle")


def stage_knobs(args, backend, store, rows, reports, state):
    """Each new knob's effect alone, beside cuBLAS: at the first --knob-sizes every move
    from both bases (the default and S12_BEST), at the others the knobs alone from the
    default.  Every config verified on sampled rows; the fastest becomes the sass
    stage's."""
    for i, n in enumerate(args.knob_sizes):
        p = Problem(n, n, n)
        space = backend.space(p)
        default = compute_default_config(p, space)
        if default is None:
            rows.append({"stage": "knobs", "shape": p.key, "invalid": "no compute config on this device"})
            continue
        cub = gl_probes.cublas_ms(p)
        bases = {"default": default}
        if i == 0:
            bases["s12-best"] = space.canonical(default.replace(**S12_BEST))
            stored = bases["s12-best"].replace(a_src="texture")
            if stored in space:
                bases["s12-best (as stored, A through a texture)"] = stored
        moves = KNOB_MOVES if i == 0 else tuple(m for m in KNOB_MOVES if m[0] in KNOB_ALONE)
        for name, base in bases.items():
            base_ms = None
            for move, change in (("base", {}),) + (moves if "as stored" not in name else ()):
                cfg = base.replace(**change)
                row = {"stage": "knobs", "shape": p.key, "base": name, "move": move, "config": cfg.to_dict(),
                       "cublas_ms": cub}
                why = space.why_invalid(cfg)
                if why:
                    row["invalid"] = why
                else:
                    try:
                        row.update(retime(backend, p, cfg, warps=move == "base" or "db" in move))
                    except Exception as e:      # a config the driver rejects is a row, not a stop
                        row["failure"] = f"{type(e).__name__}: {str(e)[:300]}"
                if row.get("ms"):
                    if move == "base":
                        base_ms = row["ms"]
                    if base_ms:
                        row["vs_base"] = base_ms / row["ms"]
                    if cub:
                        row["vs_cublas"] = cub / row["ms"]
                    if row.get("verified") and n == args.sass_size and \
                            row["ms"] < state.get("best_ms", float("inf")):
                        state["best_ms"], state["best_config"] = row["ms"], cfg
                rows.append(row)
                print(json.dumps({k: row.get(k) for k in ("shape", "base", "move", "gflops", "vs_base",
                                                          "vs_cublas", "warps_per_sm", "invalid", "failure")}),
                      flush=True)


def stage_sass(args, backend, store, rows, reports, state):
    """The driver's machine code of the knobs stage's fastest config at --sass-size (else
    the store's best there) and of the default, into OUT/sass.txt."""
    p = Problem(args.sass_size, args.sass_size, args.sass_size)
    space = backend.space(p)
    configs = []
    best = state.get("best_config")
    if best is None:
        stored = store.best("gl", backend.device().key, p, backend.template_hash())
        best = stored.config if stored is not None and stored.config.get("family") == "compute" else None
    default = compute_default_config(p, space)
    for cfg in (best, default):
        if cfg is not None and cfg not in configs:
            configs.append(cfg)
    found, text = gl_probes.sass_of_configs(p, configs, state["cache_dir"])
    for row in found:
        rows.append({"stage": "sass", "shape": p.key, **row})
        print(json.dumps({"sass": row["programs"]}), flush=True)
    write_text(os.path.join(args.out, "sass.txt"), text or "no program in the driver's disk cache\n")


def coopmat_dir(args) -> str | None:
    for d in ([args.coopmat] if args.coopmat else []) + [os.path.join(str(ROOT), "probes", "gl-coopmat"),
                                                         os.path.join(str(ROOT), "tools", "probes", "gl-coopmat")]:
        if d and os.path.isfile(os.path.join(d, "probe_gl_coopmat.py")):
            return d
    return None


def stage_coopmat(args, backend, store, rows, reports, state):
    """probe_gl_coopmat.py (FORCE=1: every variant submitted) in a process group of its
    own, killed at the stage's limit less 5 s; its output verbatim in OUT/coopmat.txt."""
    where = coopmat_dir(args)
    if where is None:
        rows.append({"stage": "coopmat", "verdict": "probe not found (--coopmat DIR)"})
        return
    limit = max(10.0, state["stage_limit"] - 5)
    proc = subprocess.Popen([sys.executable, "-u", "probe_gl_coopmat.py"], cwd=where, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env=dict(os.environ, FORCE="1"))
    try:
        out, _ = proc.communicate(timeout=limit)
        status = f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = f"killed after {limit:.0f} s"
    write_text(os.path.join(args.out, "coopmat.txt"), out)
    verdict = next((line for line in reversed(out.splitlines()) if line.startswith("VERDICT")), None)
    linked, variant = [], None
    for line in out.splitlines():                 # a variant's line, then "   LINKED" under it
        if line and not line[0].isspace():
            variant = line.split()[0]
        elif line.strip() == "LINKED":
            linked.append(variant)
    controls = {"p00.spv", "p0.spv", "glsl_ctrl_shuffle"}     # the probe's controls: no matrices
    rows.append({"stage": "coopmat", "status": status, "verdict": verdict,
                 "linked": [v for v in linked if v not in controls],
                 "controls_linked": [v for v in linked if v in controls], "lines": out.splitlines()[:80]})
    print(json.dumps({"coopmat": status, "verdict": verdict}), flush=True)


STAGES = {"retime": stage_retime, "tune": stage_tune, "compare": stage_compare, "client": stage_client,
          "skinny": stage_skinny, "sweep": stage_sweep, "knobs": stage_knobs, "sass": stage_sass,
          "coopmat": stage_coopmat}
# Each stage's limit in seconds under --budget (--stage-seconds overrides) and the least
# it needs to start; the searches inside get their own --seconds.  Expected on an H100:
# sweep ~15 s, knobs ~60 s (4096; + ~10 s each of 2048 and 8192), skinny ~3 x (--seconds
# + 10), sass ~15 s, coopmat ~25 s, tune --phased-seconds + --model-seconds + ~30 s.
STAGE_SECONDS = {"sweep": (45, 10), "knobs": (150, 30), "skinny": (None, 30), "sass": (40, 10),
                 "coopmat": (60, 15), "tune": (None, 60), "compare": (None, 60), "client": (None, 30),
                 "retime": (None, 20)}


def _num(v, fmt=",.0f") -> str:
    return format(v, fmt) if isinstance(v, (int, float)) else ""


def markdown(rows) -> str:
    """The tables: searches and re-timings against cuBLAS; the knobs' moves; the skinny
    shapes against their bounds; the sweep's and probes' verdicts."""
    out = ["| stage | shape / what | strategy | evals | tune s | ours GFLOP/s | cuBLAS GFLOP/s | ratio |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    # a stage's own row (skipped, stopped at its limit, failed) measured nothing: it is
    # said under the tables, never read as a measurement in them
    status = [r for r in rows if r.get("skipped") or r.get("timed_out") or r.get("failed")]
    rows = [r for r in rows if not (r.get("skipped") or r.get("timed_out") or r.get("failed"))]
    for r in rows:
        if r["stage"] in ("tune", "retime"):
            cub = gflops(shape(r["shape"].split(":")[0]), r["cublas_ms"]) if r.get("cublas_ms") else None
            out.append(f"| {r['stage']} | {r['shape']} | {r.get('strategy', 'model')} | "
                       f"{r.get('evaluations', '')} | {_num(r.get('tune_seconds'))} | "
                       f"{_num(r.get('gflops'))} | {_num(cub)} | "
                       f"{_num(r.get('vs_cublas') or r.get('vs_phased'), '.2f')} |")
        elif r["stage"] == "compare":
            for k in ("compute", "fragment", "cuda FFMA", "cuda 3xTF32"):
                if k in r:
                    out.append(f"| compare | {r['shape']} | {k} | | | {r[k]['gflops']:,.0f} | "
                               f"{_num(r.get('cublas_gflops'))} | "
                               f"{_num(r[k]['gflops'] / r['cublas_gflops'] if r.get('cublas_gflops') else None, '.2f')} |")
        elif r["stage"] == "client":
            out.append(f"| client | {r['what']} | GL {r['gl_s']:.3f} s, numpy {r['numpy_s']:.3f} s | | | | | "
                       f"{r['speedup']:.2f} |")
    knobs = [r for r in rows if r["stage"] == "knobs"]
    if knobs:
        out += ["", "| shape | base | move | GFLOP/s | x base | x cuBLAS | warps/SM | verified | note |",
                "|---|---|---|---:|---:|---:|---:|---|---|"]
        for r in knobs:
            out.append(f"| {r['shape'].split(':')[0]} | {r.get('base', '')} | {r.get('move', '')} | "
                       f"{_num(r.get('gflops'))} | {_num(r.get('vs_base'), '.3f')} | {_num(r.get('vs_cublas'), '.3f')} | "
                       f"{r.get('warps_per_sm') or ''} | {r.get('verified', '')} | "
                       f"{(r.get('invalid') or r.get('failure') or '')[:90]} |")
    skinny = [r for r in rows if r["stage"] == "skinny"]
    if skinny:
        out += ["", "| shape | default GFLOP/s | tuned GFLOP/s | cuBLAS GFLOP/s | x cuBLAS | bound (ms, kind) | "
                "x bound | write C fresh / pooled GB/s | evals |", "|---|---:|---:|---:|---:|---|---:|---|---:|"]
        for r in skinny:
            p = shape(r["shape"].split(":")[0])
            out.append(f"| {r['shape'].split(':')[0]} | {_num((r.get('default') or {}).get('gflops'))} | "
                       f"{_num(r.get('gflops'))} | {_num(gflops(p, r['cublas_ms']) if r.get('cublas_ms') else None)} | "
                       f"{_num(r.get('vs_cublas'), '.2f')} | {_num(r.get('bound_ms'), '.4f')} {r.get('bound', '')} | "
                       f"{_num(r.get('vs_bound'), '.2f')} | {_num(r.get('write_c_fresh_gbs'))} / "
                       f"{_num(r.get('write_c_pooled_gbs'))} | {r.get('evaluations', '')} |")
    sweep = [r for r in rows if r["stage"] == "sweep" and "knob" in r]
    if sweep:
        out += ["", "| sweep: knob value | shape | right | error / why |", "|---|---|---|---|"]
        for r in sweep:
            out.append(f"| {r['knob']} | {r.get('shape', '')} | {r.get('ok')} | "
                       f"{_num(r.get('error'), '.1e') or r.get('failure') or r.get('offered') or ''} |")
    for r in rows:
        if r["stage"] == "sass":
            for prog in r.get("programs", []):
                out.append(f"\nsass {r['config']}: registers {prog['max_register'] + 1}, FFMA/LDS "
                           f"{prog['ffma_per_lds']}, memory ops {prog['memory_ops']}, ops {prog['ops']}")
        elif r["stage"] == "coopmat":
            out.append(f"\ncoopmat: {r.get('status')}; {r.get('verdict')}; linked: {r.get('linked')}")
    for r in status:
        out.append(f"\nstage {r['stage']}: {r.get('skipped') or r.get('timed_out') or r.get('failed')}")
    return "\n".join(out) + "\n"


class StageTimeout(BaseException):
    """A stage ran past its limit (a BaseException, so that no evaluator records it as a
    config's failure: it ends the stage)."""


def _alarm(signum, frame):
    raise StageTimeout()


def _positive(kind):
    def parse(text):
        v = kind(text)
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return v
    return parse


def _sizes(text):
    sizes = [int(x) for x in text.split(",")]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be positive integers, got {text}")
    return sizes


def _stage_seconds(text):
    out = {}
    for part in text.split(","):
        name, _, secs = part.partition("=")
        if name not in STAGES or not secs:
            raise argparse.ArgumentTypeError(f"expected STAGE=SECONDS with a stage of {sorted(STAGES)}, got {part}")
        out[name] = _positive(float)(secs)
    return out


def stage_limit(name, args, started) -> tuple[float | None, str | None]:
    """The stage's limit in seconds (None: none), or why it does not run (--budget)."""
    own, least = STAGE_SECONDS[name]
    own = args.stage_seconds.get(name, own)
    if own is None and name == "tune" and args.budget:
        own = args.phased_seconds + args.model_seconds + 30
    if args.budget is None:
        return own, None
    left = args.budget - (time.monotonic() - started) - 5          # 5 s to write the outputs
    if left < least:
        return None, f"skipped: {left:.0f} s of the budget left, it needs {least}"
    return (left if own is None else min(own, left)), None


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
    ap.add_argument("--knob-sizes", type=_sizes, default=[4096, 2048, 8192],
                    help="squares of the knobs stage: every move at the first, the knobs alone at the others")
    ap.add_argument("--sass-size", type=_positive(int), default=4096,
                    help="the square whose fastest knobs-stage config the sass stage disassembles")
    ap.add_argument("--budget", type=_positive(float), help="seconds the whole run may take (stages fit in it)")
    ap.add_argument("--stage-seconds", type=_stage_seconds, default={},
                    help="STAGE=SECONDS,...: a stage's own limit (defaults: STAGE_SECONDS)")
    ap.add_argument("--coopmat", help="the folder of probe_gl_coopmat.py (default probes/gl-coopmat, "
                                      "then tools/probes/gl-coopmat)")
    args = ap.parse_args(argv)
    started = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    # the sass stage's children write the driver's disk cache here (gl_probes.sass_of_configs)
    state = {"cache_dir": os.path.join(os.path.abspath(args.out), "glcache")}
    backend = GLBackend()
    dev = backend.device()
    print(f"GL device: {dev.renderer} | {dev.driver}", flush=True)
    store = Store(args.db or os.path.join(args.out, "tune.sqlite"))
    rows, reports = [], {}
    doc = {"device": dev.to_dict(), "argv": sys.argv[1:], "rows": rows, "stages": []}
    signal.signal(signal.SIGALRM, _alarm)
    try:
        for name in args.stages:
            limit, skipped = stage_limit(name, args, started)
            if skipped:
                rows.append({"stage": name, "skipped": skipped})
                print(f"== stage {name}: {skipped}", flush=True)
                continue
            state["stage_limit"] = limit
            t0 = time.monotonic()
            if limit:
                signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                STAGES[name](args, backend, store, rows, reports, state)
            except StageTimeout:
                rows.append({"stage": name, "timed_out": f"stopped at its limit of {limit:.0f} s"})
            except Exception as e:       # one stage's failure (a missing tool, a driver error) is a row
                rows.append({"stage": name, "failed": f"{type(e).__name__}: {str(e)[:500]}",
                             "traceback": traceback.format_exc()[-2000:]})
                print(f"== stage {name} failed: {type(e).__name__}: {e}", flush=True)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            doc["stages"].append({"stage": name, "seconds": round(time.monotonic() - t0, 1), "limit": limit})
            print(f"== stage {name}: {time.monotonic() - t0:.0f} s (limit {limit})", flush=True)
            write_outputs(args, dev, doc, rows, reports)
    finally:
        store.close()
        write_outputs(args, dev, doc, rows, reports)
    print(markdown(rows))
    return 0


def write_outputs(args, dev, doc, rows, reports) -> None:
    """The JSON, the Markdown and the reports as they stand (after every stage)."""
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


if __name__ == "__main__":
    sys.exit(main())
