#!/usr/bin/env python3
"""Benchmark: the tuner's CUDA GEMM against cuBLAS (TF32 off), in one run.

    python scripts/bench-cuda --out DIR [--quick] [--only GROUPS] [--time-limit S]
                              [--budget N] [--strategy NAME] [--store PATH]
                              [--repeats N] [--seed N] [--unheld]

For every problem of the list (kept from the earlier benchmark):

1. Tolerance: the evaluator's (relative Frobenius error vs float64: 1e-5 for
   float32, 1e-12 for float64), except that a float32 problem gets 4x cuBLAS's
   own error on the very inputs the search verifies on when that is larger (at
   most 1e-4): over a long K (ICA's 60000) float32 summation alone comes near
   1e-5, and a kernel as exact as cuBLAS must not fail.  The tolerance goes to
   tune(), so every verdict in the store was made with it.
2. Tune: shadertune.perfmodel.guided.tune() (the search with the learned model saved beside
   the store, where there is one) with the CUDA backend's default strategy
   (--strategy to choose another), --time-limit seconds per problem (default
   60) and optionally --budget evaluations, into the store (--store, default
   OUT/tune.sqlite): every config built, verified against float64, timed with
   CUDA events behind a spin kernel (hold.py) and stored as it is measured.  A
   rerun with the same store resumes (results replayed, not measured).
3. Re-time: the config matmul(..., backend="cuda", config="auto") picks from
   that store (the stored best) against cuBLAS on fresh random operands (never
   zeros), both with CUDA events behind a spin kernel at the same repeat count
   (~100 ms of work, at least 10), medians; the picked kernel's output is
   checked again against a float64 reference on the GPU.  The best config of
   each kernel (FFMA, 3xTF32 mma.sync, 3xTF32 wgmma) among the search's results
   is re-timed the same way (the per-kernel ratio columns).

Reported per problem: evaluations (measured / replayed), search seconds, the
best-so-far curve (from the Results' timestamps: evaluations, seconds, best
ms) and its ratio to cuBLAS at 10, 20, 30 and 60 s.  Writes DIR/bench-cuda.md,
DIR/bench-cuda.json, DIR/bench-cuda.log (with the search's phases) and the store.
"""
import argparse
import json
import math
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from shadertune.core.problem import Problem  # noqa: E402
from shadertune.backends.cuda.profile import operand_path  # noqa: E402

# kernels reported apart (MMA knob -> column name, label)
KINDS = {0: ("ffma", "FFMA"), 1: ("dmma", "DMMA"), 3: ("mma", "3xTF32 mma.sync"), 4: ("wgmma", "3xTF32 wgmma")}
CURVE_SECONDS = (10, 20, 30, 60)


def problems(quick: bool):
    P = []
    for n in (1024, 2048, 4096, 8192):
        P.append(("square", Problem(n, n, n)))
    for n in (512, 1024, 2048):
        P.append(("LINPACK", Problem(n, n, n, trans_b=True)))
    for n in (16, 32, 64, 128):
        P.append(("DeepBench fwd", Problem(2560, n, 2560)))
        P.append(("DeepBench bwd", Problem(2560, n, 2560, trans_a=True)))
    for n in (32, 64, 256):
        P.append(("ICA", Problem(n, n, 60000, trans_b=True)))
    for n in (4096, 3456, 896):
        P.append(("LAPACK", Problem(n, n, 32, trans_b=True)))
    for n in (2048, 4096, 8192):   # DMMA (FP64 tensor cores) and FFMA kernels in one space
        P.append(("DGEMM", Problem(n, n, n, "float64")))
    # shapes no tile divides, N < 128, and an LLM-like 4096x11008x4096 (issue examples)
    for m, n, k in ((3000, 77, 5000), (1000, 1000, 1000), (4096, 11008, 4096)):
        P.append(("odd", Problem(m, n, k)))
    for batch, n in ((256, 128), (64, 512)):   # one strided-batched launch vs cuBLAS's
        P.append(("batched", Problem(n, n, n, batch=batch)))
    if quick:
        keep = {(2048, 2048, 2048), (4096, 4096, 4096), (2560, 16, 2560), (32, 32, 60000),
                (64, 64, 60000), (256, 256, 60000), (4096, 4096, 32)}
        P = [(g, p) for g, p in P if (p.M, p.N, p.K) in keep and not p.trans_a
             and p.dtype == "float32" and p.batch == 1]
    return P


def tolerance(cp, p: Problem, seed: int) -> tuple[float, float]:
    """(tolerance, cuBLAS's error) on the inputs the search verifies on (see 1. above)."""
    from shadertune.backends.cuda.baseline import cublas_gemm
    from shadertune.search import make_operands
    from shadertune.search.evaluate import DEFAULT_TOLERANCE
    A, B = (cp.asarray(x) for x in make_operands(p, seed))
    err = rel_err(cp, cublas_gemm(p, A, B), reference(cp, p, A, B))
    del A, B
    cp.get_default_memory_pool().free_all_blocks()
    tol = DEFAULT_TOLERANCE[p.dtype]
    if p.dtype == "float32":
        tol = min(1e-4, max(tol, 4 * err))
    return tol, err


def reference(cp, p: Problem, A, B):
    from shadertune.backends.cuda.baseline import op
    return op(A, p.trans_a).astype(cp.float64) @ op(B, p.trans_b).astype(cp.float64)


def rel_err(cp, out, ref) -> float:
    if not bool(cp.isfinite(out).all()):
        return float("inf")
    return float(cp.linalg.norm(out.astype(cp.float64) - ref) / cp.linalg.norm(ref))


def repeats_for(ms: float) -> int:
    return max(10, min(200, math.ceil(100.0 / max(ms, 1e-3))))   # ~100 ms of timed work


def enqueue_us(launch, n: int) -> float:
    """Host microseconds per call of `launch` (enqueue only, behind a hold so
    the queue never blocks): when it exceeds the kernel's device time, plain
    event timing measures the host (hold.py)."""
    import cupy
    from shadertune.backends.cuda.hold import hold, hold_us
    launch()
    hold(hold_us(n))
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
    dt = time.perf_counter() - t0
    cupy.cuda.get_current_stream().synchronize()
    return dt / n * 1e6


def retime(be, cp, p, cfg, A, B, ref, reps, unheld=False) -> dict:
    """Median held time (and error) of `cfg` on the benchmark's operands."""
    k = be.build(p, cfg)
    try:
        out = k.prepare(A, B)
        k.launch()
        k._sync()
        rec = {"config": cfg.to_dict(), "error": rel_err(cp, out, ref),
               "ms": statistics.median(k.time(repeats=reps, warmup=3, mode="held")), "regs": k.regs}
        if unheld:
            rec["unheld_ms"] = statistics.median(k.time(repeats=reps, warmup=3, hold_stream=False))
            rec["host_us"] = enqueue_us(k.launch, reps)
        return rec
    finally:
        k.release()


def bench_one(be, cp, store, group, p, args, log) -> dict:
    from shadertune.backends.cuda.baseline import cublas_gemm, operands
    from shadertune.core.config import Config
    from shadertune.perfmodel.guided import tune
    from shadertune.search import Budget
    from shadertune.search.curve import best_so_far
    from shadertune.selection.chain import select_config

    tol, cub_search_err = tolerance(cp, p, args.seed)
    strategy = args.strategy or be.default_strategy
    t0 = time.time()
    entry = tune(be, p, strategy=strategy, budget=Budget(args.budget, args.time_limit, spend_all=True), store=store,
                 repeats=args.repeats, seed=args.seed, tolerance=tol,
                 on_phase=lambda label: log(f"  {time.time() - t0:7.1f} s  {label}", echo=False))
    curve = best_so_far(entry["results"], t0=t0)
    row = {"group": group, "problem": p.to_dict(), "key": p.key, "flops": p.flops,
           "strategy": strategy, "tolerance": tol, "cublas_error_on_search_inputs": cub_search_err,
           "evaluated": entry["evaluated"], "measured": entry["measured"], "cached": entry["cached"],
           "seconds": entry["seconds"], "space_size": entry["space_size"],
           "full_space_size": entry["full_space_size"],
           "stage_seconds": entry.get("stage_seconds"), "curve": curve,
           "statuses": {s: sum(r["status"] == s for r in entry["results"])
                        for s in sorted({r["status"] for r in entry["results"]})}}
    if entry["best"] is None:
        log(f"{group:14s} {p.key:28s} no config passed verification in {entry['evaluated']} evaluations")
        return row
    cfg, how = select_config(be, p, store)          # what config="auto" uses
    A, B = operands(p, seed=hash(p.key) % 2**31)
    ref = reference(cp, p, A, B)
    cub_err = rel_err(cp, cublas_gemm(p, A, B), ref)
    reps = repeats_for(entry["best"]["median_ms"])
    best = retime(be, cp, p, cfg, A, B, ref, reps, unheld=args.unheld)
    cub = statistics.median(be.cublas_time(p, repeats=reps, operands=(A, B)))
    row.update(picked=how, best_config=best["config"], best_error=best["error"], repeats=reps,
               ours_ms=best["ms"], cublas_ms=cub, cublas_error=cub_err, regs=best["regs"],
               ours_tflops=p.flops / best["ms"] / 1e9, cublas_tflops=p.flops / cub / 1e9,
               ratio=cub / best["ms"], search_best_ms=entry["best"]["median_ms"])
    for mma, (name, _) in KINDS.items():
        mine = [r for r in entry["results"] if r["status"] == "ok" and r["config"].get("MMA", 0) == mma]
        if mine:
            top = Config(min(mine, key=lambda r: r["median_ms"])["config"])
            rec = best if top == cfg else retime(be, cp, p, top, A, B, ref, reps)
            row.update({f"{name}_config": rec["config"], f"{name}_ms": rec["ms"],
                        f"ratio_{name}": cub / rec["ms"]})
    row["curve_ratio"] = {str(s): (cub / b if (b := _best_at(curve, s)) else None) for s in CURVE_SECONDS}
    if args.unheld:
        from shadertune.backends.cuda.baseline import op
        a, b = op(A, p.trans_a), op(B, p.trans_b)
        out = cp.empty(p.out_shape, dtype=p.dtype)
        cub_u = statistics.median(be.cublas_time(p, repeats=reps, operands=(A, B), hold_stream=False))
        row.update(ours_unheld_ms=best["unheld_ms"], cublas_unheld_ms=cub_u,
                   ratio_unheld=cub_u / best["unheld_ms"], ours_host_us=best["host_us"],
                   cublas_host_us=enqueue_us(lambda: cp.matmul(a, b, out=out), reps))
        del out
    del A, B, ref
    cp.get_default_memory_pool().free_all_blocks()
    log(f"{group:14s} {p.key:28s} {entry['evaluated']:4d} evals ({entry['measured']} measured) "
        f"in {entry['seconds']:5.1f} s  ours {row['ours_tflops']:6.2f}  cuBLAS {row['cublas_tflops']:6.2f} "
        f"TFLOP/s  x{row['ratio']:.2f}  ("
        + ", ".join(f"{label} x{row['ratio_' + name]:.2f}" for name, label in KINDS.values()
                    if f"ratio_{name}" in row)
        + f")  err {row['best_error']:.1e} (cuBLAS {cub_err:.1e}, tol {tol:.1e})")
    return row


def _best_at(curve, seconds):
    got = [pt["best_ms"] for pt in curve if pt["seconds"] <= seconds]
    return got[-1] if got else None


def _cfg_text(c: dict) -> str:
    return (f"{c['BM']}x{c['BN']}x{c['BK']} t{c['TM']}x{c['TN']} w{c['WM']}x{c['WN']} v{c['VEC']} "
            f"pad{c['PAD']} db{c['DB']} st{c.get('ST', 0)} tr{c['trans']} KG{c['KG']} KL{c['KL']} "
            f"KR{c.get('KR', 0)}" + ("" if not c.get("MMA", 0) else " " + KINDS[c["MMA"]][1]) + operand_path(c))


def markdown(rows, info, cmd, args) -> str:
    fmt = lambda x, f=".2f": "-" if x is None else format(x, f)  # noqa: E731
    L = [f"Device: {info['renderer']} ({info['driver']}); {time.strftime('%Y-%m-%d')}",
         f"Command: `{cmd}`", "",
         "Tuned by shadertune.search (strategy per row), re-timed against cuBLAS (TF32 off) in the "
         "same run; x cuBLAS at T s: cuBLAS / the search's best median found by then.", "",
         "| group | M x N x K | op | strategy | ours TFLOP/s | cuBLAS TFLOP/s | ours/cuBLAS | "
         + " | ".join(f"{label} only" for _, label in KINDS.values())
         + " | ours ms | cuBLAS ms | "
         + ("unheld ours/cuBLAS | unheld ours ms | unheld cuBLAS ms | " if args.unheld else "")
         + "err ours / cuBLAS (tol) | evals (measured) | search s | "
         + " | ".join(f"x cuBLAS at {s} s" for s in CURVE_SECONDS) + " | best config |",
         "|" + "---|" * 4 + "---:|" * (3 + len(KINDS) + 2 + (3 if args.unheld else 0)) + "---|"
         + "---:|" * (2 + len(CURVE_SECONDS)) + "---|"]
    for r in rows:
        p = r["problem"]
        op = ("T" if p["trans_a"] else "N") + ("T" if p["trans_b"] else "N")
        shape = (f"{p['batch']} x " if p.get("batch", 1) > 1 else "") + f"{p['M']}x{p['N']}x{p['K']}"
        head = f"| {r['group']} | {shape} | {op} | {r['strategy']} | "
        tail = (f"{r['evaluated']} ({r['measured']}) | {r['seconds']:.0f} | ")
        if "ratio" not in r:
            L.append(head + " | ".join("-" for _ in range(3 + len(KINDS) + 2 + (3 if args.unheld else 0)))
                     + " | - | " + tail + " | ".join("-" for _ in CURVE_SECONDS) + " | none passed |")
            continue
        L.append(head + f"{r['ours_tflops']:.2f} | {r['cublas_tflops']:.2f} | {r['ratio']:.2f} | "
                 + " | ".join(fmt(r.get(f"ratio_{name}")) for name, _ in KINDS.values())
                 + f" | {r['ours_ms']:.4f} | {r['cublas_ms']:.4f} | "
                 + (f"{r['ratio_unheld']:.2f} | {r['ours_unheld_ms']:.4f} | {r['cublas_unheld_ms']:.4f} | "
                    if args.unheld else "")
                 + f"{r['best_error']:.1e} / {r['cublas_error']:.1e} ({r['tolerance']:.0e}) | " + tail
                 + " | ".join(fmt(r["curve_ratio"][str(s)]) for s in CURVE_SECONDS)
                 + f" | {_cfg_text(r['best_config'])} |")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="7 problems (square 2048/4096, DeepBench N=16, the 3 ICA, LAPACK 4096)")
    ap.add_argument("--only", default="", help="comma-separated groups to run, e.g. 'DeepBench fwd,ICA'")
    ap.add_argument("--shapes", default="", help="comma-separated MxNxK: only these problems of the groups")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds of search per problem (default 60)")
    ap.add_argument("--budget", type=int, help="at most N evaluations per problem (default: no limit)")
    ap.add_argument("--strategy", help="search strategy (default: the CUDA backend's, model)")
    ap.add_argument("--store", help="the tuning store (default OUT/tune.sqlite)")
    ap.add_argument("--repeats", type=int, default=10, help="timed runs per config in the search (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the search's inputs (default 0)")
    ap.add_argument("--unheld", action="store_true",
                    help="also time the picked config and cuBLAS without the stream hold, host launch "
                         "cost included, and each launch's host cost (columns 'unheld'; see "
                         "shadertune/backends/cuda/hold.py)")
    args = ap.parse_args(argv)
    from shadertune.backends.cuda import CUDABackend
    from shadertune.backends.cuda.baseline import plain_fp32
    from shadertune.db import Store
    from shadertune.search import STRATEGIES
    if args.strategy is not None and args.strategy not in STRATEGIES:
        ap.error(f"--strategy must be one of {sorted(STRATEGIES)}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cp = plain_fp32()
    be = CUDABackend()
    info = be.device().to_dict()
    logf = open(out / "bench-cuda.log", "a")

    def log(msg, echo=True):
        if echo:
            print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    only = {g.strip() for g in args.only.split(",") if g.strip()}
    shapes = set(filter(None, args.shapes.split(",")))
    plan = [(g, p) for g, p in problems(args.quick) if (not only or g in only)
            and (not shapes or f"{p.M}x{p.N}x{p.K}" in shapes)]
    if not plan:
        ap.error(f"--only {args.only!r} --shapes {args.shapes!r} match no problem")
    store_path = pathlib.Path(args.store) if args.store else out / "tune.sqlite"
    log(f"device {info['renderer']} | {info['driver']} | SMs {info['limits']['num_sms']} | "
        f"store {store_path}")
    with Store(store_path) as store:
        rows = [bench_one(be, cp, store, g, p, args, log) for g, p in plan]
    cmd = "python scripts/bench-cuda " + " ".join(sys.argv[1:] if argv is None else argv)
    md = markdown(rows, info, cmd, args)
    (out / "bench-cuda.md").write_text(md)
    (out / "bench-cuda.json").write_text(json.dumps(
        {"device": info, "command": cmd, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
         "store": str(store_path), "time_limit": args.time_limit, "budget": args.budget,
         "rows": rows}, indent=1))
    print(md)


if __name__ == "__main__":
    from shadertune.errors import ContextError
    try:
        sys.exit(main())
    except ContextError as e:        # no CUDA device or no CuPy here: one line, no traceback
        sys.exit(f"bench-cuda: error: {e}")
