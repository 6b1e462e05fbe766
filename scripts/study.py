#!/usr/bin/env python3
"""The search-quality study in one command: reports, tables and figures.

    scripts/study --backend gl --size 128 --fix glsl=330 --fix unroll=1,4 --out DIR [--seeds 3]
    scripts/study --render DIR [--figures FIGDIR]   # draw the figures again from DIR/reports

On a subspace that exhaustive search can cover (--fix narrows knobs; a subspace
larger than --max-space configs is refused before anything runs), on one
problem, through scripts/search-quality, one strategy a process, each on a
fresh store and with the drivers' shader caches off (NO_SHADER_CACHE; a fresh
CUDA kernel cache), so that no strategy finds kernels compiled by another:
  1. phased (seed 0);
  2. random with seeds 0 .. SEEDS-1, as many evaluations as phased used (the
     seed also draws the inputs);
  3. exhaustive (seed 0, the same inputs as phased);
then, from the reports (every Result with its timestamp):
  4. DIR/trajectory.png: best so far against evaluations and seconds, the
     exhaustive optimum, the share of the space each run timed
     (python -m shadertune.report trajectory);
  5. DIR/landscape-*.png: the knob landscape of exhaustive's results
     (python -m shadertune.report landscape);
  6. DIR/study.md: the tables and the commands that made them.
DIR/reports/ holds the reports (phased.json, random-seedS.json, exhaustive.json),
DIR/stores/ each run's store, DIR/search-quality-*.json search-quality's own numbers,
DIR/commands.sh the searches as they were run.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pathlib
import shlex
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("matplotlib", "moderngl")      # the project's .venv when this python3 lacks them

SEARCH_QUALITY = ROOT / "scripts" / "search-quality"


def parse(argv=None):
    p = argparse.ArgumentParser(prog="study", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--backend", default="gl", help="gl, cuda, or module:Class (default gl)")
    p.add_argument("--size", type=int, help="square N x N x N")
    p.add_argument("--m", type=int)
    p.add_argument("--n", type=int)
    p.add_argument("--k", type=int)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--fix", action="append", default=[], metavar="KNOB=V[,V...]",
                   help="narrow a knob to these values (repeatable), e.g. --fix glsl=330")
    p.add_argument("--seeds", type=int, default=3, help="random search seeds 0..SEEDS-1 (default 3)")
    p.add_argument("--repeats", type=int, help="timed runs per config (search-quality's default: 10)")
    p.add_argument("--time-limit", type=float, help="seconds per strategy")
    p.add_argument("--max-space", type=int, default=2000,
                   help="refuse a subspace with more configs than this (default 2000)")
    p.add_argument("--out", metavar="DIR", help="where reports, stores, tables and figures go")
    p.add_argument("--render", metavar="DIR", help="only draw the figures again from DIR/reports")
    p.add_argument("--figures", metavar="FIGDIR", help="where the figures go (default: the study's DIR)")
    p.add_argument("--shader-cache", action="store_true",
                   help="leave the drivers' shader caches on (default: off, see NO_SHADER_CACHE)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    a = p.parse_args(argv)
    if a.render:
        return a
    if not a.out:
        p.error("give --out DIR (or --render DIR)")
    if a.size is not None:
        a.shape = ["--size", str(a.size)]
        a.problem = f"{a.size}x{a.size}x{a.size}"
    elif None not in (a.m, a.n, a.k):
        a.shape = ["--m", str(a.m), "--n", str(a.n), "--k", str(a.k)]
        a.problem = f"{a.m}x{a.n}x{a.k}"
    else:
        p.error("give --size N or --m M --n N --k K")
    if a.seeds < 1:
        p.error("--seeds must be at least 1")
    return a


def subspace_size(a) -> tuple[int, int]:
    """(configs in the narrowed, pruned space; in the whole pruned space) on this device."""
    from shadertune.core.problem import Problem
    from shadertune.backends import load_backend
    from shadertune.search.restrict import RestrictedBackend, parse_fix
    M, N, K = (a.size,) * 3 if a.size is not None else (a.m, a.n, a.k)
    problem = Problem(M, N, K, a.dtype)
    backend = load_backend(a.backend)
    sub = RestrictedBackend(backend, parse_fix(a.fix)).space(problem)
    return len(sub), sub.full_size


# Each strategy runs in a process of its own with the drivers' shader caches off and a
# fresh CUDA kernel cache: a strategy run after another would otherwise find the kernels
# they share compiled already, and its seconds would not be comparable.
NO_SHADER_CACHE = {"MESA_SHADER_CACHE_DISABLE": "true", "__GL_SHADER_DISK_CACHE": "0"}


def search_quality(a, strategy: str, seed: int, extra=()) -> None:
    out = pathlib.Path(a.out)
    stem = f"{strategy}-seed{seed}" if strategy == "random" else strategy
    cmd = [sys.executable, str(SEARCH_QUALITY), "--backend", a.backend, *a.shape, "--dtype", a.dtype,
           "--strategies", strategy, "--seed", str(seed), "--reports", str(out / "reports"),
           "--keep-stores", str(out / "stores" / stem),
           "--json", str(out / f"search-quality-{stem}.json"), *extra]
    for f in a.fix:
        cmd += ["--fix", f]
    if a.repeats is not None:
        cmd += ["--repeats", str(a.repeats)]
    if a.time_limit is not None:
        cmd += ["--time-limit", str(a.time_limit)]
    if a.quiet:
        cmd.append("-q")
    env, extra_env = dict(os.environ), {}
    if not a.shader_cache:
        extra_env = {**NO_SHADER_CACHE, "SHADERTUNE_CACHE": str(out / "cache" / stem)}
        env.update(extra_env)
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in extra_env.items())
    shown = (shown + " " if shown else "") + shlex.join(["scripts/search-quality", *cmd[2:]])
    with open(out / "commands.sh", "a") as f:
        f.write(shown + "\n")
    print("$ " + shown, flush=True)
    # in the caller's folder, where the paths in `cmd` (--out's) and PYTHONPATH point:
    # search-quality puts the checkout on its own path
    rc = subprocess.run(cmd, env=env).returncode
    if rc:
        raise SystemExit(f"study: error: scripts/search-quality exited with status {rc}")


def run(a) -> None:
    out = pathlib.Path(a.out)
    (out / "reports").mkdir(parents=True, exist_ok=True)
    (out / "commands.sh").write_text("# the searches of this study, in order (scripts/study)\n")
    size, full = subspace_size(a)
    print(f"study: {a.problem} on {a.backend}, subspace of {size} configs "
          f"(whole pruned space {full} before the --fix narrowing)", flush=True)
    if size > a.max_space:
        raise SystemExit(f"study: error: exhaustive search would evaluate {size} configs "
                         f"(> --max-space {a.max_space}); narrow the subspace with --fix")
    if size == 0:
        raise SystemExit("study: error: the subspace is empty; check the --fix values")
    search_quality(a, "phased", 0)
    phased = json.loads((out / "reports" / "phased.json").read_text())
    evals = str(phased["problems"][0]["evaluated"])
    for seed in range(a.seeds):
        search_quality(a, "random", seed, ["--random-budget", evals])
    search_quality(a, "exhaustive", 0)


def render(out: pathlib.Path, figures: pathlib.Path | None = None) -> None:
    """The trajectory and landscape figures (in `figures`, else `out`) and out/study.md,
    from out/reports and out/commands.sh."""
    from shadertune.cli.report import main as report
    figures = figures or out
    reports = sorted((out / "reports").glob("*.json"), key=_order)
    if not reports:
        raise SystemExit(f"study: error: {out / 'reports'} holds no report")
    parts = []
    traj = ["trajectory", *map(str, reports), "--out", str(figures / "trajectory.png")]
    parts.append(_captured(report, traj))
    ex = out / "reports" / "exhaustive.json"
    land = ["landscape", str(ex if ex.exists() else reports[0]), "--out", str(figures)]
    parts.append(_captured(report, land))
    ran = out / "commands.sh"
    shown = (ran.read_text().splitlines() if ran.exists() else []) + [
        shlex.join(["python", "-m", "shadertune.report", *traj]),
        shlex.join(["python", "-m", "shadertune.report", *land])]
    text = ["# Search-quality study", "", "Commands:", "", "```", *shown, "```", "", *parts]
    (out / "study.md").write_text("\n".join(text) + "\n")
    print(f"study: {out / 'study.md'}")


def _order(path: pathlib.Path):
    """phased, then random by seed, then exhaustive, then anything else."""
    stem = path.stem
    rank = {"phased": 0, "random": 1, "exhaustive": 2}
    head = stem.split("-seed")[0]
    seed = int(stem.split("-seed")[1]) if "-seed" in stem and stem.split("-seed")[1].isdigit() else 0
    return (rank.get(head, 3), seed, stem)


def _captured(fn, argv) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = fn(argv)
    sys.stdout.write(buf.getvalue())
    if rc:
        raise SystemExit(f"study: error: python -m shadertune.report {argv[0]} failed")
    return buf.getvalue()


def main(argv=None) -> int:
    a = parse(argv)
    figures = pathlib.Path(a.figures) if a.figures else None
    if a.render:
        render(pathlib.Path(a.render), figures)
        return 0
    run(a)
    render(pathlib.Path(a.out), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
