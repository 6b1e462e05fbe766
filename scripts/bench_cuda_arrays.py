#!/usr/bin/env python3
"""Issue 16's targets in one run on a CUDA GPU (TF32 off everywhere):

    python scripts/bench-cuda-arrays --out DIR [--only SECTIONS] [--dmma-probe]

Batches (256 x 128^3, 64 x 512^3) and DGEMM (2048-8192, DMMA and FFMA) are tuned
by the search core like every other problem: scripts/bench-cuda --only
batched,DGEMM (their targets: >= 1.0x cupy.matmul's strided-batched cuBLAS,
>= 0.9x cuBLAS DGEMM).

Sections (all by default):
  overhead  host microseconds per call, cached 256^3 float32 on device arrays:
            shadertune.matmul (CuPy and PyTorch operands, config="default",
            and "auto" on the default store)
            vs cupy.matmul and torch.matmul (launches queued behind a spin
            kernel so the host's cost alone is measured; target: ours <= 1.5x
            cupy.matmul), the pieces (check_call, prepare, enqueue through
            launchKernel with prebuilt parameters and through the RawKernel
            call, CuPy's raw launch and allocation) and a cProfile of 2000
            calls (top 15 by own time) for config="default" and "auto"
  arrays    4096^3 float32 on CuPy arrays: shadertune.matmul end to end (events
            around the whole call, new output each time) vs the same kernel's
            own held time (target: within 5%)
--dmma-probe: n^3 float64 (--probe-sizes, default 4096), fixed DMMA tiles with
            each mma shape (m16n8k4, k8, k16) and main loop (FP 0/1) forced,
            against cuBLAS DGEMM in the same run, to set the rules of dmma.py;
            then the FP = 1 kernels against float64 on ragged shapes.

The probe's kernels count only if their output (C poisoned with NaN first) is
within 1e-13 of cuBLAS DGEMM's. Times are medians of CUDA events behind a spin kernel (hold.py) unless said.
Writes DIR/bench-cuda-arrays.json and .md; prints a summary.
"""
import argparse
import contextlib
import json
import math
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import shadertune  # noqa: E402
import shadertune.front.matmul  # noqa: E402  (shadertune.front.matmul.backend / .kernel)
from shadertune.backends.cuda import codegen, dmma  # noqa: E402
from shadertune.backends.cuda.baseline import plain_fp32  # noqa: E402
from shadertune.backends.cuda.hold import hold  # noqa: E402
from shadertune.backends.cuda.timing import event_times  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.errors import ShadertuneError  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

RETIME = 3


def repeats_for(ms: float) -> int:
    return max(10, min(200, math.ceil(100.0 / max(ms, 1e-3))))   # ~100 ms of timed work


def rel_err(cp, out, ref) -> float:
    if not bool(cp.isfinite(out).all()):
        return float("inf")
    return float(cp.linalg.norm(out.astype(cp.float64) - ref) / cp.linalg.norm(ref))


def host_us(fn, n: int = 300, rounds: int = 5) -> float:
    """Median host microseconds per call of fn() with the GPU held busy
    (the queue never drains, so no call waits for the device)."""
    import cupy
    fn()
    cupy.cuda.get_current_stream().synchronize()
    per = []
    for _ in range(rounds):
        hold(n * 100.0)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n * 1e6)
        cupy.cuda.get_current_stream().synchronize()
    return statistics.median(per)


def profile_calls(fn, n: int, top: int = 15) -> list[str]:
    """cProfile of n calls of fn() with the GPU held busy: the top functions by own
    time, one line each (calls, own us per call, cumulative us per call, function)."""
    import cProfile
    import pstats
    import cupy
    fn()
    cupy.cuda.get_current_stream().synchronize()
    pr = cProfile.Profile()
    chunk = 250        # launches queued behind one spin: well under the device's queue depth
    for _ in range(0, n, chunk):
        hold(chunk * 300.0)
        pr.enable()
        for _ in range(chunk):
            fn()
        pr.disable()
        cupy.cuda.get_current_stream().synchronize()
    st = pstats.Stats(pr)
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]
    lines = []
    for (path, line, func), (cc, nc, tt, ct, _) in rows:
        where = f"{pathlib.Path(path).name}:{line}({func})" if line else func
        lines.append(f"{nc:7d} calls {tt / n * 1e6:7.2f} us/call own {ct / n * 1e6:7.2f} cum  {where}")
    return lines


def torch_mod():
    try:
        import torch
        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            return torch
    except Exception:
        pass
    return None


def section_overhead(be, cp, n, log):
    import cupy
    rng = cupy.random.RandomState(1)
    dA, dB = rng.uniform(-1, 1, (n, n)).astype("float32"), rng.uniform(-1, 1, (n, n)).astype("float32")
    out = cupy.empty((n, n), "float32")
    r = {"problem": f"{n}x{n}x{n}:float32", "us_per_call": {}}
    us = r["us_per_call"]
    us["shadertune_cupy"] = host_us(lambda: shadertune.matmul(dA, dB, backend="cuda", config="default"))
    us["shadertune_cupy_out"] = host_us(lambda: shadertune.matmul(dA, dB, backend="cuda", config="default", out=out))
    us["shadertune_cupy_auto"] = host_us(lambda: shadertune.matmul(dA, dB, backend="cuda", config="auto"))
    us["cupy_matmul"] = host_us(lambda: cp.matmul(dA, dB))
    us["cupy_matmul_out"] = host_us(lambda: cp.matmul(dA, dB, out=out))
    torch = torch_mod()
    if torch is not None:
        tA, tB = torch.as_tensor(dA, device="cuda"), torch.as_tensor(dB, device="cuda")
        s = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        with s:   # hold torch's stream (the legacy default stream, as CuPy's)
            us["shadertune_torch"] = host_us(lambda: shadertune.matmul(tA, tB, backend="cuda", config="default"))
            us["torch_matmul"] = host_us(lambda: torch.matmul(tA, tB))
    # where our time goes: the front door's checks, the CUDA plan, one raw launch of the cached kernel
    from shadertune.backends.cuda import call
    from shadertune.call.inputs import check_call
    import timeit
    us["check_only"] = timeit.timeit(lambda: check_call(dA, dB, dtypes=be.dtypes), number=2000) / 2000 * 1e6
    checked = check_call(dA, dB, dtypes=be.dtypes)
    us["plan_only"] = timeit.timeit(lambda: call.prepare(checked), number=2000) / 2000 * 1e6
    c = call.prepare(checked)
    k = shadertune.front.matmul.kernel(be, c.problem, be.default_config(c.problem))
    r["launch_path"] = "launchKernel (prebuilt parameters)" if k._launch_main.fast else "RawKernel call"
    us["launch_only"] = host_us(lambda: k.enqueue(dA.data.ptr, dB.data.ptr, out.data.ptr, 0, 0, 1, 1.0, 0.0))
    # the same enqueue with its launches through the RawKernel call (CuPy converts every
    # argument per launch): the path before the prebuilt parameter arrays (launch.py)
    kr = be.build(c.problem, be.default_config(c.problem))
    for lk in (kr._launch_main, kr._launch_reduce):
        if lk is not None:
            lk.use_rawkernel()
    us["launch_rawkernel"] = host_us(lambda: kr.enqueue(dA.data.ptr, dB.data.ptr, out.data.ptr, 0, 0, 1, 1.0, 0.0))
    kr.release()
    # CuPy's own share of the launch: the RawKernel call with its arguments built already
    # (what enqueue adds: the argument tuple, the scalars' lookup)
    # (only for a one-launch config: a split-K one (K_G > 1) needs its workspace, which the
    # raw call does not allocate: with address 0 it faults, as it did on 2026-11-23)
    d = k.d
    if k._kg == 1 and c.problem.batch == 1:
        args = ((dA.data.ptr, dB.data.ptr, out.data.ptr, out.data.ptr, 0) + tuple(np.int32(x) for x in k._dims)
                + (k._T(1.0), k._T(0.0)))
        us["launch_raw"] = host_us(lambda: k._main(k._grid1, k._block, args, shared_mem=d.smem_bytes,
                                                   stream=None))
    log(f"overhead  default config of {c.problem.key}: K_G {k._kg} KR {k.config['KR']}, "
        f"launches through {r['launch_path']}")
    us["empty_only"] = host_us(lambda: cupy.empty((n, n), "float32"))
    from shadertune.call.device_arrays import describe_device
    us["describe_only"] = timeit.timeit(lambda: describe_device(dA), number=2000) / 2000 * 1e6
    r["ratio_vs_cupy"] = us["shadertune_cupy"] / us["cupy_matmul"]
    r["ratio_out_vs_cupy_out"] = us["shadertune_cupy_out"] / us["cupy_matmul_out"]
    r["ratio_auto_vs_cupy"] = us["shadertune_cupy_auto"] / us["cupy_matmul"]
    # where the remaining microseconds go: cProfile of 2000 calls, the GPU held busy
    # (the profiler adds its own cost per function call: read the shares, not the sum)
    for name, fn in [("default", lambda: shadertune.matmul(dA, dB, backend="cuda", config="default")),
                     ("auto", lambda: shadertune.matmul(dA, dB, backend="cuda", config="auto"))]:
        r[f"profile_{name}"] = profile_calls(fn, 2000)
        log(f"cProfile of 2000 calls, config={name!r} (top 15 by own time):")
        for line in r[f"profile_{name}"]:
            log("  " + line)
    if "torch_matmul" in us:
        r["ratio_torch_vs_torch"] = us["shadertune_torch"] / us["torch_matmul"]
    log("overhead  " + "  ".join(f"{k} {v:.1f}" for k, v in us.items()) + f" us; ours/cupy x{r['ratio_vs_cupy']:.2f}")
    return r


def section_arrays(be, cp, n, log):
    import cupy
    p = Problem(n, n, n)
    rng = cupy.random.RandomState(2)
    dA, dB = rng.uniform(-1, 1, (n, n)).astype("float32"), rng.uniform(-1, 1, (n, n)).astype("float32")
    cfg = be.default_config(p)
    k = shadertune.front.matmul.kernel(be, p, cfg)
    r0 = shadertune.matmul(dA, dB, backend="cuda", config="default")
    ref = dA.astype(cp.float64) @ dB.astype(cp.float64)
    err = rel_err(cp, r0, ref)
    del ref
    k.prepare(dA, dB)
    own = statistics.median(k.time(repeats=20, warmup=3, mode="held"))
    e2e = statistics.median(event_times(lambda: shadertune.matmul(dA, dB, backend="cuda", config="default"), 20, warmup=3))
    r = {"problem": p.key, "config": cfg.to_dict(), "kernel_ms": own, "end_to_end_ms": e2e,
         "ratio": e2e / own, "error": err, "tflops_end_to_end": p.flops / e2e / 1e9}
    log(f"arrays    {p.key}: end to end {e2e:.4f} ms, kernel {own:.4f} ms, x{e2e / own:.3f} (err {err:.1e})")
    return r


def _cfg(c) -> str:
    kind = {0: "FFMA", 1: "DMMA", 3: "3xTF32 mma", 4: "3xTF32 wgmma"}[c.get("MMA", 0)]
    return (f"{kind} {c['BM']}x{c['BN']}x{c['BK']} w{c['WM']}x{c['WN']} t{c['TM']}x{c['TN']} v{c['VEC']} "
            f"st{c.get('ST', 0)} KG{c['KG']} KL{c['KL']} KR{c.get('KR', 0)}")


# The probe's kernel variants: (mma k, fragment pipeline FP). FP = 1 where
# the tile does not allow it (dmma.pipelined) would render the plain loop
# again: skipped.
PROBE_VARIANTS = [(16, 0), (8, 0), (4, 0), (16, 1), (8, 1), (4, 1)]


def probe_variants(text: str | None) -> list:
    """--probe-variants 'k:fp,...' as (k, fp) pairs (None: PROBE_VARIANTS)."""
    if text is None:
        return PROBE_VARIANTS
    out = []
    for item in text.split(","):
        k, _, fp = item.partition(":")
        if not (k.strip() in ("4", "8", "16") and fp.strip() in ("0", "1")):
            raise SystemExit(f"bench-cuda-arrays: --probe-variants: {item!r} is not k:fp with k 4, 8 or 16 and fp 0 or 1")
        out.append((int(k), int(fp)))
    return out


@contextlib.contextmanager
def forced(mk: int, fp: int):
    """dmma's rules giving mma shape mk and the main loop FP = fp (where the
    tile allows it: dmma.pipelined) inside the block."""
    saved = dmma.MMA_KS, dmma.FRAG_PIPE
    dmma.MMA_KS, dmma.FRAG_PIPE = (mk,), bool(fp)
    try:
        yield
    finally:
        dmma.MMA_KS, dmma.FRAG_PIPE = saved


def section_dmma_probe(be, cp, sizes, log, variants=PROBE_VARIANTS):
    """Fixed DMMA tiles at n^3 (float64, each n of sizes) with each variant of
    mma shape and main loop forced, against cuBLAS DGEMM in the same run; then
    the FP = 1 kernels on ragged shapes of every layout, split-K and scalar
    copies against float64."""
    import cupy
    from shadertune.backends.cuda.driver import CUDAKernel
    from shadertune.backends.cuda.compiler import compile_many
    base = Config(BM=128, BN=128, BK=16, TM=2, TN=2, WM=64, WN=32, trans=1, VEC=2, PAD=2, DB=1, ST=3,
                  KG=1, KL=1, KR=0, MMA=1)
    # (BN=64: cuBLAS's sm90 DGEMM tile, 128x64x16, 3 stages, 2 x 2 warps of 64 x 32, m16n8k8)
    tiles = [dict(BN=64), dict(BN=64, ST=4), dict(BN=64, BK=32), dict(BM=64, BN=128, WM=32, WN=64),
             dict(), dict(BK=32), dict(BN=64, WM=32, WN=32), dict(BM=64, BN=64, WM=32, WN=32),
             dict(BM=64, BN=64, WM=32, WN=32, ST=4),
             # cuBLAS's sm90 DGEMM below 3000^3 (ncu at 1536^3): 32 x 64 x 32 blocks, 3 stages,
             # 2 x 2 warps of 16 x 32, m16n8k16
             dict(BM=32, BN=64, BK=32, WM=16, WN=32), dict(BM=32, BN=64, BK=32, WM=16, WN=32, ST=4),
             dict(BM=32, BN=64, WM=16, WN=32), dict(BM=64, BN=64, BK=32, WM=32, WN=32),
             # tiles of 48 and 96 (not powers of two): whole waves of blocks at 1536^3 and 1500^3
             dict(BM=64, BN=96, WM=32, WN=48), dict(BM=64, BN=96, WM=32, WN=48, ST=4),
             dict(BM=96, BN=64, WM=48, WN=32), dict(BM=96, BN=96, WM=48, WN=48),
             dict(BM=96, BN=96, WM=32, WN=48), dict(BM=96, BN=96, BK=32, WM=32, WN=48)]
    rows = []
    for n in sizes:
        p = Problem(n, n, n, "float64")
        rng = cupy.random.RandomState(5)
        A, B = rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, (n, n))
        ref = cp.matmul(A, B)
        blas = statistics.median(event_times(lambda: cp.matmul(A, B), 20, warmup=3))
        log(f"probe     {n}^3 cuBLAS DGEMM {p.flops / blas / 1e9:.1f} TFLOP/s ({blas:.4f} ms)")
        jobs = []
        for t in tiles:
            for mk, fp in variants:
                cfg = base.replace(**t)
                with forced(mk, fp):
                    if fp and not dmma.pipelined(cfg["BK"], mk, cfg["WM"], cfg["WN"]):
                        continue
                    jobs.append((cfg, mk, fp, codegen.source(p, cfg)))
        compile_many([src for *_, src in jobs], be.arch())
        for cfg, mk, fp, src in jobs:
            rec = {"n": n, "config": cfg.to_dict(), "mma_k": mk, "fp": fp, "cublas_ms": blas}
            try:
                k = CUDAKernel(p, cfg, src, be.arch(), be.limits())
                out = k.prepare(A, B)
                k.launch()
                k._sync()
                rec["error"] = rel_err(cp, out, ref)
                rec["regs"], rec["local_bytes"] = k.regs, k.local_bytes
                rec["median_ms"] = statistics.median(k.time(repeats=10, warmup=2))
                rec["tflops"] = p.flops / rec["median_ms"] / 1e9
                rec["x_cublas"] = blas / rec["median_ms"]
                k.release()
            except ShadertuneError as e:
                rec["status"] = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(rec)
            log(f"probe     {n} k{mk:2d} fp{fp} {_cfg(rec['config'])}: " + (
                f"{rec['tflops']:.1f} TFLOP/s x{rec['x_cublas']:.3f}, {rec['regs']} regs, local {rec['local_bytes']}, "
                f"err {rec['error']:.1e}" if "tflops" in rec else rec.get("status", "?")))
    rows.append({"fp_accuracy": _fp_accuracy(be, base, log)})
    return rows


def _fp_accuracy(be, base, log):
    """FP = 1 DMMA kernels against float64 on shapes no tile divides, every
    layout, K ragged (the residue-first stage), scalar copies, ST 2-4, split-K
    with both reductions, alpha and beta."""
    rng = np.random.default_rng(16)
    cases = []
    for ta in (False, True):
        for tb in (False, True):
            p = Problem(262, 198, 346, "float64", ta, tb)
            odd = Problem(131, 99, 173, "float64", ta, tb)
            cases += [(p, base.replace(BN=64), 8), (p, base.replace(BK=32, ST=2), 4),
                      (p, base.replace(BM=64, BN=64, WM=32, WN=32, ST=4), 4),
                      (odd, base.replace(BM=64, BN=64, WM=32, WN=32, VEC=1), 8),
                      (Problem(37, 45, 3001, "float64", ta, tb),
                       base.replace(BM=64, BN=64, WM=32, WN=32, VEC=1, KG=16, KR=int(ta)), 8),
                      # tiles of 48 and 96 (dmma.THIRD_TILES) on the same ragged shapes
                      (p, base.replace(BM=96, BN=64, WM=48, WN=32), 8),
                      (p, base.replace(BM=96, BN=96, BK=32, WM=32, WN=48), 8),
                      (odd, base.replace(BM=48, BN=64, WM=48, WN=16, VEC=1, ST=4), 8),
                      (Problem(37, 45, 3001, "float64", ta, tb),
                       base.replace(BM=48, BN=64, WM=48, WN=16, VEC=1, KG=16, KR=int(tb)), 4)]
    out = []
    for q, cfg, mk in cases:
        with forced(mk, 1):
            rec = {"problem": q.key, "config": cfg.to_dict(), "mma_k": mk}
            try:
                k = be.build(q, cfg)
                assert "cp_async_if" in codegen.source(q, cfg), "not the FP kernel"
                A = rng.uniform(-1, 1, q.stored_shapes[0])
                B = rng.uniform(-1, 1, q.stored_shapes[1])
                C0 = rng.uniform(-1, 1, (q.M, q.N))
                got = k.run(A, B, C0, alpha=1.5, beta=-0.5)
                ref = 1.5 * ((A.T if q.trans_a else A) @ (B.T if q.trans_b else B)) - 0.5 * C0
                rec["error"] = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
                k.release()
            except Exception as e:   # a failure is a result here
                rec["status"] = f"{type(e).__name__}: {str(e)[:300]}"
        out.append(rec)
        log(f"fp-acc    {q.key} k{mk} {_cfg(cfg.to_dict())}: " + (
            f"err {rec['error']:.1e}" if "error" in rec else rec["status"]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="overhead,arrays")
    ap.add_argument("--overhead-size", type=int, default=256)
    ap.add_argument("--arrays-size", type=int, default=4096)
    ap.add_argument("--dmma-probe", action="store_true")
    ap.add_argument("--probe-sizes", default="4096", help="comma-separated n of the n^3 probe problems")
    ap.add_argument("--probe-variants", default=None,
                    help="the probe's mma shapes and loops as k:fp pairs, e.g. 8:1,4:1 (default: all six)")
    args = ap.parse_args(argv)
    outdir = pathlib.Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    cp = plain_fp32()
    be = shadertune.front.matmul.backend("cuda")      # the backend (and kernel cache) matmul(backend="cuda") uses
    info = be.device().to_dict()
    log(f"device: {info['renderer']} | {info['driver']}")
    res = {"device": info, "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M")}
    only = set(args.only.split(",")) if args.only else set()
    t0 = time.time()
    for name, fn in [("overhead", lambda: section_overhead(be, cp, args.overhead_size, log)),
                     ("arrays", lambda: section_arrays(be, cp, args.arrays_size, log))]:
        if name in only:
            try:
                res[name] = fn()
            except Exception as e:   # one section failing must not lose the others
                import traceback
                log(f"{name}: FAILED {type(e).__name__}: {e}")
                res[name] = {"failed": traceback.format_exc()}
            log(f"  ({name} done at {time.time() - t0:.0f} s)")
            (outdir / "bench-cuda-arrays.json").write_text(json.dumps(res, indent=1, default=str))
    if args.dmma_probe:
        res["dmma_probe"] = section_dmma_probe(be, cp, [int(v) for v in args.probe_sizes.split(",")], log,
                                               variants=probe_variants(args.probe_variants))
    (outdir / "bench-cuda-arrays.json").write_text(json.dumps(res, indent=1, default=str))
    (outdir / "bench-cuda-arrays.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
