#!/usr/bin/env python3
"""Probe the GL compute family on a device (a measurement script, not a test).

    scripts/probe-gl-compute OUT_DIR [--sweep 60] [--size 4096 | --shape MxNxK] [--cublas]
                                     [--binary] [--sass N] [--base JSON] [--moves JSON|FILE]

1. the device's compute limits (compute units, shared memory, subgroups);
2. a correctness sweep: --sweep seeded random configs of the compute family on
   ragged, transposed, batched and split-K shapes, each built and run through the
   backend and checked against float64 (relative Frobenius error <= 1e-5);
3. at --size (or --shape): hand-picked configs (one knob moved at a time from the default; with
   --moves, the moves given: a JSON list of knob overrides, null for the base, on
   the default or on --base, itself overrides of the default),
   each verified on sampled rows and timed (GL timer queries, median of 10 after
   2 warm-ups), and with --cublas torch's SGEMM (TF32 off; CUDA events, median
   of 10) in the same run, for the ratio;
4. with --binary, the driver's program binary of the default config (NVIDIA's
   holds the generated assembly as text) written to OUT_DIR;
5. with --sass N, the driver's machine code of the first N timed configs
   (gl_probes.py: NVIDIA's disk cache, nvdisasm) in OUT_DIR/sass.txt.
Writes OUT_DIR/probe-gl-compute.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import gl_probes  # noqa: E402
from shadertune.core.atomic import write_bytes, write_text  # noqa: E402
from shadertune.backends.gl import GLBackend  # noqa: E402
from shadertune.backends.gl.space import compute_default_config  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

SWEEP_SHAPES = [(64, 64, 64, False, False, 1), (37, 53, 29, False, False, 1), (200, 136, 100, True, False, 1),
                (96, 130, 77, False, True, 1), (33, 20, 48, True, True, 1), (64, 48, 100, False, False, 3),
                (17, 8, 3000, True, True, 2), (300, 260, 1030, False, False, 1), (128, 128, 5000, False, False, 1)]
# one knob moved at a time from the default (None: the default itself)
MOVES = [None, dict(db=0), dict(a_t=1, vec=2, db=0), dict(bm=64, bn=64, tm=4, tn=4, db=0), dict(a_t=1, vec=2),
         dict(bm=64, db=0), dict(a_t=1, vec=1, db=0), dict(a_t=1, bk=32, db=0), dict(bk=32, db=0), dict(tm=4),
         dict(lanes_n=16, db=0), dict(pad=0, db=0), dict(a_src="texture", db=0), dict(b_src="texture", db=0),
         dict(bk=8, db=0), dict(tn=16, db=0),
         # issue 39's knobs, one at a time from the default
         dict(db=2), dict(skew=1, pad=0), dict(clamp=1), dict(swz=8), dict(shuffle=1)]


def rel_err(C, ref) -> float:
    return float(np.linalg.norm(C - ref) / np.linalg.norm(ref))


def sweep(be: GLBackend, n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    per = max(1, n // len(SWEEP_SHAPES))
    for M, N, K, ta, tb, batch in SWEEP_SHAPES:
        p = Problem(M, N, K, trans_a=ta, trans_b=tb, batch=batch)
        space = be.space(p)
        cands = [c for c in space.configs() if c["family"] == "compute"]
        for cfg in rng.sample(cands, min(per, len(cands))):
            a_shape, b_shape = p.stored_shapes
            g = np.random.default_rng(rng.randrange(1 << 30))
            A = g.uniform(-1, 1, a_shape).astype(np.float32)
            B = g.uniform(-1, 1, b_shape).astype(np.float32)
            C0 = g.uniform(-1, 1, p.out_shape).astype(np.float32)
            alpha, beta = rng.choice([(1.0, 0.0), (2.0, 0.5), (-1.0, 1.0)])
            a64 = A.astype(np.float64)
            b64 = B.astype(np.float64)
            ref = alpha * np.matmul(np.swapaxes(a64, -1, -2) if ta else a64,
                                    np.swapaxes(b64, -1, -2) if tb else b64) + beta * C0
            row = {"shape": p.key, "config": cfg.to_dict(), "alpha": alpha, "beta": beta}
            try:
                with be.build(p, cfg) as k:
                    C = k.run(A, B, C0 if beta else None, alpha=alpha, beta=beta)
                row["error"] = rel_err(C, ref)
                row["ok"] = bool(np.isfinite(row["error"]) and row["error"] <= 1e-5)
            except Exception as e:  # a probe reports every failure and goes on
                row["ok"], row["failure"] = False, f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            if not row["ok"]:
                print("  FAILED", p.key, cfg.to_dict(), row.get("error"), row.get("failure"), flush=True)
    return rows


def time_config(be, p, cfg, A, B, idx, ref_rows) -> dict:
    row = {"config": {k: cfg[k] for k in ("bm", "bn", "bk", "tm", "tn", "lanes_n", "vec", "pad", "a_t",
                                          "db", "unroll", "a_src", "b_src", "ks", "np", "skew", "clamp",
                                          "swz", "shuffle", "kred")}}
    try:
        t0 = time.perf_counter()
        with be.build(p, cfg) as k:
            row["compile_ms"] = (time.perf_counter() - t0) * 1e3
            C = k.run(A, B)
            row["error"] = rel_err(C[idx], ref_rows)
            times = k.time(repeats=10, warmup=2)
        row["ms"] = statistics.median(times)
        row["tflops"] = 2 * p.M * p.N * p.K / row["ms"] / 1e9
    except Exception as e:
        row["failure"] = f"{type(e).__name__}: {str(e)[:300]}"
    return row


def resident_warps(be, p, cfg, A, B) -> int | None:
    return gl_probes.resident_warps(be, p, cfg, A, B)


def driver_sass(p, configs, out_dir, cache_dir) -> list[dict]:
    """The machine code NVIDIA's driver made for each config (gl_probes.py), disassembled
    into out_dir/sass.txt, with its highest register and its instruction mix."""
    rows, text = gl_probes.sass_of_configs(p, configs, cache_dir)
    for i, row in enumerate(rows):
        print("  sass", i, row["programs"], flush=True)
    write_text(os.path.join(out_dir, "sass.txt"), text)
    return rows


def program_binary(kernel, path: str) -> int:
    import ctypes
    from shadertune.backends.gl.platform import glraw
    gpa = glraw._get_proc_address()
    getiv = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_int))(
        gpa(b"glGetProgramiv"))
    getbin = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                              ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p)(gpa(b"glGetProgramBinary"))
    n = ctypes.c_int(0)
    getiv(kernel.program.glo, 0x8741, ctypes.byref(n))          # GL_PROGRAM_BINARY_LENGTH
    buf = ctypes.create_string_buffer(max(n.value, 1))
    fmt, got = ctypes.c_uint(0), ctypes.c_int(0)
    getbin(kernel.program.glo, n.value, ctypes.byref(got), ctypes.byref(fmt), buf)
    write_bytes(path, buf.raw[:got.value])
    return got.value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--sweep", type=int, default=60, help="random configs to verify (0: none)")
    ap.add_argument("--size", type=int, default=4096, help="square size of the timed configs (0: none)")
    ap.add_argument("--shape", default=None, metavar="MxNxK", help="the timed configs' shape (instead of --size)")
    ap.add_argument("--cublas", action="store_true", help="time torch's SGEMM (TF32 off) at --size too")
    ap.add_argument("--binary", action="store_true", help="save the default config's program binary")
    ap.add_argument("--sass", type=int, default=0, metavar="N",
                    help="disassemble the driver's machine code of the first N timed configs")
    ap.add_argument("--base", default=None, help="JSON knob overrides of the default: the moves' base")
    ap.add_argument("--moves", default=None,
                    help="a JSON list (or a file holding one) of knob overrides of the base, null for the base")
    args = ap.parse_args(argv)
    moves = MOVES
    if args.moves:
        text = open(args.moves).read() if os.path.exists(args.moves) else args.moves
        moves = json.loads(text)
        if not isinstance(moves, list) or not all(m is None or isinstance(m, dict) for m in moves):
            ap.error("--moves: a JSON list of objects (knob overrides) or nulls")
    base_moves = json.loads(args.base) if args.base else {}
    if not isinstance(base_moves, dict):
        ap.error("--base: a JSON object of knob overrides")
    os.makedirs(args.out, exist_ok=True)
    # the --sass children write the driver's disk cache here (gl_probes.sass_of_configs)
    cache_dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "shadertune-glcache")
    be = GLBackend()
    dev = be.device()
    report = {"device": dev.to_dict()}
    print(f"GL device: {dev.renderer} | {dev.driver}", flush=True)
    print({k: v for k, v in dev.limits.items() if "comput" in k or "subgroup" in k or "texture_buffer" in k})
    if args.sweep:
        t0 = time.time()
        rows = sweep(be, args.sweep)
        report["sweep"] = rows
        print(f"sweep: {sum(r['ok'] for r in rows)} of {len(rows)} correct, {time.time() - t0:.1f} s", flush=True)
    shape = (args.size,) * 3 if args.size else None
    if args.shape:
        try:
            shape = tuple(int(t) for t in args.shape.lower().split("x"))
            assert len(shape) == 3 and min(shape) > 0
        except (ValueError, AssertionError):
            ap.error(f"--shape: MxNxK with positive integers, got {args.shape!r}")
    if shape:
        m, n, kk = shape
        p = Problem(m, n, kk)
        g = np.random.default_rng(0)
        A = g.uniform(-1, 1, (m, kk)).astype(np.float32)
        B = g.uniform(-1, 1, (kk, n)).astype(np.float32)
        idx = np.linspace(0, m - 1, min(m, 64)).astype(int)
        ref_rows = A[idx].astype(np.float64) @ B.astype(np.float64)
        space = be.space(p)
        default = compute_default_config(p, space)      # the compute family's, on any renderer
        report["default"] = default.to_dict()
        default = default.replace(**base_moves)
        report["base"] = default.to_dict()
        rows = []
        for move in moves:
            cfg = default if move is None else default.replace(**move)
            why = space.why_invalid(cfg)
            if why:
                rows.append({"move": move, "invalid": why})
                continue
            row = time_config(be, p, cfg, A, B, idx, ref_rows)
            row["move"] = move
            if "failure" not in row:
                row["warps_per_sm"] = resident_warps(be, p, cfg, A, B)
            rows.append(row)
            print(f"  {str(move or 'base'):40s} {row.get('tflops', 0):7.2f} TFLOP/s "
                  f"{row.get('ms', 0) * 1e3:8.1f} us "
                  f"err {row.get('error', float('nan')):.1e} compile {row.get('compile_ms', 0):.0f} ms "
                  f"warps/SM {row.get('warps_per_sm')} {row.get('failure', '')}", flush=True)
        report["configs"] = rows
        if args.sass:
            cfgs = [default if m is None else default.replace(**m) for m in moves[:args.sass]]
            report["sass"] = driver_sass(p, [c for c in cfgs if c in space], args.out, cache_dir)
        if args.cublas:
            ms = gl_probes.cublas_ms(Problem(m, n, kk))
            report["cublas_ms"] = ms
            if ms:
                print(f"  cuBLAS SGEMM (TF32 off): {2 * m * n * kk / ms / 1e9:.2f} TFLOP/s, "
                      f"{ms * 1e3:.1f} us", flush=True)
        if args.binary:
            with be.build(p, default) as k:
                report["binary_bytes"] = program_binary(k, os.path.join(args.out, "default.bin"))
    write_text(os.path.join(args.out, "probe-gl-compute.json"), json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
