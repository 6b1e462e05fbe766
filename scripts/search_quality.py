#!/usr/bin/env python3
"""Search quality: the backend's default strategy vs random vs exhaustive on one problem.

Each strategy runs on a fresh store of its own (so its wall time is honest and
nothing is replayed), on the same backend, device and inputs.  Reported per
strategy: configs evaluated and timed, their share of the pruned space, wall
seconds, the best config and best-found / optimum, where the optimum is the
exhaustive best (or, if exhaustive was cut short by its budget, the best any
strategy found, marked "best known").  Best-found / optimum is given twice:
from the strategy's own measurement, and, when exhaustive measured the same
config, from exhaustive's measurement of it (one run, so timing noise between
runs cannot flatter or hurt a strategy).

Also reported, from each strategy's best-so-far curve (shadertune.search.curve):
the configs it had timed when its best first came within 3% of the optimum,
as a share of the pruned space (the issue's criterion: within 3% after timing
at most 5%), and its best after timing 5% of the space.

Random gets as many evaluations as the first strategy used unless
--random-budget says otherwise.  Prints a Markdown table; --json writes the
numbers.  On CUDA, study a subspace exhaustive search can cover with --fix.

    scripts/search-quality --backend gl --size 16
    scripts/search-quality --backend gl --size 1024 --time-limit 3600 --json out/sq1024.json
    scripts/search-quality --backend cuda --size 2048 --fix MMA=4 --fix KG=1 --fix BK=16,32 \
        --json out/sq-cuda2048.json
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("moderngl", "numpy")      # the project's .venv when this python3 lacks them

from shadertune.core.config import Config  # noqa: E402
from shadertune.db import Store  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.perfmodel.guided import tune  # noqa: E402
from shadertune.search import Budget, make_report, write_report  # noqa: E402
from shadertune.backends import load_backend  # noqa: E402
from shadertune.search.curve import best_so_far  # noqa: E402
from shadertune.search.progress import Progress  # noqa: E402
from shadertune.search.restrict import RestrictedBackend, parse_fix  # noqa: E402


def parse(argv=None):
    p = argparse.ArgumentParser(prog="search-quality", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="gl", help="gl, cuda, or module:Class (default gl)")
    p.add_argument("--size", type=int, help="square N x N x N")
    p.add_argument("--m", type=int)
    p.add_argument("--n", type=int)
    p.add_argument("--k", type=int)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--strategies", default="default,random,exhaustive",
                   help="comma-separated, run in this order; 'default' is the backend's default "
                        "strategy (default: default,random,exhaustive)")
    p.add_argument("--phased-budget", type=int, help="max evaluations for phased (default none)")
    p.add_argument("--model-budget", type=int, help="max evaluations for model (default none)")
    p.add_argument("--random-budget", type=int,
                   help="max evaluations for random (default: as many as phased used)")
    p.add_argument("--exhaustive-budget", type=int, help="max evaluations for exhaustive")
    p.add_argument("--time-limit", type=float, help="seconds per strategy (default none)")
    p.add_argument("--repeats", type=int, default=10, help="timed runs per config (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of inputs and random (default 0)")
    p.add_argument("--json", metavar="PATH", help="write the numbers as JSON")
    p.add_argument("--keep-stores", metavar="DIR", help="keep each strategy's store in DIR")
    p.add_argument("--reports", metavar="DIR", help="write each strategy's search report (every "
                   "Result, with its timestamp) as DIR/STRATEGY.json (random: random-seedS.json)")
    p.add_argument("--fix", action="append", metavar="KNOB=V[,V...]",
                   help="study a subspace: limit KNOB to these values (repeatable), e.g. "
                        "--fix glsl=330 --fix fetch=texelFetch")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    if a.size is not None:
        a.problem = Problem(a.size, a.size, a.size, a.dtype)
    elif None not in (a.m, a.n, a.k):
        a.problem = Problem(a.m, a.n, a.k, a.dtype)
    else:
        p.error("give --size N or --m M --n N --k K")
    return a


def main(argv=None) -> int:
    a = parse(argv)
    backend = load_backend(a.backend)
    fixed = parse_fix(a.fix)
    if fixed:
        backend = RestrictedBackend(backend, fixed)
    device = backend.device()
    store_dir = pathlib.Path(a.keep_stores or tempfile.mkdtemp(prefix="search-quality-"))
    store_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict] = {}
    names = [backend.default_strategy if s.strip() == "default" else s.strip()
             for s in a.strategies.split(",") if s.strip()]
    for name in names:
        first = next((r for n, r in runs.items() if n != "random"), {})
        evals = {"phased": a.phased_budget, "model": a.model_budget, "exhaustive": a.exhaustive_budget,
                 "random": a.random_budget if a.random_budget is not None
                 else first.get("evaluated")}[name]
        bar = Progress(name, total=evals, mode="off" if a.quiet else None)
        with Store(store_dir / f"{name}.sqlite") as store:
            t0 = time.monotonic()
            entry = tune(backend, a.problem, strategy=name, budget=Budget(evals, a.time_limit),
                         store=store, retune=True, repeats=a.repeats, seed=a.seed,
                         on_result=bar.update)
            entry["wall_s"] = time.monotonic() - t0
        bar.close()
        runs[name] = entry
        if a.reports:
            stem = f"random-seed{a.seed}" if name == "random" else name
            write_report(pathlib.Path(a.reports) / f"{stem}.json", make_report(backend.name, device, name, [entry]))
    rows = summarise(runs)
    print(markdown(a.problem, device, rows))
    if a.json:
        pathlib.Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(a.json).write_text(json.dumps(
            {"backend": backend.name, "device": device.to_dict(), "problem": a.problem.to_dict(),
             "fixed": {k: list(v) for k, v in fixed.items()},
             "rows": rows, "command": " ".join(["scripts/search-quality", *(argv or sys.argv[1:])])},
            indent=1) + "\n")
    return 0


def summarise(runs: dict) -> list[dict]:
    ex = runs.get("exhaustive")
    complete = bool(ex) and ex["evaluated"] == ex["space_size"]
    bests = [r["best"]["median_ms"] for r in runs.values() if r["best"]]
    optimum = ex["best"]["median_ms"] if complete and ex["best"] else (min(bests) if bests else None)
    ex_ms = {_key(r["config"]): r["median_ms"] for r in (ex["results"] if ex else [])
             if r["status"] == "ok"}
    rows = []
    for name, r in runs.items():
        b = r["best"]
        timed = sum(1 for x in r["results"] if x["times_ms"])
        rows.append({
            "strategy": name, "evaluated": r["evaluated"], "timed": timed,
            "space_size": r["space_size"], "full_space_size": r["full_space_size"],
            "fraction_evaluated": r["evaluated"] / r["space_size"] if r["space_size"] else None,
            "fraction_timed": timed / r["space_size"] if r["space_size"] else None,
            "wall_s": r["wall_s"], "best_config": b["config"] if b else None,
            "best_ms": b["median_ms"] if b else None, "best_gflops": b["gflops"] if b else None,
            "quality_own": optimum / b["median_ms"] if b and optimum else None,
            "quality_ref": (optimum / ex_ms[_key(b["config"])]
                            if b and optimum and _key(b["config"]) in ex_ms else None),
            "optimum": "exhaustive" if complete else "best known",
            **_by_curve(r, optimum),
        })
    return rows


def _by_curve(run: dict, optimum: float | None) -> dict:
    """From the best-so-far curve: the share of the space timed when the best first
    came within 3% of the optimum, and the best / optimum after timing 5% of it."""
    size = run["space_size"]
    timed_at = []                        # configs timed after each evaluation
    n = 0
    for x in run["results"]:
        n += bool(x["times_ms"])
        timed_at.append(n)
    curve = best_so_far(run["results"])
    reach = next((p for p in curve if optimum and p["best_ms"] <= 1.03 * optimum), None)
    five = [p["best_ms"] for p in curve if size and timed_at[p["evals"] - 1] <= 0.05 * size]
    return {"fraction_timed_to_3pct": timed_at[reach["evals"] - 1] / size if reach and size else None,
            "quality_at_5pct": optimum / five[-1] if five and optimum else None}


def _key(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def _num(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def markdown(problem, device, rows) -> str:
    pct = lambda x: "-" if x is None else f"{100 * x:.1f}%"
    out = [f"Problem {problem.M}x{problem.N}x{problem.K} {problem.dtype} on {device.renderer} "
           f"({device.driver}); pruned space {rows[0]['space_size'] if rows else '?'} of "
           f"{rows[0]['full_space_size'] if rows else '?'}; optimum: "
           f"{rows[0]['optimum'] if rows else '-'}", "",
           "| strategy | evaluated | timed | % of pruned space (timed) | wall s | best GFLOP/s "
           "| best / optimum (own) | best / optimum (exhaustive's timing) "
           "| % of space timed to within 3% | optimum / best after timing 5% | best config |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['strategy']} | {r['evaluated']} | {r['timed']} | {pct(r['fraction_timed'])} "
                   f"| {r['wall_s']:.1f} | "
                   f"{_num(r['best_gflops'], '.3f')} | "
                   f"{pct(r['quality_own'])} | {pct(r['quality_ref'])} | "
                   f"{pct(r['fraction_timed_to_3pct'])} | {pct(r['quality_at_5pct'])} | "
                   f"{Config(r['best_config']).text() if r['best_config'] else '-'} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
