#!/usr/bin/env python3
"""Scaling of a cluster search with its GPUs, and the cluster's own overhead (a
benchmark script, not a test).  One call per machine:

    scripts/bench-workers OUT_DIR [--backends gl,cuda] [--gpus all|LIST] [--counts 1,2,4]
                          [--minutes 7] [--quick] [--gl-problems LIST] [--cuda-problems LIST]
                          [--gl-budget N] [--cuda-budget N] [--strategy NAME] [--repeats N]
                          [--noise F] [--cuda-cache warm|cold]

For each backend, a fresh local cluster of 1 worker, then 2, then 4 (the
--counts that --gpus has GPUs for; --gpus all: every GPU nvidia-smi lists) runs
two jobs, each on a fresh store: the table of problems, then one search (the
table's first problem, twice the budget).  Each backend's default strategy, an
evaluation budget per problem: a run evaluates at most that many configs, and a
converging strategy (CUDA's model strategy) may stop a run earlier, at another count on
more workers (its path follows the measured times); evaluations per second are compared.
(Spending the whole budget instead, Budget spend_all, sends a CUDA search past its
convergence into configs the warm cache lacks: it then measures the host's compiles, not
the GPUs; notes/cluster.md.)
The timed span is tune_table() alone; the cluster's start-up and the problems'
space sizes (counted once, copied into each store: they do not depend on the
worker count) come before it.

Reported per run: evaluations per second, the speed-up over 1 worker,
evaluations per worker and their spread ((max - min) / max; the target is 15%),
how busy the workers were, the share of evaluations the strategy sent one at a
time (its steps of one config), the speed-up its steps allow at most on k
workers (a batch of b configs takes ceil(b / k) rounds; the table's searches
run side by side, so a table is not bound by it), and per problem whether the
best config agrees with
the 1-worker run's (the same config; or a different one within --noise of its
time, or measured in the other run within --noise: timing noise; else they
differ).  The cluster's own overhead: its start-up (the cluster ready, less the
slowest worker's opening of its backend, which a local search pays too), each
evaluation's dispatch and return (the coordinator's round trip less the
worker's time inside the task; with two evaluations in flight a worker it includes the
wait behind the other), each worker's idle time between its evaluations (on its clock: what
dispatch, return and the coordinator cost the GPU where nothing was queued; the 60 s
fraction is taken from it), the coordinator's CPU per evaluation, and all
of it as a fraction of a 60 s search (the target is under 5%).

Every run starts alike: the NVIDIA GL shader disk cache off
(__GL_SHADER_DISK_CACHE=0: a run would otherwise find the programs an earlier one
compiled); GL's table and one search each on a cluster of its own (fresh worker
processes: a GL worker keeps the programs it compiled ahead in its context).  CUDA
with --cuda-cache warm (the default): a first 1-worker run on a fresh cubin cache is
reported as "cold" (its NVRTC compiles overlap its timing: compile seconds in the
table), then every timed run uses the cache it filled, so that the speed-up measures
the GPUs, not one host's compiles; --cuda-cache cold gives every run a fresh cache.

A time guard keeps the call within --minutes: a run is started only when the
time left holds it (estimated from the runs before), and a run still going at
its deadline is stopped and marked "cut".  OUT_DIR/bench-workers.json (every
run, the raw numbers) and OUT_DIR/bench-workers.md are written after every run.

--quick: small problems and budgets (llvmpipe: --gpus 0,0, two workers on one
software renderer: scaling numbers mean nothing there, overhead numbers do).
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shadertune.core.atomic import write_json, write_text  # noqa: E402
from shadertune.errors import ContextError, ShadertuneError  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.search import Budget  # noqa: E402

# (table, evaluations per problem): under a minute on one H100 each (GL: 1.5
# evaluations/s at 1024 on one worker, the first two-H100 run); one search gets twice
DEFAULTS = {"gl": ("1024:NN,1024:TN,1024:NT,1024:TT", 20),
            "cuda": ("2048:NN,2048:TN,2048:NT,2048:TT", 32)}
QUICK = {"gl": ("32:NN,32:TN,32:NT,32:TT", 6), "cuda": ("256:NN,256:TN", 8)}
COUNTS = (1, 2, 4, 8)
SEARCH_SECONDS = 60.0            # the search the overhead is stated for
START_ESTIMATE_S = 20.0          # a run's start-up and close before any was measured


def parse_problems(text: str) -> list[Problem]:
    out = []
    for tok in (t.strip() for t in text.split(",") if t.strip()):
        shape, _, trans = tok.partition(":")
        trans = trans.upper() or "NN"
        if trans not in ("NN", "TN", "NT", "TT"):
            raise ValueError(f"transposition must be NN, TN, NT or TT, got {tok!r}")
        p = Problem.parse(shape.replace("x", ",") if "x" in shape else shape)
        out.append(Problem(p.M, p.N, p.K, "float32", trans[0] == "T", trans[1] == "T"))
    return out


def visible_gpus() -> list[int]:
    """Every GPU nvidia-smi lists, else [0] (one GPU, or a software renderer)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        n = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        n = 0
    return list(range(n)) or [0]


# --- one run ----------------------------------------------------------------------

def copy_store(src: str, dst: str) -> None:
    """SQLite's own backup: a consistent copy of a store."""
    import sqlite3
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def run_cluster(backend: str, gpus, jobs, *, strategy: str | None, repeats: int, workdir: str,
                cache: str, seconds: float, sizes: str | None = None) -> list[dict]:
    """The jobs, (kind, problems, Budget), one after another on one fresh local cluster
    of len(gpus) workers, each on a fresh store; all of them stopped after `seconds`
    (a job stopped is marked cut; a job not started is not returned).  sizes: a store
    holding nothing but the problems' space sizes, copied into each store (made by the
    first run): they do not depend on the worker count, and counting one is seconds."""
    from shadertune.cluster import Coordinator, local_cluster
    env = {"SHADERTUNE_CACHE": cache, "__GL_SHADER_DISK_CACHE": "0"}
    events: list = []
    out = []
    t_start = time.monotonic()
    with local_cluster(gpus, [backend], env=env) as client:
        coord = Coordinator(client, backend, on_event=events.append)
        ready = time.monotonic()
        opened = [st.open_seconds or 0.0 for st in coord.statuses.values() if st.resource]
        guard = threading.Timer(seconds, coord.cancelled.set)
        guard.start()
        try:
            for i, (kind, problems, budget) in enumerate(jobs):
                if coord.cancelled.is_set():
                    break
                store_path = os.path.join(workdir, f"{kind}.sqlite")
                run = run_job(coord, problems, budget, strategy=strategy, repeats=repeats,
                              store_path=store_path, sizes=sizes)
                run.update(kind=kind, workers=len(gpus), gpus=list(gpus), events=list(events),
                           startup_s=round(ready - t_start, 3) if i == 0 else 0.0,
                           open_s=round(max(opened, default=0.0), 3) if i == 0 else 0.0)
                events.clear()
                out.append(run)
        finally:
            guard.cancel()
    return out


def run_job(coord, problems, budget: Budget, *, strategy, repeats, store_path, sizes) -> dict:
    """One timed tune_table of `problems` on the coordinator's cluster."""
    from shadertune.cluster import tune_table
    from shadertune.cluster.coordinator import Cancelled
    from shadertune.db import Store
    from shadertune.db.spaces import space_sizes
    per_worker, lock = Counter(), threading.Lock()
    finished, timings = {}, {}

    def count(result, cached, worker):
        with lock:
            per_worker[worker] += 1
    t_prep = time.monotonic()
    used = strategy or next(iter(coord.groups.values())).default_strategy
    # per problem, not per evaluation, and alike for every worker count: the space
    # (asked of a worker) and its pruned size (counted here, kept in the store as a
    # store that has seen the problem keeps it) before the timed span
    if sizes is not None and os.path.exists(sizes):
        copy_store(sizes, store_path)
    with Store(store_path) as store:
        for group in coord.groups.values():
            for problem in problems:
                space_sizes(store, group.backend, problem, group.backend.space(problem))
    if sizes is not None and not os.path.exists(sizes):
        copy_store(store_path, sizes)
    cpu0, t0 = time.process_time(), time.monotonic()
    cut = False
    try:
        tune_table(coord, problems, strategy=strategy, budget=budget, store_path=store_path,
                   repeats=repeats, on_search=lambda group, problem: count, finished=finished,
                   timings=timings)
    except Cancelled:
        cut = True
    span = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    rows = []
    for (group, problem), e in finished.items():
        b = e["best"]
        rows.append({"device": group.device.key, "problem": problem.key, "measured": e["measured"],
                     "evaluated": e["evaluated"], "best_config": b["config"] if b else None,
                     "best_ms": b["median_ms"] if b else None,
                     "best_gflops": b["gflops"] if b else None,
                     "times": {_key(r["config"]): r["median_ms"] for r in e["results"]
                               if r["status"] == "ok"},
                     # the workers' seconds per stage of an evaluation (build, verify, time, ...):
                     # where worker time goes when it grows with the worker count
                     "stage_seconds": e.get("stage_seconds", {})})
    order = {p.key: i for i, p in enumerate(problems)}
    rows.sort(key=lambda r: order[r["problem"]])
    measured = sum(per_worker.values())
    t = _sum_timings(timings.values())
    return {"strategy": used, "cut": cut or coord.cancelled.is_set(),
            "serial_share": serial_share(t["batches"]),
            "steps_allow": steps_allow(t["batches"], len(coord.names()) or 1),
            "seconds": round(span, 3), "measured": measured,
            "evals_per_s": measured / span if span > 0 else None,
            "per_worker": dict(sorted(per_worker.items())), "spread": spread(per_worker),
            "busy": {w: round(s / span, 3) for w, s in sorted(t["busy_s"].items())} if span else {},
            "prepare_s": round(t0 - t_prep, 3), "coordinator_cpu_s": round(cpu, 3),
            "timings": t, "devices": sorted({r["device"] for r in rows}), "problems": rows}


def _key(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(config.items()))


def _sum_timings(parts) -> dict:
    out = {"evaluations": 0, "round_trip_s": 0.0, "task_s": 0.0, "compile_s": 0.0, "idle_s": 0.0,
           "busy_s": {}, "batches": {}}
    for t in parts:
        for k in ("evaluations", "round_trip_s", "task_s", "compile_s", "idle_s"):
            out[k] += t.get(k, 0.0)
        for w, s in t["busy_s"].items():
            out["busy_s"][w] = out["busy_s"].get(w, 0.0) + s
        for size, n in t.get("batches", {}).items():
            out["batches"][size] = out["batches"].get(size, 0) + n
    return out


def serial_share(batches: dict) -> float | None:
    """The share of a search's evaluations sent one at a time (steps of one config)."""
    total = sum(int(size) * n for size, n in batches.items())
    return sum(n for size, n in batches.items() if int(size) == 1) / total if total else None


def steps_allow(batches: dict, k: int) -> float | None:
    """The speed-up on k workers that a search's steps allow at most, were every
    evaluation as long as the others and nothing else running: a batch of b configs
    takes ceil(b / k) rounds where one worker takes b."""
    total = sum(int(size) * n for size, n in batches.items())
    rounds = sum(-(-int(size) // k) * n for size, n in batches.items())
    return total / rounds if rounds else None


def spread(per_worker) -> float | None:
    """(max - min) / max of the evaluations per worker; None for one worker."""
    counts = list(per_worker.values())
    if len(counts) < 2 or max(counts) == 0:
        return None
    return (max(counts) - min(counts)) / max(counts)


def overhead(run: dict) -> dict:
    """The cluster's own time in this run, and as a fraction of a 60 s search."""
    t = run["timings"]
    n = t["evaluations"]
    own_start = max(0.0, run["startup_s"] - run["open_s"])
    if not n:
        return {"startup_s": own_start}
    dispatch = max(0.0, (t["round_trip_s"] - t["task_s"]) / n)
    task = t["task_s"] / n
    # what the GPUs lost: a worker's idle time between its evaluations (with evaluations
    # queued behind each other the round trip's dispatch and return overlap the GPU);
    # runs recorded before the idle time was, the round trip less the task
    idle = t["idle_s"] / n if "idle_s" in t else dispatch
    per_eval = idle / (task + idle) if task + idle > 0 else 0.0
    start = min(1.0, own_start / SEARCH_SECONDS)
    # the workers' build stage (GL: the compile and link the worker waited for), from the
    # problems' stage seconds: where a worker's time an evaluation grows with the workers
    build = sum(p.get("stage_seconds", {}).get("build", 0.0) for p in run.get("problems", []))
    return {"startup_s": round(own_start, 3), "dispatch_ms": round(1e3 * dispatch, 2),
            "idle_ms": round(1e3 * idle, 2),
            "task_s": round(task, 4), "build_ms": round(1e3 * build / n, 1),
            "coordinator_cpu_ms": round(1e3 * run["coordinator_cpu_s"] / n, 2),
            "fraction_60s": round(start + (1 - start) * per_eval, 4)}


def agreement(one: dict, other: dict, noise: float) -> list[dict]:
    """Per problem: the best of the 1-worker run against the other run's.  Where they
    differ, each best's time in the other run (if it was measured there) says whether
    it is timing noise."""
    out = []
    mine = {r["problem"]: r for r in other["problems"]}
    for a in one["problems"]:
        b = mine.get(a["problem"])
        if b is None or a["best_ms"] is None or b["best_ms"] is None:
            verdict = "no verified best in one of the runs"
        elif a["best_config"] == b["best_config"]:
            verdict = "same config"
        else:
            ratio = b["best_ms"] / a["best_ms"]
            there = a["times"].get(_key(b["best_config"]))     # other's best, timed in run 1
            back = b["times"].get(_key(a["best_config"]))      # run 1's best, timed in the other
            notes = []
            if there is not None:
                notes.append(f"its best took {there / a['best_ms']:.3f}x in the 1-worker run")
            if back is not None:
                notes.append(f"the 1-worker best took {back / b['best_ms']:.3f}x here")
            noisy = abs(ratio - 1) <= noise or any(
                abs(x - 1) <= noise for x in [there / a["best_ms"] if there else None,
                                               back / b["best_ms"] if back else None] if x)
            verdict = (f"{'within noise' if noisy else 'differ'} ({ratio:.3f}x"
                       + (f"; {'; '.join(notes)}" if notes else "; not measured in the other run")
                       + ")")
        out.append({"problem": a["problem"], "one": a["best_config"], "one_ms": a["best_ms"],
                    "other": b["best_config"] if b else None, "other_ms": b["best_ms"] if b else None,
                    "verdict": verdict})
    return out


# --- the table --------------------------------------------------------------------

def fmt_cfg(c) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(c.items())) if c else "-"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _x(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def markdown(doc: dict) -> str:
    lines = [f"# bench-workers ({doc['created']}, {doc['host']})", "",
             f"GPUs {doc['gpus']}; budgets per problem {doc['budgets']}; problems "
             f"{doc['problems']}; time guard {doc['minutes']} min.", "",
             "| backend | run | cache | workers | evaluations | seconds | evaluations/s | speed-up "
             "| per worker | spread | busy | one at a time | steps allow | bests vs 1 worker |",
             "|---|---|---|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---|"]
    for name, res in doc["backends"].items():
        for run in res.get("runs", []):
            if "error" in run:
                lines.append(f"| {name} | {run.get('kind', '')} | {run.get('cache', '')} | "
                             f"{run['workers']} | | | | | {run['error']} | | | | | |")
                continue
            rate = f"{run['evals_per_s']:.2f}" if run["evals_per_s"] else "-"
            sp = f"{run['speedup']:.2f}x" if run.get("speedup") else "-"
            agree = run.get("agree_summary", "-")
            busy = ", ".join(f"{b:.0%}" for b in run["busy"].values()) or "-"
            cut = " (cut)" if run["cut"] else ""
            lines.append(f"| {name} | {run['kind']} | {run.get('cache', '')} | {run['workers']} "
                         f"| {run['measured']} "
                         f"| {run['seconds']:.1f}{cut} | {rate} | {sp} | "
                         + ", ".join(f"{w} {n}" for w, n in run["per_worker"].items())
                         + f" | {_pct(run['spread'])} | {busy} | {_pct(run.get('serial_share'))} "
                         f"| {_x(run.get('steps_allow'))} | {agree} |")
    lines += ["", "The cluster's own overhead (target: under 5% of a 60 s search):", "",
              "| backend | run | cache | workers | start-up, cluster's own (s) | backend open (s) "
              "| dispatch + return (ms/evaluation) | worker idle between (ms/evaluation) "
              "| worker time (s/evaluation) | of it build (ms/evaluation) "
              "| coordinator CPU (ms/evaluation) | compile (s) | of a 60 s search |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, res in doc["backends"].items():
        for run in res.get("runs", []):
            if "error" in run:
                continue
            o = run["overhead"]
            lines.append(f"| {name} | {run['kind']} | {run.get('cache', '')} | {run['workers']} "
                         f"| {o['startup_s']:.2f} "
                         f"| {run['open_s']:.2f} | {o.get('dispatch_ms', '-')} | {o.get('idle_ms', '-')} "
                         f"| {o.get('task_s', '-')} | {o.get('build_ms', '-')} "
                         f"| {o.get('coordinator_cpu_ms', '-')} | {run['timings']['compile_s']:.1f} "
                         f"| {_pct(o.get('fraction_60s'))} |")
    lines += ["", "Best configs per problem, against the 1-worker run of the same cache:", ""]
    for name, res in doc["backends"].items():
        for run in res.get("runs", []):
            for a in run.get("agreement", []):
                ms = lambda v: f"{v:.4g}" if v is not None else "-"  # noqa: E731
                lines.append(f"- {name}, {run['kind']}, {run['workers']} workers, {a['problem']}: "
                             f"{a['verdict']}; "
                             f"1 worker {ms(a['one_ms'])} ms `{fmt_cfg(a['one'])}`, "
                             f"{run['workers']} workers {ms(a['other_ms'])} ms `{fmt_cfg(a['other'])}`")
    for name, res in doc["backends"].items():
        for run in res.get("runs", []):
            if run.get("events"):
                lines.append(f"\n{name}, {run.get('kind')}, {run['workers']} workers: "
                             + "; ".join(run["events"]))
            if run.get("traceback"):
                lines += ["", f"{name}, {run['workers']} workers failed:", "", "```",
                          run["traceback"].rstrip(), "```"]
    return "\n".join(lines) + f"\n\ntotal {doc['seconds']} s\n"


# --- the plan ---------------------------------------------------------------------

def plan(backend: str, counts: list[int], cache_mode: str) -> list[tuple[str, int, tuple]]:
    """(cache, workers, kinds) of the clusters in order, the 1-worker one first (the
    baseline); on each, the table then one search (kinds).  CUDA warm: a cold 1-worker
    table fills the cache, then the timed clusters use it."""
    both = ("table", "one search")
    if backend == "cuda" and cache_mode == "warm":
        return [("cold", 1, ("table",))] + [("warm", k, both) for k in counts]
    if backend == "cuda":
        return [("cold", k, both) for k in counts]
    # GL: the table and the one search each on a cluster of its own: on one, the one
    # search would find the programs the table's workers compiled for its problem
    return [("-", k, (kind,)) for k in counts for kind in both]


def jobs_of(kinds, problems, budget_n: int) -> list:
    """The table of `problems`, and one search: the first problem with twice the budget."""
    made = {"table": (problems, Budget(budget_n)), "one search": ([problems[0]], Budget(2 * budget_n))}
    return [(kind, *made[kind]) for kind in kinds]


def report_run(run: dict, baseline: dict, noise: float) -> None:
    """Speed-up and agreement against the 1-worker run of the same cache and kind."""
    run["overhead"] = overhead(run)
    key = (run["cache"], run["kind"])
    if run["workers"] == 1:
        baseline[key] = run
    base = baseline.get(key)
    if base is not None and base is not run and base["evals_per_s"] and run["evals_per_s"]:
        run["speedup"] = run["evals_per_s"] / base["evals_per_s"]
        run["agreement"] = agreement(base, run, noise)
        agree = sum(1 for a in run["agreement"] if a["verdict"].startswith(("same", "within")))
        run["agree_summary"] = f"{agree}/{len(run['agreement'])} agree"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--backends", default="gl,cuda")
    ap.add_argument("--gpus", default="all", help="the GPUs, e.g. 0,1,2,3 (default all: every "
                                                  "GPU nvidia-smi lists)")
    ap.add_argument("--counts", default=",".join(map(str, COUNTS)),
                    help="worker counts to run, those --gpus has GPUs for (default 1,2,4,8)")
    ap.add_argument("--minutes", type=float, default=7.0,
                    help="the whole call's time guard (default 7)")
    ap.add_argument("--gl-problems")
    ap.add_argument("--cuda-problems")
    ap.add_argument("--gl-budget", type=int)
    ap.add_argument("--cuda-budget", type=int)
    ap.add_argument("--strategy", help="default: each backend's own (phased for gl, model for cuda)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--noise", type=float, default=0.03,
                    help="best medians this close count as agreeing (default 0.03)")
    ap.add_argument("--quick", action="store_true", help="small problems and budgets")
    ap.add_argument("--cuda-cache", choices=("warm", "cold"), default="warm")
    args = ap.parse_args(argv)
    from shadertune.cluster.engine import parse_gpus
    t_all = time.monotonic()
    deadline = t_all + 60 * args.minutes
    gpus = visible_gpus() if args.gpus == "all" else parse_gpus(args.gpus)
    counts = sorted({k for k in (int(c) for c in args.counts.split(",") if c.strip())
                     if 1 <= k <= len(gpus)} | {1})
    table = QUICK if args.quick else DEFAULTS
    doc = {"created": datetime.datetime.now().isoformat(timespec="seconds"),
           "host": os.uname().nodename, "cpus": os.cpu_count(), "gpus": gpus, "counts": counts,
           "minutes": args.minutes, "strategy": args.strategy, "budgets": {}, "problems": {},
           "backends": {}, "seconds": 0.0}
    os.makedirs(args.out, exist_ok=True)

    def save() -> None:
        doc["seconds"] = round(time.monotonic() - t_all, 1)
        write_json(os.path.join(args.out, "bench-workers.json"), doc, indent=1)
        write_text(os.path.join(args.out, "bench-workers.md"), markdown(doc))

    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    clusters_left = sum(len(plan(n, counts, args.cuda_cache)) for n in names)
    for name in names:
        problems = parse_problems(getattr(args, f"{name}_problems") or table[name][0])
        budget_n = getattr(args, f"{name}_budget") or table[name][1]
        doc["budgets"][name], doc["problems"][name] = budget_n, [p.key for p in problems]
        res = doc["backends"][name] = {"runs": []}
        tmp = tempfile.mkdtemp(prefix=f"bench-workers-{name}-")
        mine = plan(name, counts, args.cuda_cache)
        try:
            baseline: dict = {}                         # (cache, kind) -> the 1-worker run
            for n_done, (cache, k, kinds) in enumerate(mine):
                left = deadline - time.monotonic()
                # what k workers need: the 1-worker jobs' time shared by k (and a start-up),
                # or a fair share of what is left before any was measured
                ones = [r for (c, _), r in baseline.items() if c in (cache, "cold")]
                need = (START_ESTIMATE_S + sum(r["seconds"] for r in ones) / k) if ones \
                    else left / max(1, clusters_left)
                clusters_left -= 1
                if left < min(need, 30.0) or left < 15:
                    res["runs"] += [{"workers": k, "cache": cache, "kind": kind, "error":
                                     f"skipped: the time guard left {left:.0f} s"} for kind in kinds]
                    continue
                work = os.path.join(tmp, f"{cache}-{k}-{'-'.join(kinds).replace(' ', '_')}")
                os.makedirs(work)
                # the cold table fills the warm runs' cache
                shared = cache == "warm" or (cache == "cold" and args.cuda_cache == "warm")
                cubins = os.path.join(tmp if shared else work, "cubins")
                print(f"{name}: {k} worker(s){'' if cache == '-' else f', {cache} cache'}: "
                      f"{' then '.join(kinds)} ({left:.0f} s left)", flush=True)
                try:
                    runs = run_cluster(name, gpus[:k], jobs_of(kinds, problems, budget_n),
                                       strategy=args.strategy, repeats=args.repeats, workdir=work,
                                       cache=cubins, seconds=max(10.0, min(left - 10.0, 2.5 * need)),
                                       sizes=os.path.join(tmp, "sizes.sqlite"))
                except Exception as e:            # reported; the other clusters go on
                    run = {"workers": k, "cache": cache, "kind": kinds[0],
                           "error": " ".join(f"{type(e).__name__}: {e}".split())[:500]}
                    if not isinstance(e, ShadertuneError):
                        run["traceback"] = traceback.format_exc()
                    res["runs"].append(run)
                    print(f"  failed: {run['error']}", flush=True)
                    save()
                    if isinstance(e, ContextError) and "no worker could open" in str(e):
                        clusters_left -= len(mine) - n_done - 1
                        break                     # no cluster of this backend can do better
                    continue
                for run in runs:
                    run["cache"] = cache
                    report_run(run, baseline, args.noise)
                    print(f"  {run['kind']}: {run['measured']} evaluations in {run['seconds']:.1f} s"
                          f" = {run['evals_per_s'] or 0:.2f}/s {run['per_worker']}"
                          + (f", {run['speedup']:.2f}x" if run.get("speedup") else "")
                          + (" (cut by the time guard)" if run["cut"] else ""), flush=True)
                    res["runs"].append(run)
                res["runs"] += [{"workers": k, "cache": cache, "kind": kind, "error": "not started: "
                                 "the time guard stopped the cluster"} for kind in kinds[len(runs):]]
                save()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        save()
    save()
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
