"""GL arrays on a GPU: chained products without the bus, the LU client, the numpy path,
and the host's cost per call (a benchmark script, not a test).

    scripts/bench-gl-arrays OUT [--stages chain,lu,e2e,overhead] [--sizes 1024,2048,4096]
        [--lu 2048,4096] [--block 256] [--chain 300] [--config auto] [--db STORE]
        [--timeout S]

Stages (each in a process of its own, stopped after --timeout seconds; a stage that
fails or runs out of time is recorded and the rest still run):
  chain     per --sizes n: Y = A @ X on GL arrays --chain times (X, Y swapped: no
            transfer, no allocation in the loop), wall time per product against the
            kernel's own time (GL timer queries, the same kernel on the same arrays);
            rows of the last product checked against float64
  lu        scripts/lu_gl.py at --lu sizes, --block columns a step: GL arrays against the
            same steps in numpy and scipy.linalg.lu_factor
  e2e       shadertune.matmul on numpy operands (numpy out) at --sizes: the path every
            call took before GL arrays, against its kernel's own time
  overhead  the host's cost of one 8 x 8 call, numpy and GL arrays, config auto, default
            and knobs: Python function calls (cProfile) and microseconds
The config is --config for every product (auto: resolved once per size from the
store, --db).  Writes OUT/bench-gl-arrays.json (every row, the device) and .md.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STAGES = ("chain", "lu", "e2e", "overhead")


def _config(args):
    c = args.config
    return json.loads(c) if c.strip().startswith("{") else c


def _resolved(be, n: int, args):
    """The config matmul runs for n x n x n under --config (auto: the store's choice)."""
    from shadertune.front.requests import resolve
    from shadertune.core.problem import Problem
    return resolve(be, Problem(n, n, n), _config(args), db=args.db)


def _last_kernel(problem):
    """(config, kernel) of the kernel matmul ran last for `problem` (its cache's most
    recently used one): the kernel the calls just timed ran, timed on its own."""
    from shadertune.front import matmul as api
    found = [(key[1], k) for key, k in api.door("gl").kernels._kernels.items() if key[0] == problem]
    return found[-1]


def _finish():
    import shadertune.gl as gl
    gl.home().enter().finish()


def stage_chain(args) -> list[dict]:
    import numpy as np

    import shadertune
    import shadertune.gl as gl
    from shadertune.front import matmul as api
    from shadertune.core.problem import Problem
    be = api.backend("gl")
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(n)
        # singular values up to about 2: a chain of --chain products stays finite
        A = (rng.uniform(-1.0, 1.0, (n, n)) * np.sqrt(3.0 / n)).astype(np.float32)
        cfg = _resolved(be, n, args)
        gA, X, Y = gl.asarray(A), gl.asarray(A), gl.empty((n, n))
        for _ in range(3):                                  # built, warm
            shadertune.matmul(gA, X, out=Y, config=dict(cfg))
        _finish()
        cfg, kernel = _last_kernel(Problem(n, n, n))        # the kernel those calls ran
        own = statistics.median(kernel.time(repeats=10, warmup=2))
        X = gl.asarray(A)
        _finish()
        t0 = time.perf_counter()
        for _ in range(args.chain):
            shadertune.matmul(gA, X, out=Y, config=dict(cfg))
            X, Y = Y, X
        host = time.perf_counter() - t0
        _finish()
        wall = time.perf_counter() - t0
        per = wall / args.chain
        idx = np.linspace(0, n - 1, 4).astype(int)
        v = A[idx].astype(np.float64)                       # rows of A^(chain + 1)
        for _ in range(args.chain):
            v = v @ A
        got = np.stack([X[int(i)].numpy() for i in idx]).astype(np.float64)
        err = float(np.linalg.norm(got - v) / np.linalg.norm(v))
        rows.append({"stage": "chain", "n": n, "products": args.chain, "config": cfg.to_dict(),
                     "kernel_ms": own, "chained_ms_per_product": per * 1e3,
                     "host_us_per_call": host / args.chain * 1e6, "of_kernel_speed": own / (per * 1e3),
                     "tflops_chained": 2 * n ** 3 / per / 1e12, "rows_rel_error": err})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def stage_lu(args) -> list[dict]:
    sys.path.insert(0, HERE)
    import lu_gl
    rows = []
    for n in args.lu:
        row = lu_gl.run(n, args.block, _config(args), args.db, repeats=3)
        row["stage"] = "lu"
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def stage_e2e(args) -> list[dict]:
    import numpy as np

    import shadertune
    from shadertune.front import matmul as api
    from shadertune.core.problem import Problem
    be = api.backend("gl")
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(n)
        A = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        B = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        out = np.empty((n, n), np.float32)
        cfg = _resolved(be, n, args)
        shadertune.matmul(A, B, out=out, config=dict(cfg))
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            shadertune.matmul(A, B, out=out, config=dict(cfg))
            ts.append(time.perf_counter() - t0)
        cfg, kernel = _last_kernel(Problem(n, n, n))
        own = statistics.median(kernel.time(repeats=10, warmup=2))
        rows.append({"stage": "e2e", "n": n, "config": cfg.to_dict(), "numpy_in_out_s": statistics.median(ts),
                     "kernel_ms": own, "of_kernel_speed": own / 1e3 / statistics.median(ts),
                     "landed_main_h100_4096_s": 0.0177 if n == 4096 else None})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def stage_overhead(args) -> list[dict]:
    import numpy as np

    import shadertune
    import shadertune.gl as gl
    A = np.random.default_rng(0).uniform(-1, 1, (8, 8)).astype(np.float32)
    gA, gC = gl.asarray(A), gl.empty((8, 8))
    rows = []
    for label, cfg in (("auto", "auto"), ("default", "default"), ("knobs", {"np": 8}),
                       ("compute knobs", {"family": "compute"})):
        for kind, call in (("numpy", lambda: shadertune.matmul(A, A, config=cfg, db=args.db)),
                           ("gl arrays", lambda: shadertune.matmul(gA, gA, out=gC, config=cfg, db=args.db))):
            for _ in range(3):
                call()
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20):
                call()
            prof.disable()
            _finish()
            t0 = time.perf_counter()
            for _ in range(200):
                call()
            _finish()
            us = (time.perf_counter() - t0) / 200 * 1e6
            rows.append({"stage": "overhead", "config": label, "operands": kind,
                         "python_calls_per_call": pstats.Stats(prof).total_calls // 20, "us_per_call": us})
            print(json.dumps(rows[-1]), flush=True)
    return rows


RUN = {"chain": stage_chain, "lu": stage_lu, "e2e": stage_e2e, "overhead": stage_overhead}


def markdown(doc: dict) -> str:
    rows = doc["rows"]
    out = [f"# GL arrays on {doc.get('device', {}).get('renderer', '?')}", ""]
    chain = [r for r in rows if r.get("stage") == "chain"]
    if chain:
        out += ["| n | products | kernel ms | chained ms / product | of kernel speed | host us / call | "
                "TFLOP/s chained | rows error |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        out += [f"| {r['n']} | {r['products']} | {r['kernel_ms']:.4f} | {r['chained_ms_per_product']:.4f} | "
                f"{r['of_kernel_speed']:.1%} | {r['host_us_per_call']:.0f} | {r['tflops_chained']:.1f} | "
                f"{r['rows_rel_error']:.1e} |" for r in chain]
        out.append("")
    lu = [r for r in rows if r.get("stage") == "lu"]
    if lu:
        sys.path.insert(0, HERE)
        import lu_gl
        out += [lu_gl.markdown(lu), "", f"panel: {lu[0]['panel']}", ""]
    e2e = [r for r in rows if r.get("stage") == "e2e"]
    if e2e:
        out += ["| n | numpy in/out s | kernel ms | of kernel speed | landed main (H100, earlier run) s |",
                "|---:|---:|---:|---:|---:|"]
        out += [f"| {r['n']} | {r['numpy_in_out_s']:.4f} | {r['kernel_ms']:.3f} | {r['of_kernel_speed']:.1%} | "
                f"{r['landed_main_h100_4096_s'] or '-'} |" for r in e2e]
        out.append("")
    ov = [r for r in rows if r.get("stage") == "overhead"]
    if ov:
        out += ["| config | operands | Python calls a call | us a call |", "|---|---|---:|---:|"]
        out += [f"| {r['config']} | {r['operands']} | {r['python_calls_per_call']} | {r['us_per_call']:.0f} |"
                for r in ov]
        out.append("")
    out += [f"- {s['stage']}: {s['status']} ({s['seconds']:.0f} s)" for s in doc.get("stages", [])]
    return "\n".join(out) + "\n"


def parse(argv):
    ap = argparse.ArgumentParser(prog="bench-gl-arrays", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the output folder")
    ap.add_argument("--stages", type=lambda s: s.split(","), default=list(STAGES))
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1024, 2048, 4096])
    ap.add_argument("--lu", type=lambda s: [int(x) for x in s.split(",")], default=[2048, 4096])
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--chain", type=int, default=300, help="products in a chain")
    ap.add_argument("--config", default="auto")
    ap.add_argument("--db", default=None)
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds a stage may run")
    ap.add_argument("--stage", help=argparse.SUPPRESS)          # run one stage here (the child)
    args = ap.parse_args(argv)
    bad = [s for s in args.stages if s not in STAGES]
    if bad:
        ap.error(f"unknown stage(s) {bad}; the stages: {', '.join(STAGES)}")
    if args.chain < 1 or args.block < 1:
        ap.error("--chain and --block must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    from shadertune.core.atomic import write_text
    os.makedirs(args.out, exist_ok=True)
    if args.stage:                                 # a child: one stage, its rows to a file
        rows = RUN[args.stage](args)
        write_text(os.path.join(args.out, f"{args.stage}.rows.json"), json.dumps(rows, default=str))
        return 0
    from shadertune.front import matmul as api
    dev = api.backend("gl").device()
    print(f"GL device: {dev.renderer} | {dev.driver}", flush=True)
    doc = {"device": dev.to_dict(), "argv": argv, "rows": [], "stages": []}
    for name in args.stages:
        t0 = time.monotonic()
        cmd = [sys.executable, os.path.join(HERE, "bench_gl_arrays.py"), *argv, "--stage", name]
        try:
            p = subprocess.run(cmd, timeout=args.timeout, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
            status = "ok" if p.returncode == 0 else f"failed (exit {p.returncode})"
            log = p.stdout
        except subprocess.TimeoutExpired as e:
            status = f"timed out after {args.timeout:.0f} s"
            log = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        print(log, end="", flush=True)
        write_text(os.path.join(args.out, f"{name}.log"), log)
        path = os.path.join(args.out, f"{name}.rows.json")
        if os.path.exists(path):
            with open(path) as f:
                doc["rows"] += json.load(f)
        doc["stages"].append({"stage": name, "status": status, "seconds": time.monotonic() - t0})
        print(f"== {name}: {status} ({time.monotonic() - t0:.0f} s)", flush=True)
        write_text(os.path.join(args.out, "bench-gl-arrays.json"), json.dumps(doc, indent=1, default=str))
        write_text(os.path.join(args.out, "bench-gl-arrays.md"), markdown(doc))
    print(markdown(doc))
    return 0 if all(s["status"] == "ok" for s in doc["stages"]) else 1


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    from project_venv import use_project_venv
    use_project_venv("moderngl", "numpy")     # the project's .venv and checkout (a stage's child too)
    sys.exit(main())
