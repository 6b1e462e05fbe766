#!/usr/bin/env python3
"""Accuracy of the 3xTF32 GEMM against float64: emulated kernels (CPU) and, with
--gpu, the real kernels and cuBLAS SGEMM on the same data.

    scripts/accuracy-3xtf32 [--out DIR] [--size M,N] [--K 256,1024,4096]
                            [--merges 1,2,4,8] [--models hopper] [--kappa-K 1024]
                            [--seed 0] [--quick]
    scripts/accuracy-3xtf32 --gpu [--problem 4096] [--store PATH | --config JSON]
                            [--sample 32] [--skip-cpu] ...
    scripts/accuracy-3xtf32 --replay BENCH_JSON [--replay-whole-chain] [--skip-cpu] ...

CPU part (runs anywhere, M x N outputs, default 64 x 64): for three data sets
(uniform in (-1, 1); +-2^U(-20, 20), random signs; ill-conditioned products,
rows of A nearly orthogonal to columns of B, swept over their condition number
kappa = || |A||B| ||_F / || AB ||_F), the relative Frobenius error against a
compensated float64 reference and the largest componentwise error
|C - AB|_ij / (|A||B|)_ij (to set against the bounds) of
  - 3xTF32 as the kernels compute it (shadertune/backends/cuda/emulate.py),
    one round-to-nearest merge every m k-steps of 8 (--merges; mma.sync merges
    every k-step, wgmma every BK / 8), tensor-core model(s) --models;
  - plain FP32: numpy's float32 matmul (the CPU's SGEMM, its own summation
    order) and the sequential FMA chain (emulated, k = 0..K-1);
and the componentwise bounds gamma of shadertune/backends/cuda/accuracy.py.

GPU part (--gpu; needs CuPy and an NVIDIA GPU; NOT RUN YET: written without
one): the same three data sets at --problem's size (default 4096^3; the
ill-conditioned one with t = 1e-4, its kappa measured and reported), float64
reference on the GPU; errors of cuBLAS SGEMM (TF32 off, CuPy) and of the 3xTF32
kernels, built and run through the backend: the tuned one (--config, else the
store's fastest 3xTF32 config with --store, else run U's 4096 winner;
shadertune/profile_configs.py pick_config) and one per merge interval the
space has (mma.sync; wgmma with BK 8, 16, 32; K_G 1). For each kernel, a
--sample x --sample block of C is emulated on the CPU under every --models
model and compared bit for bit: the share of equal elements says which model
of the tensor core's adder the hardware follows. About 40-60 s on an H200
with --skip-cpu (most of it compiling 4 kernels on a fresh kernel cache).
Without a GPU it says so and exits.

Replay (--replay BENCH_JSON, CPU only): the 3xTF32 trials a GPU benchmark
recorded (bench-cuda.json: config and relative error on uniform(-1, 1)
operands) against the emulator's error for the same K, merge interval and K_G
on a --sample x --sample block of C: a check of the models against hardware
results already measured.

Writes DIR/accuracy.md and DIR/accuracy.json with --out; prints the tables.
"""
import argparse
import json
import pathlib
import platform
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from shadertune.backends.cuda import accuracy as acc  # noqa: E402
from shadertune.backends.cuda import emulate as em  # noqa: E402

DATASETS = ("uniform", "wide", "ill")
KAPPA_T = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)     # ill-conditioned: cancellation t


def ints(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return out


def models(text: str) -> list[str]:
    out = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in out if m not in em.TC_MODELS]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"unknown model(s) {bad or text!r}; choose from {sorted(em.TC_MODELS)}")
    return out


def make_data(name: str, M: int, N: int, K: int, seed: int, t: float = 1e-4):
    if name == "uniform":
        return acc.uniform(M, N, K, seed)
    if name == "wide":
        return acc.wide_range(M, N, K, seed)
    return acc.ill_conditioned(M, N, K, t, seed)


def measure(C, ref, mag) -> dict:
    return {"rel": acc.rel_error(C, ref), "comp": acc.componentwise_error(C, ref, mag)}


# --- CPU: emulated kernels and plain FP32 --------------------------------------------------

def cpu_row(A, B, merges, tc_models, label: str, t: float | None = None) -> dict:
    """Every method's errors on one (A, B)."""
    ref, mag = acc.reference(A, B), acc.magnitude(A, B)
    K = A.shape[1]
    row = {"data": label, "K": K, "kappa": acc.condition(A, B, ref), "t": t,
           "numpy": measure(A @ B, ref, mag), "fma_chain": measure(em.emulate_sgemm(A, B), ref, mag),
           "bound_sgemm": acc.bound_sgemm(K), "tc": {}}
    for model in tc_models:
        for m in merges:
            key = f"m{m} {model}"
            t0 = time.perf_counter()
            row["tc"][key] = {**measure(em.emulate_3xtf32(A, B, merge=m, model=model), ref, mag),
                              "bound": acc.bound_3xtf32(K, m, model), "seconds": time.perf_counter() - t0}
    return row


def cpu_study(args, log) -> list[dict]:
    M, N = args.size
    rows = []
    for name in ("uniform", "wide"):
        for K in args.K:
            A, B = make_data(name, M, N, K, args.seed)
            rows.append(cpu_row(A, B, args.merges, args.models, name))
            log(f"  {name:8s} K={K:5d} done")
    for t in (KAPPA_T[:3] if args.quick else KAPPA_T):
        A, B = make_data("ill", M, N, args.kappa_K, args.seed, t)
        rows.append(cpu_row(A, B, args.merges, args.models, "ill", t))
        log(f"  ill      t={t:.0e} kappa={rows[-1]['kappa']:.2e} done")
    return rows


def cpu_tables(rows, merges, tc_models) -> str:
    cols = [f"m{m} {model}" for model in tc_models for m in merges]
    head = ("| data | K | kappa | numpy FP32 | FP32 FMA chain | "
            + " | ".join(f"3xTF32 merge {c.split()[0][1:]} ({c.split()[1]})" for c in cols) + " |")
    rule = "|---|---:|---:|" + "---:|" * (2 + len(cols))

    def table(what: str) -> list[str]:
        out = [head, rule]
        for r in rows:
            out.append(f"| {r['data']} | {r['K']} | {r['kappa']:.2g} | {r['numpy'][what]:.2e} | "
                       f"{r['fma_chain'][what]:.2e} | "
                       + " | ".join(f"{r['tc'][c][what]:.2e}" for c in cols) + " |")
        return out
    bounds = [head.replace("| data | K | kappa |", "| bound gamma | K | |"), rule]
    for K in sorted({r["K"] for r in rows}):
        r = next(r for r in rows if r["K"] == K)
        bounds.append(f"| componentwise | {K} | | - | {r['bound_sgemm']:.2e} | "
                      + " | ".join(f"{r['tc'][c]['bound']:.2e}" for c in cols) + " |")
    return "\n".join(["Relative Frobenius error ||C - AB||_F / ||AB||_F:", ""] + table("rel")
                     + ["", "Largest componentwise error max |C - AB|_ij / (|A||B|)_ij:", ""] + table("comp")
                     + ["", "Bounds (|C - AB| <= gamma |A||B|; u = 2^-24):", ""] + bounds) + "\n"


# --- GPU: the real kernels and cuBLAS ----------------------------------------------------------------

def kernel_configs(be, problem, store=None, config=None) -> list[tuple[str, object]]:
    """(label, config) of the kernels the GPU part runs: the tuned one (--config,
    else the store's fastest 3xTF32 config with --store, else run U's 4096
    winner: profile_configs.pick_config) and one per merge interval the space has
    (mma.sync: every k-step; wgmma with BK 8, 16, 32: every 1, 2, 4 k-steps),
    K_G = 1, each the candidate list's first such config, else the space's first."""
    from shadertune.backends.cuda.profile import describe
    from profile_configs import pick_config
    space = be.space(problem)
    cfg, how = pick_config(be, problem, store, config)
    out = [(f"tuned: {describe(cfg)} ({how})", cfg)]
    cands = be.candidates(problem, 64)
    for mma, bk, label in ((3, None, "mma.sync"), (4, 8, "wgmma BK 8"), (4, 16, "wgmma BK 16"),
                           (4, 32, "wgmma BK 32")):
        fixed = {"MMA": mma, "KG": 1, **({"BK": bk} if bk else {})}
        if all(cfg.get(k) == v for k, v in fixed.items()):
            continue                    # the tuned kernel stands for this merge interval
        pick = next((c for c in cands if all(c[k] == v for k, v in fixed.items())), None)
        pick = pick or space.first(fixed, order=[])
        if pick is not None:
            out.append((f"{label} (merge {em.for_config(problem, pick)['merge']})", pick))
    return out


def bit_agreement(out, emu) -> dict:
    """Share of bit-equal elements and the largest difference in float32 ulps
    (ordered integer distance of the bit patterns)."""
    def ordered(x):
        i = np.asarray(x, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(ordered(out) - ordered(emu))
    return {"equal": float(np.mean(d == 0)), "max_ulps": int(d.max())}


def gpu_study(args, log) -> list[dict]:
    from shadertune.backends.cuda import CUDABackend, device
    from shadertune.core.problem import Problem
    if not device.has_gpu():
        raise SystemExit("accuracy-3xtf32: --gpu needs CuPy and an NVIDIA GPU; none is visible")
    from shadertune.backends.cuda.baseline import cublas_gemm, plain_fp32
    cp = plain_fp32()
    be = CUDABackend()
    problem = args.problem
    M, N, K = problem.M, problem.N, problem.K
    configs = kernel_configs(be, problem, args.store, args.config)
    t0 = time.perf_counter()
    be.precompile(problem, [c for _, c in configs])      # in parallel, into the kernel cache
    log(f"  gpu: {len(configs)} kernels compiled in {time.perf_counter() - t0:.1f} s")
    rs = np.random.default_rng(args.seed)
    rows_i, cols_i = (np.sort(rs.choice(n, min(n, args.sample), replace=False)) for n in (M, N))
    out_rows = []
    for name in DATASETS:
        A, B = make_data(name, M, N, K, args.seed, t=1e-4)
        dA, dB = cp.asarray(A), cp.asarray(B)
        a64, b64 = dA.astype(cp.float64), dB.astype(cp.float64)
        ref = a64 @ b64                      # float64 on the GPU: ~K 2^-53 |A||B|, far below float32's
        mag = cp.abs(a64) @ cp.abs(b64)
        kappa = float(cp.linalg.norm(mag) / cp.linalg.norm(ref))
        ref_h, mag_h = cp.asnumpy(ref), cp.asnumpy(mag)
        row = {"data": name, "problem": problem.key, "kappa": kappa,
               "cublas": measure(cp.asnumpy(cublas_gemm(problem, dA, dB)), ref_h, mag_h), "kernels": []}
        for label, cfg in configs:
            k = be.build(problem, cfg)
            try:
                C = k.run(dA, dB)
            finally:
                k.release()
            rec = {"label": label, "config": cfg.to_dict(), **measure(C, ref_h, mag_h), "models": {}}
            if cfg.get("MMA", 0) in (3, 4):
                kw = em.for_config(problem, cfg)
                for model in args.models:
                    emu = em.emulate_3xtf32(A[rows_i], np.ascontiguousarray(B[:, cols_i]), model=model, **kw)
                    rec["models"][model] = bit_agreement(C[np.ix_(rows_i, cols_i)], emu)
            row["kernels"].append(rec)
            log(f"  gpu {name:8s} {label:22s} err {rec['rel']:.2e} (cuBLAS {row['cublas']['rel']:.2e}) "
                + " ".join(f"{m}: {v['equal']:.1%} equal" for m, v in rec["models"].items()))
        out_rows.append(row)
        del dA, dB, a64, b64, ref, mag
        cp.get_default_memory_pool().free_all_blocks()
    return out_rows


def gpu_tables(rows, tc_models) -> str:
    L = ["| data | problem | kappa | kernel | rel. error | cuBLAS rel. error | componentwise | "
         + " | ".join(f"bit-equal to {m}" for m in tc_models) + " |",
         "|---|---|---:|---|---:|---:|---:|" + "---:|" * len(tc_models)]
    for r in rows:
        for k in r["kernels"]:
            L.append(f"| {r['data']} | {r['problem']} | {r['kappa']:.2g} | {k['label']} | {k['rel']:.2e} | "
                     f"{r['cublas']['rel']:.2e} | {k['comp']:.2e} | "
                     + " | ".join(f"{k['models'][m]['equal']:.1%} (max {k['models'][m]['max_ulps']} ulp)"
                                  if m in k["models"] else "-" for m in tc_models) + " |")
    return "\n".join(L) + "\n"


# --- replay: the errors a GPU benchmark recorded, predicted by the emulator ---------------------------

def replay_points(bench: dict, whole_chain: bool = False) -> list[tuple]:
    """Distinct (problem, config, recorded error) of the 3xTF32 trials in a
    bench-cuda.json. whole_chain: the kernel of run O, which summed each K_G
    split's whole range in one tensor-core chain (merge = the split's k-steps)."""
    from shadertune.core.config import Config
    from shadertune.core.problem import Problem
    seen = {}
    for row in bench["rows"]:
        p = Problem.from_dict(row["problem"])
        for t in row.get("trials", []):
            c = t["config"]
            if c.get("MMA", 0) not in (3, 4) or t.get("error") is None or not np.isfinite(t["error"]):
                continue
            kw = em.for_config(p, c)
            if whole_chain:
                longest = max(e - b for b, e in em.split_ranges(p.K, kw["KG"]))
                kw["merge"] = -(-longest // em.BLOCK)
            key = (p.M, p.N, p.K, kw["merge"], kw["KG"], kw["RZ"])
            seen.setdefault(key, (p, Config(c), kw, []))[3].append(t["error"])
    return [(p, c, kw, float(np.median(errs))) for p, c, kw, errs in seen.values()]


def replay(args, log) -> list[dict]:
    bench = json.loads(pathlib.Path(args.replay).read_text())
    out = []
    for p, cfg, kw, recorded in replay_points(bench, args.replay_whole_chain):
        A, B = acc.uniform(min(p.M, args.sample), min(p.N, args.sample), p.K, args.seed)
        ref = acc.reference(A, B)
        rec = {"problem": p.key, **kw, "recorded": recorded, "predicted": {}}
        for model in args.models:
            rec["predicted"][model] = acc.rel_error(em.emulate_3xtf32(A, B, model=model, **kw), ref)
        out.append(rec)
        log(f"  replay {p.key:28s} merge {kw['merge']:4d} KG {kw['KG']:3d}: recorded {recorded:.3e}, "
            + ", ".join(f"{m} {v:.3e}" for m, v in rec["predicted"].items()))
    return out


def replay_table(rows, tc_models) -> str:
    L = ["| problem | merge (k-steps) | K_G | recorded error | "
         + " | ".join(f"emulated, {m} (ratio)" for m in tc_models) + " |",
         "|---|---:|---:|---:|" + "---:|" * len(tc_models)]
    for r in sorted(rows, key=lambda r: (r["problem"], r["merge"], r["KG"])):
        L.append(f"| {r['problem']} | {r['merge']} | {r['KG']} | {r['recorded']:.3e} | "
                 + " | ".join(f"{r['predicted'][m]:.3e} ({r['predicted'][m] / r['recorded']:.2f})"
                              for m in tc_models) + " |")
    return "\n".join(L) + "\n"


def parse_args(argv=None):
    from shadertune.core.problem import Problem
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder for accuracy.md and accuracy.json")
    ap.add_argument("--size", type=ints, default=[64, 64], help="M,N of the CPU study (default 64,64)")
    ap.add_argument("--K", type=ints, default=[256, 1024, 4096], help="K values of the CPU study")
    ap.add_argument("--merges", type=ints, default=[1, 2, 4, 8], help="k-steps of 8 per merge (default 1,2,4,8)")
    ap.add_argument("--models", type=models, default=["hopper"],
                    help=f"tensor-core models, comma-separated: {', '.join(sorted(em.TC_MODELS))}")
    ap.add_argument("--kappa-K", type=int, default=1024, help="K of the ill-conditioned sweep (default 1024)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="K = 256 and 3 condition numbers (a smoke test)")
    ap.add_argument("--gpu", action="store_true", help="also the real kernels and cuBLAS (CuPy, NVIDIA GPU)")
    ap.add_argument("--problem", default="4096", help="GPU problem: N or M,N,K (default 4096)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--store", help="GPU: the tuned kernel is this store's pick for --problem")
    src.add_argument("--config", help="GPU: the tuned kernel is this config (JSON)")
    ap.add_argument("--sample", type=int, default=32, help="GPU: rows and columns of C emulated bit for bit")
    ap.add_argument("--skip-cpu", action="store_true", help="skip the CPU study (with --gpu or --replay)")
    ap.add_argument("--replay", metavar="BENCH_JSON",
                    help="predict the errors a bench-cuda.json recorded for its 3xTF32 trials: the emulator "
                         "on a --sample x --sample block of fresh uniform(-1, 1) operands per problem")
    ap.add_argument("--replay-whole-chain", action="store_true",
                    help="replay as run O's kernel did it: each K_G split summed in one tensor-core chain")
    args = ap.parse_args(argv)
    if len(args.size) != 2:
        ap.error(f"--size takes M,N, got {args.size}")
    if args.quick:
        args.K = [256]
    try:
        args.problem = Problem.parse(args.problem)
    except ValueError as e:
        ap.error(f"--problem: {e}")
    if args.config is not None:
        try:
            json.loads(args.config)
        except ValueError as e:
            ap.error(f"--config is not JSON: {e}")
    if args.store is not None and not pathlib.Path(args.store).expanduser().exists():
        ap.error(f"--store {args.store}: no such file")
    if args.skip_cpu and not (args.gpu or args.replay):
        ap.error("--skip-cpu leaves nothing to do without --gpu or --replay")
    return args


def main(argv=None):
    args = parse_args(argv)
    out = pathlib.Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    result = {"command": "scripts/accuracy-3xtf32 " + " ".join(sys.argv[1:] if argv is None else argv),
              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(),
              "numpy": np.__version__, "models": {m: em.TC_MODELS[m] for m in args.models}}
    md = [f"Command: `{result['command']}` ({result['date']}, numpy {np.__version__})", ""]
    if not args.skip_cpu:
        result["cpu"] = rows = cpu_study(args, log)
        md += [f"CPU: {args.size[0]} x {args.size[1]} outputs; 3xTF32 emulated "
               f"(shadertune/backends/cuda/emulate.py), FP32 on this CPU.", "", cpu_tables(rows, args.merges, args.models)]
    if args.replay:
        result["replay"] = rp = replay(args, log)
        md += [f"Replay of {args.replay}" + (" (one chain per K_G split)" if args.replay_whole_chain else "")
               + f": recorded errors (whole C, the GPU) against the emulator's on {args.sample} x "
               f"{args.sample} outputs of fresh uniform(-1, 1) operands:", "", replay_table(rp, args.models)]
    if args.gpu:
        result["gpu"] = g = gpu_study(args, log)
        md += ["GPU (float64 reference on the GPU):", "", gpu_tables(g, args.models)]
    text = "\n".join(md)
    print(text)
    if out:
        (out / "accuracy.md").write_text(text)
        (out / "accuracy.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
