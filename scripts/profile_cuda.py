#!/usr/bin/env python3
"""Profile one launch of the tuned 3xTF32 CUDA kernel with Nsight Compute.

    scripts/profile-cuda --out DIR [--problem 4096] [--dtype float32|float64]
                         [--store PATH | --config JSON] [--ncu PATH] [--dry-run]

The kernel is built through the backend (shadertune.backends.cuda): --config,
else the store's fastest correct 3xTF32 config for --problem on this GPU
(--store), else run U's 4096 winner (BENCHMARKS.md). This process compiles it
into the kernel cache and times it (CUDA events, 10 launches behind a spin
kernel), then runs ncu on a child process that loads it, launches it once
unprofiled (warm-up) and once profiled (--kernel-name st_gemm --launch-skip 1
--launch-count 1, --clock-control none: the clocks the benchmarks ran at).
Sections SpeedOfLight, ComputeWorkloadAnalysis, MemoryWorkloadAnalysis,
SchedulerStats, WarpStateStats, Occupancy, LaunchStats, InstructionStats, and
by name the tensor-pipe, issue, shared-memory and L2 metrics of
shadertune/backends/cuda/profile.py (those `ncu --query-metrics` lists on
this GPU; the others are named in the summary as left out).

Writes DIR/profile.ncu-rep (open it in Nsight Compute), DIR/profile.csv (the
raw page, base units), DIR/profile.md (summary table: tensor pipe active %,
issue slots, stall reasons, shared-memory and L2 traffic) and
DIR/profile.json; prints the summary. --dry-run prints the ncu command lines
and writes nothing. Needs a GPU, CuPy and ncu (on PATH, under
/usr/local/cuda/bin, or --ncu). About 30-60 s on an H200 (a fresh kernel
cache compiles the kernel first: ~10-20 s).
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from shadertune.backends.cuda import profile as prof  # noqa: E402
from profile_configs import pick_config  # noqa: E402

SCRIPT = pathlib.Path(__file__).resolve()


def find_ncu(given: str | None) -> str | None:
    if given:
        return given if (os.access(given, os.X_OK) or shutil.which(given)) else None
    for c in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if c and os.access(c, os.X_OK):
            return c
    return None


def child_argv(problem_text: str, config: dict, dtype: str = "float32") -> list[str]:
    """The profiled process: this script in --child mode."""
    return [sys.executable, str(SCRIPT), "--child", "--problem", problem_text, "--dtype", dtype,
            "--config", json.dumps(config, sort_keys=True)]


def run_child(args) -> int:
    """Under ncu: build (from the kernel cache), launch twice, check it ran."""
    from shadertune.backends.cuda import CUDABackend
    from shadertune.backends.cuda.baseline import operands
    be = CUDABackend()
    k = be.build(args.problem, json.loads(args.config))
    dA, dB = operands(args.problem)
    out = k.prepare(dA, dB)
    for _ in range(2):          # launch 0: warm-up (skipped by ncu); launch 1: profiled
        k.launch()
    k._sync()
    import cupy
    if not bool(cupy.isfinite(out).all()):
        print("profile-cuda: the kernel's output is not finite", file=sys.stderr)
        return 1
    k.release()
    return 0


def parse_args(argv=None):
    from shadertune.core.problem import Problem
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output folder (required unless --dry-run)")
    ap.add_argument("--problem", default="4096", help="N or M,N,K (default 4096)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                    help="the operands' type (float64: a DGEMM kernel; default float32)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--store", help="the store whose fastest 3xTF32 config for --problem is profiled")
    src.add_argument("--config", help="the config to profile (JSON)")
    ap.add_argument("--ncu", help="path of ncu (default: PATH, then /usr/local/cuda/bin/ncu)")
    ap.add_argument("--dry-run", action="store_true", help="print the ncu commands; run nothing")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.problem_text = args.problem
    try:
        args.problem = Problem.parse(args.problem, dtype=args.dtype)
    except ValueError as e:
        ap.error(f"--problem: {e}")
    if args.config is not None:
        try:
            if not isinstance(json.loads(args.config), dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            ap.error(f"--config is not a JSON object: {e}")
    if args.store is not None and not pathlib.Path(args.store).expanduser().exists():
        ap.error(f"--store {args.store}: no such file")
    if not (args.out or args.dry_run or args.child):
        ap.error("--out DIR is required (or --dry-run)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(args)
    from shadertune.backends.cuda import CUDABackend, device
    be = CUDABackend()
    ncu = find_ncu(args.ncu) or (args.ncu or "ncu")
    out = pathlib.Path(args.out) if args.out else pathlib.Path("profile-cuda-out")
    report = str(out / "profile")
    if args.dry_run:
        if args.store is not None and not device.has_gpu():
            print("profile-cuda: --store needs the GPU (the store's rows are keyed by device); "
                  "showing the default config", file=sys.stderr)
            args.store = None
        cfg, how = pick_config(be, args.problem, args.store, args.config)
        print(f"# config: {prof.describe(cfg)} ({how})")
        print(prof.shell(prof.query_command(ncu)))
        print(prof.shell(prof.profile_command(ncu, report, child_argv(args.problem_text, cfg.to_dict(), args.dtype))))
        print(prof.shell(prof.import_command(ncu, report)))
        return 0
    if not device.has_gpu():
        print("profile-cuda: needs an NVIDIA GPU and CuPy; none is visible (try --dry-run)", file=sys.stderr)
        return 2
    if find_ncu(args.ncu) is None:
        print(f"profile-cuda: ncu not found ({args.ncu or 'PATH, /usr/local/cuda/bin/ncu'}); "
              "install Nsight Compute or pass --ncu", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    log = lambda msg: print(f"[{time.perf_counter() - t0:5.1f}s] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    p = args.problem
    cfg, how = pick_config(be, p, args.store, args.config)
    log(f"{p.key}: {prof.describe(cfg)} ({how})")
    if not prof.is_3xtf32(cfg):
        log("note: this config is not a 3xTF32 kernel")
    be.precompile(p, [cfg])                      # into the kernel cache: the child only loads it
    from shadertune.backends.cuda.baseline import operands
    k = be.build(p, cfg)
    k.prepare(*operands(p))
    times = k.time(repeats=10, warmup=3, mode="held")
    k.release()
    ms = statistics.median(times)
    log(f"timed: {ms:.4f} ms median of 10 ({p.flops / ms / 1e9:.1f} TFLOP/s), compiled and cached")

    q = subprocess.run(prof.query_command(ncu), capture_output=True, text=True, timeout=60)
    metrics, dropped = (prof.available(prof.METRICS, q.stdout) if q.returncode == 0
                        else (list(prof.METRICS), []))
    if q.returncode != 0:
        log(f"ncu --query-metrics failed (rc {q.returncode}); asking for every metric by name")
    elif dropped:
        log(f"left out (not on this GPU / ncu): {', '.join(dropped)}")
    cmd = prof.profile_command(ncu, report, child_argv(args.problem_text, cfg.to_dict(), args.dtype), metrics=metrics)
    log("$ " + prof.shell(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    (out / "ncu.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        print(r.stdout[-3000:] + r.stderr[-3000:], file=sys.stderr)
        print(f"profile-cuda: ncu failed (rc {r.returncode}); see {out / 'ncu.log'}", file=sys.stderr)
        return 1
    log("profiled one launch")
    imp = subprocess.run(prof.import_command(ncu, report), capture_output=True, text=True, timeout=120)
    (out / "profile.csv").write_text(imp.stdout)
    if imp.returncode != 0:
        print(imp.stderr[-3000:], file=sys.stderr)
        return 1
    launches = prof.parse_raw_csv(imp.stdout)
    if len(launches) != 1:
        print(f"profile-cuda: expected one profiled launch, the report has {len(launches)}", file=sys.stderr)
    launch = launches[0]
    head = [f"# {p.key}: {prof.describe(cfg)}", "",
            f"Config ({how}): `{json.dumps(cfg.to_dict(), sort_keys=True)}`", "",
            f"Timed outside ncu: {ms:.4f} ms ({p.flops / ms / 1e9:.1f} TFLOP/s, median of 10 held launches). "
            f"Under ncu (`--clock-control none`, one launch, kernel `{launch.get('Kernel Name')}`, grid "
            f"{launch.get('Grid Size')}, block {launch.get('Block Size')}):"]
    if dropped:
        head += ["", "Not collected (this ncu or GPU lacks them): " + ", ".join(f"`{m}`" for m in dropped)]
    md = prof.summary_markdown(launch, head, flops=p.flops)
    (out / "profile.md").write_text(md)
    (out / "profile.json").write_text(json.dumps(
        {"problem": p.key, "config": cfg.to_dict(), "how": how, "timed_ms": times, "ncu": cmd,
         "dropped_metrics": dropped, "launch": launch}, indent=1))
    print(md)
    log(f"wrote {out}/profile.md, profile.csv, profile.json, profile.ncu-rep")
    return 0


if __name__ == "__main__":
    sys.exit(main())
