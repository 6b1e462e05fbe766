"""Attach measured ceilings to a report and work out each problem's roofline.

GL: the roofline of the best config's blocking (fetch rate x flops per fetch,
capped by the fragment ALU peak).  CUDA: min(FMA peak, DRAM bandwidth x the
problem's flops per byte).  Other backends: none.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping

from .. import roofline as rl


def ceilings_of(report: Mapping, override: Mapping | None = None) -> Mapping | None:
    """The flat ceilings map that applies: an explicit one first, else the report's own."""
    c = override if override is not None else report.get("ceilings")
    if not c:
        return None
    inner = c.get("ceilings")
    return inner if isinstance(inner, Mapping) else c


def compute_roofline(backend: str, problem: Mapping, ceilings: Mapping | None) -> dict | None:
    if not ceilings:
        return None
    try:
        if backend == "gl":
            best = problem.get("best")
            if not best:
                return None
            return rl.gl_config_roofline(best["config"], ceilings, K=problem["K"])
        if backend == "cuda":
            return rl.cuda_problem_roofline(problem, ceilings)
    except (KeyError, ValueError):      # ceilings of another backend, or a config the model lacks
        return None
    return None


def roofline_of(report: Mapping, problem: Mapping, override: Mapping | None = None) -> dict | None:
    """Explicit ceilings win; then the roofline stored with the problem; then the report's ceilings."""
    if override is None and problem.get("roofline"):
        return dict(problem["roofline"])
    return compute_roofline(report["backend"], problem, ceilings_of(report, override))


def annotate(report: Mapping, ceilings: Mapping) -> dict:
    """A copy of `report` with top-level 'ceilings' and each problem's 'roofline' filled in."""
    out = copy.deepcopy(dict(report))
    out["ceilings"] = copy.deepcopy(dict(ceilings))
    for p in out["problems"]:
        roof = compute_roofline(out["backend"], p, ceilings_of(out))
        if roof is not None:
            p["roofline"] = roof
    return out


def fraction(gflops: float | None, roof: Mapping | None) -> float | None:
    if gflops is None or not roof or not roof.get("gflops"):
        return None
    return gflops / roof["gflops"]
