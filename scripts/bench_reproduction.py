"""Jiang's own figures beside this device's: the phased search against the exhaustive
optimum, and the tuned kernel against the expert hand-tuned ones (scripts/bench-reproduction).

Jiang and Snir (docs/references.md): the phased search cut the tuning time "from 53 days
in theory to 4 hours in practice, with no significant performance loss", and the tuned
kernel was ahead of expert hand-tuned assembly by 8% and 15% on two platforms and at 56%
and 70% of it on the other two.  This measures the same quantities on one device and one
square problem, in one run:

(a) the exhaustive search over a subspace of the fragment family's render-target path
    (Jiang's kernel) that exhaustive search can cover (SUBSPACE, --fix changes it), on a
    fresh store: wall time and evaluations; where it is capped (--exhaustive-seconds,
    --exhaustive-budget) the time it would take, projected from its mean seconds an
    evaluation, and always the projection for the whole render-target space;
(b) the phased search (Jiang's order, then local search to convergence) over the same
    subspace and problem, on a fresh store of its own: evaluations, wall time, best;
(c) both bests, the hand-written expert GLSL kernel and the same algorithm in ARB
    assembly, verified and timed warm in interleaved rounds in this one process
    (scripts/bench-gl-lang's timed_rows), with the ratios taken in this one run;
(d) OUT/bench-reproduction.json and OUT/bench-reproduction.md (the paper's column beside
    this run's), written atomically; OUT/reports/ the two searches' reports, OUT/stores/
    their stores, OUT/logs/ their output.

Each search is the public command line (python -m shadertune.search) in a process of its
own, with the drivers' shader disk caches off, so that neither finds the other's programs
compiled or its textures pooled; the command lines are in the JSON and the table.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import shlex
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

TOOL = "bench-reproduction"
PROG = f"scripts/{TOOL}"
SCHEMA = 1

# The subspace both searches cover: Jiang's render-target path in GLSL, with the two knobs
# that measured flat on both devices held (glsl 450 / 330 within 1% on the H200 and 5% on
# llvmpipe; unroll 1, 2, 4 equal on the H200, 4 / 1 0.95-0.96 on llvmpipe:
# docs/reproduction.md), so that exhaustive search covers every pass depth, packing, render
# target grid and fetch form: 688 configs at 128, 4,016 at 1024.  The image path's knobs are
# fixed at the values the render-target path holds them at: the same configs, and a product of
# the domains small enough that the phased search's random restarts enumerate it (above
# search/random_search.py's ENUMERATE_LIMIT they sample the product, which spins for minutes
# once a small subspace has been evaluated whole).
SUBSPACE = {"family": "fragment", "out": "mrt", "lang": "glsl", "glsl": "330", "unroll": "4",
            "block_h": "0", "block_w": "0", "a_src": "texture", "b_src": "texture"}
# What Jiang's "in theory" covered: the whole render-target path of the fragment family (every
# language, compiler profile and unroll the context runs), for the projected exhaustive time.
RENDER_TARGET_SPACE = {"family": "fragment", "out": "mrt"}
# Knobs the benchmark keeps: it reproduces Jiang's render-target kernel, against whose
# hand-written twins the tuned one is timed.
KEPT = {"family": "fragment", "out": "mrt"}

# Each search runs with the drivers' shader disk caches off (Mesa's, NVIDIA's): the second
# search would otherwise find the first one's programs compiled (scripts/study does the same).
NO_SHADER_CACHE = {"MESA_SHADER_CACHE_DISABLE": "true", "__GL_SHADER_DISK_CACHE": "0"}

QUICK_SIZE = 16           # --quick: an 8-config subspace, each search in seconds on llvmpipe
QUICK_FIX = ["fetch=texture"]
DEFAULT_SIZE = 128        # 688 configs: the exhaustive search in about 5 minutes on llvmpipe
ROUNDS = 3                # interleaved timing rounds of the re-timed kernels

# Jiang's figures, as docs/references.md quotes them.
PAPER = {
    "exhaustive": "53 days in theory (the whole space, projected)",
    "phased": "4 hours in practice",
    "quality": "no significant performance loss",
    "tuned_vs_expert": "ahead of expert hand-tuned assembly by 8% and 15% on two platforms; "
                       "56% and 70% of it on the other two",
}


# --- arguments -----------------------------------------------------------------------------

def parse(argv=None) -> argparse.Namespace:
    from shadertune.cli import args as ca

    class Parser(ca.Parser):
        """The command lines' parser (one error line, exit 2), named as the script is typed."""
        def error(self, message):
            self.exit(2, f"{PROG}: error: {' '.join(str(message).split())}\n")

    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", metavar="OUT", help="folder for the JSON, the table, reports, stores, logs")
    p.add_argument("--size", type=ca.positive, metavar="N",
                   help=f"N of the N x N x N problem (default {DEFAULT_SIZE}; --quick: {QUICK_SIZE})")
    p.add_argument("--fix", action="append", default=[], metavar="KNOB=V[,V...]",
                   help="narrow (or widen) a knob of the subspace, replacing its default "
                        f"({' '.join(f'{k}={v}' for k, v in SUBSPACE.items())}); repeatable")
    p.add_argument("--repeats", type=ca.positive, metavar="R",
                   help="timed runs per config in the searches and of each re-timed kernel "
                        "(default 10; --quick: 2)")
    p.add_argument("--exhaustive-seconds", type=ca.seconds, default=0.0, metavar="S",
                   help="stop the exhaustive search starting evaluations after S seconds (0: no "
                        "limit, the default); a cut search's time is projected")
    p.add_argument("--exhaustive-budget", type=ca.positive, metavar="N",
                   help="at most N exhaustive evaluations (a cut search's time is projected)")
    p.add_argument("--phased-budget", type=ca.positive, metavar="N",
                   help="at most N phased evaluations (default: none, the search converges)")
    p.add_argument("--max-space", type=ca.positive, default=3000, metavar="N",
                   help="refuse an uncapped exhaustive search of more configs (default 3000)")
    p.add_argument("--shader-cache", action="store_true",
                   help="leave the drivers' shader disk caches on in the searches")
    p.add_argument("--quick", action="store_true",
                   help=f"the test's run: size {QUICK_SIZE}, 2 repeats, {' '.join(QUICK_FIX)} "
                        "(each unless given)")
    a = p.parse_args(argv)
    a.size = a.size or (QUICK_SIZE if a.quick else DEFAULT_SIZE)
    a.repeats = a.repeats or (2 if a.quick else 10)
    try:
        a.fixed = subspace_fix((QUICK_FIX if a.quick else []) + a.fix)
    except ValueError as e:
        p.error(str(e))
    a.capped = bool(a.exhaustive_seconds or a.exhaustive_budget)
    out = pathlib.Path(a.out)
    if out.exists() and not out.is_dir():
        p.error(f"OUT {a.out} exists and is not a folder")
    old = [str(out / "stores" / f"{s}.sqlite") for s in ("phased", "exhaustive")
           if (out / "stores" / f"{s}.sqlite").exists()]
    if old:
        p.error(f"{old[0]} exists: each search needs a fresh store (a store replays what it "
                f"holds, and the wall times would not be the searches'); choose another OUT")
    return a


def subspace_fix(items) -> dict[str, str]:
    """SUBSPACE with each --fix KNOB=V[,V...] replacing that knob's values: {knob: 'v1,v2'}."""
    fixed = dict(SUBSPACE)
    for item in items:
        knob, sep, values = item.partition("=")
        knob, values = knob.strip(), ",".join(v.strip() for v in values.split(","))
        if not sep or not knob or not values.strip(","):
            raise ValueError(f"--fix takes KNOB=VALUE[,VALUE...], got {item!r}")
        if knob in KEPT and values != KEPT[knob]:
            raise ValueError(f"--fix {knob}={values}: the benchmark reproduces Jiang's render-target "
                             f"kernel ({knob}={KEPT[knob]}), against whose hand-written twins it times")
        fixed[knob] = values
    return fixed


def fix_args(fixed: dict[str, str]) -> list[str]:
    return [x for k, v in fixed.items() for x in ("--fix", f"{k}={v}")]


# --- the searches ----------------------------------------------------------------------------

def search_folder(out) -> pathlib.Path:
    """OUT as the searches (run in the repository root) name it: relative to the root where
    it lies inside it, else absolute."""
    out = pathlib.Path(out).resolve()
    return out.relative_to(ROOT) if out.is_relative_to(ROOT) else out


def search_command(a, strategy: str) -> list[str]:
    """The search command line (after `python -m shadertune.search`) for `strategy`, run in
    the repository root (where `python -m shadertune` finds the checkout's package)."""
    out = search_folder(a.out)
    cmd = ["--backend", "gl", "--size", str(a.size), "--strategy", strategy, *fix_args(a.fixed),
           "--repeats", str(a.repeats), "--seed", "0", "--db", str(out / "stores" / f"{strategy}.sqlite"),
           "--report", str(out / "reports" / f"{strategy}.json"), "-q"]
    if strategy == "exhaustive":
        # a time limit the search command is given, it spends; exhaustive stops when the space is
        # done either way
        cmd += ["--time-limit", f"{a.exhaustive_seconds:g}"]
        if a.exhaustive_budget:
            cmd += ["--budget", str(a.exhaustive_budget)]
    else:
        # no time limit: phased ends by its convergence rule (a --time-limit would be spent whole)
        cmd += ["--time-limit", "0"]
        if a.phased_budget:
            cmd += ["--budget", str(a.phased_budget)]
    return cmd


def run_search(a, strategy: str) -> dict:
    """One search in a process of its own; its summary, from its report."""
    out = pathlib.Path(a.out)
    cmd = search_command(a, strategy)
    env = dict(os.environ)
    extra = {} if a.shader_cache else dict(NO_SHADER_CACHE)
    env.update(extra)
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in extra.items())
    shown = (shown + " " if shown else "") + shlex.join(["python", "-m", "shadertune.search", *cmd])
    print(f"$ {shown}", flush=True)
    log = out / "logs" / f"{strategy}.log"
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run([sys.executable, "-m", "shadertune.search", *cmd], cwd=ROOT, env=env,
                            stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t0
    if rc:
        tail = log.read_text().strip().splitlines()[-3:]
        raise SystemExit(f"{PROG}: error: the {strategy} search exited with status {rc}: "
                         + " / ".join(tail))
    report = json.loads((out / "reports" / f"{strategy}.json").read_text())
    return summary(strategy, report, shown, wall)


def summary(strategy: str, report: dict, command: str, process_seconds: float) -> dict:
    entry = report["problems"][0]
    statuses: dict[str, int] = {}
    for r in entry["results"]:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    seconds = entry.get("run_seconds", entry["seconds"])
    return {"strategy": strategy, "command": command, "report": f"reports/{strategy}.json",
            "store": f"stores/{strategy}.sqlite", "log": f"logs/{strategy}.log",
            "device_key": f"{report['device']['renderer']} | {report['device']['driver']}",
            "space_size": entry["space_size"], "evaluated": entry["evaluated"],
            "measured": entry["measured"], "cached": entry["cached"],
            "complete": entry["evaluated"] == entry["space_size"],
            "search_seconds": round(seconds, 3), "process_seconds": round(process_seconds, 3),
            "seconds_per_evaluation": round(seconds / entry["evaluated"], 4) if entry["evaluated"] else None,
            "statuses": statuses, "best": entry["best"],
            "stage_seconds": entry.get("stage_seconds")}


# --- the kernels timed in one run --------------------------------------------------------------

def _bench_gl_lang():
    """scripts/bench_gl_lang.py as a module: its timed_rows (verify on sampled rows, then time
    warm in interleaved rounds) is the one re-timing of tuned against hand-written kernels."""
    spec = importlib.util.spec_from_file_location("bench_gl_lang", HERE / "bench_gl_lang.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_rows(backend, problem, phased: dict, exhaustive: dict, repeats: int) -> list[dict]:
    from shadertune.backends.gl import handtuned
    from shadertune.core.config import Config
    tuned = []
    for label, s in (("tuned (phased best)", phased), ("exhaustive optimum", exhaustive)):
        cfg = s["best"]["config"] if s["best"] else None
        if label == "exhaustive optimum" and cfg is not None and cfg == tuned[0][1]:
            continue                    # the same kernel: timed once, as the tuned row
        tuned.append((label, cfg, backend, (lambda c=cfg: backend.build(problem, Config(c)))
                      if cfg is not None else f"the {s['strategy']} search verified no config"))
    asm_ok, asm_note = handtuned.assembly_support(backend)
    kernels = tuned + [
        ("expert GLSL (hand-written 4x4 RGBA + 4 targets)", None, backend,
         lambda: handtuned.build(backend, problem, "expert-4x4-mrt")),
        ("expert ARB assembly (the same algorithm)", None, backend,
         (lambda: handtuned.build_assembly(backend, problem)) if asm_ok else asm_note)]
    return _bench_gl_lang().timed_rows(kernels, problem, repeats, rounds=ROUNDS)


# --- the whole run ------------------------------------------------------------------------------

def space_size(backend, problem, fixed: dict[str, str]) -> int:
    from shadertune.search.restrict import RestrictedBackend, parse_fix
    return len(RestrictedBackend(backend, parse_fix(fix_args(fixed)[1::2])).space(problem))


def run(a, backend=None) -> dict:
    """The whole measurement (the module docstring); `backend`: the GL backend that times the
    kernels (default: a new one on the default device)."""
    from shadertune.backends.gl import GLBackend
    from shadertune.core.problem import Problem
    t_start = time.monotonic()
    load0 = os.getloadavg()
    problem = Problem(a.size, a.size, a.size)
    backend = backend or GLBackend()
    device = backend.device()
    # the subspace checked (knobs, values, size) before any store is made
    try:
        size = space_size(backend, problem, a.fixed)
    except ValueError as e:
        raise SystemExit(f"{PROG}: error: {e}")
    if size == 0:
        raise SystemExit(f"{PROG}: error: the subspace is empty at {a.size}; check the --fix values")
    if size > a.max_space and not a.capped:
        raise SystemExit(f"{PROG}: error: exhaustive search would evaluate {size} configs (> --max-space "
                         f"{a.max_space}); narrow the subspace with --fix, or cap the search with "
                         f"--exhaustive-seconds / --exhaustive-budget (its time is then projected)")
    whole = space_size(backend, problem, RENDER_TARGET_SPACE)
    out = pathlib.Path(a.out)
    for sub in ("reports", "stores", "logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    print(f"{TOOL}: {problem.key} on {device.key}; subspace of {size} configs "
          f"(the whole render-target space: {whole})", flush=True)

    phased = run_search(a, "phased")
    print(f"phased: {phased['evaluated']} evaluated in {phased['search_seconds']} s, "
          f"best {phased['best'] and round(phased['best']['gflops'], 2)} GFLOP/s", flush=True)
    exhaustive = run_search(a, "exhaustive")
    print(f"exhaustive: {exhaustive['evaluated']} of {exhaustive['space_size']} in "
          f"{exhaustive['search_seconds']} s, best "
          f"{exhaustive['best'] and round(exhaustive['best']['gflops'], 2)} GFLOP/s", flush=True)
    rows = kernel_rows(backend, problem, phased, exhaustive, a.repeats)
    for row in rows:
        print(f"{row['kernel']}: {round(row['gflops'], 2) if row.get('gflops') else row['status']}",
              flush=True)
    exhaustive_report = json.loads((out / exhaustive["report"]).read_text())
    doc = {
        "schema": SCHEMA, "tool": PROG, "command": command_line(a),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.to_dict(), "device_key": device.key, "problem": problem.to_dict(),
        "repeats": a.repeats, "rounds": ROUNDS,
        "subspace": {"fix": a.fixed, "size": size},
        "render_target_space": {"fix": RENDER_TARGET_SPACE, "size": whole},
        "searches": {"phased": phased, "exhaustive": exhaustive},
        "exhaustive_cap": {"seconds": a.exhaustive_seconds or None, "evaluations": a.exhaustive_budget},
        "phased_cap": {"evaluations": a.phased_budget},
        "rows": rows, "paper": PAPER,
    }
    doc["exhaustive_time"] = exhaustive_time(exhaustive, size, whole)
    doc["comparison"] = comparison(phased, exhaustive, exhaustive_report, rows)
    doc["checks"] = checks(doc, exhaustive_report)
    doc["load_average"] = {"start": [round(x, 2) for x in load0],
                           "end": [round(x, 2) for x in os.getloadavg()]}
    doc["seconds"] = round(time.monotonic() - t_start, 1)
    return doc


def command_line(a) -> str:
    parts = [PROG, "OUT", "--size", str(a.size)]
    parts += [x for k, v in a.fixed.items() if SUBSPACE.get(k) != v for x in ("--fix", f"{k}={v}")]
    parts += ["--repeats", str(a.repeats)] if a.repeats != 10 else []
    parts += ["--exhaustive-seconds", f"{a.exhaustive_seconds:g}"] if a.exhaustive_seconds else []
    parts += ["--exhaustive-budget", str(a.exhaustive_budget)] if a.exhaustive_budget else []
    parts += ["--phased-budget", str(a.phased_budget)] if a.phased_budget else []
    parts += ["--shader-cache"] if a.shader_cache else []
    return shlex.join(parts)


def exhaustive_time(ex: dict, size: int, whole: int) -> dict:
    """The exhaustive search's time over the subspace (measured where it was complete, else
    projected from its mean seconds an evaluation) and over the whole render-target space
    (projected the same way: a config's time there varies with its knobs, so it is rough)."""
    per = ex["seconds_per_evaluation"]
    return {"subspace_seconds": ex["search_seconds"] if ex["complete"] else (per * size if per else None),
            "subspace_measured": ex["complete"], "seconds_per_evaluation": per,
            "render_target_space_seconds": per * whole if per else None}


def comparison(phased: dict, ex: dict, ex_report: dict, rows: list[dict]) -> dict:
    pb, eb = phased["best"], ex["best"]
    same = bool(pb and eb and pb["config"] == eb["config"])
    # phased's best as the exhaustive search measured it: in that one run, no timing noise
    # between runs helps or hurts phased
    in_ex = next((r for r in ex_report["problems"][0]["results"]
                  if pb and r["config"] == pb["config"]), None)
    by_row = {r["kernel"]: r for r in rows if r.get("status") == "ok"}
    tuned = by_row.get("tuned (phased best)")
    optimum = tuned if same else by_row.get("exhaustive optimum")
    ratio = lambda x, y: x["gflops"] / y["gflops"] if x and y else None
    return {
        "same_config": same,
        "time_ratio_exhaustive_to_phased": (ex["search_seconds"] / phased["search_seconds"]
                                            if ex["complete"] and phased["search_seconds"] else None),
        "phased_share_of_subspace": phased["evaluated"] / phased["space_size"] if phased["space_size"] else None,
        "phased_best_in_exhaustive": {"status": in_ex["status"], "median_ms": in_ex.get("median_ms")}
        if in_ex else None,
        "quality_by_exhaustive_timing": (eb["median_ms"] / in_ex["median_ms"]
                                         if eb and in_ex and in_ex["status"] == "ok" else None),
        "quality_own_timings": eb["median_ms"] / pb["median_ms"] if eb and pb else None,
        "quality_retimed": 1.0 if same and tuned else ratio(tuned, optimum),
        "tuned_vs_expert_glsl": ratio(tuned, by_row.get("expert GLSL (hand-written 4x4 RGBA + 4 targets)")),
        "tuned_vs_expert_arb": ratio(tuned, by_row.get("expert ARB assembly (the same algorithm)")),
        "optimum_vs_expert_glsl": ratio(optimum, by_row.get("expert GLSL (hand-written 4x4 RGBA + 4 targets)")),
        "optimum_vs_expert_arb": ratio(optimum, by_row.get("expert ARB assembly (the same algorithm)")),
    }


def checks(doc: dict, ex_report: dict) -> dict:
    """The run's invariants, each True or False (None: not applicable): what the table may
    claim rests on them."""
    ph, ex = doc["searches"]["phased"], doc["searches"]["exhaustive"]
    cmp = doc["comparison"]
    tolerance = 1e-5 if doc["problem"]["dtype"] == "float32" else 1e-12
    ok_rows = [r for r in doc["rows"] if r["kernel"] in ("tuned (phased best)", "exhaustive optimum")]
    in_ex = cmp["phased_best_in_exhaustive"]
    return {
        "same_subspace": ph["space_size"] == ex["space_size"] == doc["subspace"]["size"],
        "same_device": ph["device_key"] == ex["device_key"] == doc["device_key"],
        "fresh_stores": ph["cached"] == 0 and ex["cached"] == 0,
        # a search capped on purpose is projected, not checked for completeness
        "exhaustive_complete": ex["complete"] or (None if any(doc["exhaustive_cap"].values()) else False),
        "phased_evaluations_within_exhaustive": ph["evaluated"] <= ex["evaluated"] if ex["complete"] else None,
        # exhaustive covered the subspace, so it measured phased's best; its best is the fastest
        # verified config of its own run, phased's among them
        "phased_best_measured_by_exhaustive": (in_ex is not None) if ex["complete"] else None,
        "exhaustive_best_at_least_phased_best": (
            cmp["same_config"] or (in_ex is not None and (in_ex["status"] != "ok"
                                                         or cmp["quality_by_exhaustive_timing"] <= 1.0))
        ) if ex["complete"] else None,
        "bests_verified": all(s["best"] is not None and s["best"]["error"] <= tolerance for s in (ph, ex)),
        "bests_verified_again": all(r["status"] == "ok" for r in ok_rows) and len(ok_rows) >= 1,
    }


# --- the table -----------------------------------------------------------------------------------

def _s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def knobs(cfg: dict | None) -> str:
    if not cfg:
        return "-"
    shown = ("fetch", "mc", "mrt_h", "mrt_w", "np", "unroll", "lang")
    return " ".join(f"{k}={cfg[k]}" for k in shown if k in cfg)


def markdown(doc: dict) -> str:
    ph, ex = doc["searches"]["phased"], doc["searches"]["exhaustive"]
    et, cmp = doc["exhaustive_time"], doc["comparison"]
    p = doc["problem"]
    n = f"{p['M']}x{p['N']}x{p['K']}"
    sub = " ".join(f"{k}={v}" for k, v in doc["subspace"]["fix"].items())
    loaded = doc["load_average"]
    ex_cell = (f"{ex['evaluated']:,} configs (the whole subspace) in {_s(ex['search_seconds'])}"
               if ex["complete"] else
               f"cut after {ex['evaluated']:,} of {ex['space_size']:,} configs ({_s(ex['search_seconds'])}): "
               f"the subspace **projected** at {_s(et['subspace_seconds'])}")
    ex_cell += (f"; the whole render-target space ({doc['render_target_space']['size']:,} configs) "
                f"projected at {_s(et['render_target_space_seconds'])} "
                f"({et['seconds_per_evaluation']:.3g} s an evaluation)")
    ph_cell = (f"{ph['evaluated']:,} evaluations ({_pct(cmp['phased_share_of_subspace'])} of the subspace) "
               f"in {_s(ph['search_seconds'])}")
    r = cmp["time_ratio_exhaustive_to_phased"]
    if r:
        ph_cell += (f": {r:.1f}x less time than exhaustive" if r >= 1 else
                    f": {1 / r:.1f}x the exhaustive search's time")
    q_cell = ("the exhaustive optimum itself (the same config)" if cmp["same_config"] else
              f"{_pct(cmp['quality_by_exhaustive_timing'])} of the optimum by the exhaustive run's "
              f"timing of both, {_pct(cmp['quality_retimed'])} re-timed in one run")
    if not ex["complete"]:
        q_cell += " (the optimum of a cut search: the best it found)"
    t_cell = (f"{_x(cmp['tuned_vs_expert_glsl'])} the expert GLSL kernel, "
              f"{_x(cmp['tuned_vs_expert_arb'])} the expert ARB assembly kernel")
    lines = [
        f"# Jiang's figures beside {doc['device']['renderer']}, {n}", "",
        f"`{doc['command']}` on {doc['device']['renderer']} ({doc['device']['driver']}), "
        f"{doc['created']}, {_s(doc['seconds'])} in all; load average "
        f"{loaded['start'][0]:.1f} at the start, {loaded['end'][0]:.1f} at the end.", "",
        f"Subspace (both searches): `{sub}`: {doc['subspace']['size']:,} configs.", "",
        "| | Jiang (2005) | this run |", "|---|---|---|",
        f"| exhaustive search | {PAPER['exhaustive']} | {ex_cell} |",
        f"| phased search | {PAPER['phased']} | {ph_cell} |",
        f"| phased best against the exhaustive optimum | {PAPER['quality']} | {q_cell} |",
        f"| tuned against expert hand-tuned | {PAPER['tuned_vs_expert']} | {t_cell} |", "",
        "The searches (each in a process of its own, on a fresh store, shader disk caches "
        f"{'on' if 'MESA_SHADER_CACHE_DISABLE' not in ph['command'] else 'off'}):", "",
        "| search | evaluated | of | seconds | statuses | best GFLOP/s | best config |",
        "|---|---:|---:|---:|---|---:|---|"]
    for s in (ph, ex):
        b = s["best"]
        lines.append(f"| {s['strategy']} | {s['evaluated']} | {s['space_size']} | {s['search_seconds']:.1f} | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(s['statuses'].items()))} | "
                     f"{b['gflops']:.2f} | {knobs(b['config'])} |" if b else
                     f"| {s['strategy']} | {s['evaluated']} | {s['space_size']} | {s['search_seconds']:.1f} | "
                     f"- | - | - |")
    lines += ["", f"Re-timed in this one process, warm, {doc['rounds']} interleaved rounds, GL timer "
              f"queries, median of {doc['repeats']} (each verified again on sampled rows):", "",
              "| kernel | GFLOP/s | x tuned | np | config |", "|---|---:|---:|---:|---|"]
    tuned = next((r.get("gflops") for r in doc["rows"] if r["kernel"] == "tuned (phased best)"
                  and r["status"] == "ok"), None)
    for r in doc["rows"]:
        if r["status"] == "ok":
            lines.append(f"| {r['kernel']} | {r['gflops']:.2f} | "
                         f"{_x(r['gflops'] / tuned) if tuned else '-'} | {r.get('np', '-')} | "
                         f"{knobs(r.get('config'))} |")
        else:
            why = r.get("message") or r.get("note") or f"error {r.get('error_rows')}"
            lines.append(f"| {r['kernel']} | {r['status']} | - | - | {why} |")
    if cmp["same_config"]:
        lines.append("\nThe phased search's best is the exhaustive optimum: one kernel, timed once.")
    lines += ["", "Commands of the searches:", "", "```", ph["command"], ex["command"], "```", "",
              "Checks: " + ", ".join(f"{k} {v}" for k, v in doc["checks"].items())]
    return "\n".join(lines) + "\n"


def write(out: pathlib.Path, doc: dict) -> str:
    from shadertune.core.atomic import write_json, write_text
    write_json(out / "bench-reproduction.json", doc)
    md = markdown(doc)
    write_text(out / "bench-reproduction.md", md)
    return md


def main(argv=None, backend=None) -> int:
    a = parse(argv)
    doc = run(a, backend)
    print(write(pathlib.Path(a.out), doc))
    failed = [k for k, v in doc["checks"].items() if v is False]
    if failed:
        print(f"{PROG}: error: checks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
