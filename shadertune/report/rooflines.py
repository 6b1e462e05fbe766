"""Attach measured ceilings to a report and work out each problem's roofline.

The roofline model belongs to the backend that ran the report: it is asked
through the Backend contract's `roofline(problem, config, ceilings)` and
`ceiling_lines(ceilings)` hooks, by the name the report carries, without a
device (constructing a backend opens no context).  A backend that cannot be
imported here, or has no model, gives no roofline; a roofline stored with a
problem is used as it is.

No roofline is claimed for a software renderer (the device's limits or the
ceilings say so): its "ceilings" are CPU throughput, which kernels exceed.
"""
from __future__ import annotations

import copy
import functools
from collections.abc import Mapping

from ..core.roofline.store import SOFTWARE_NOTE, software_reason


@functools.lru_cache(maxsize=None)
def backend_model(name: str):
    """The backend named `name`, only to ask its roofline hooks; None if unknown here."""
    from ..backends import get_backend
    try:
        return get_backend(name)
    except (ValueError, ImportError, TypeError):
        return None


def ceilings_of(report: Mapping, override: Mapping | None = None) -> Mapping | None:
    """The flat ceilings map that applies: an explicit one first, else the report's own."""
    c = override if override is not None else report.get("ceilings")
    if not c:
        return None
    inner = c.get("ceilings")
    return inner if isinstance(inner, Mapping) else c


def no_roofline(report: Mapping, override: Mapping | None = None) -> str | None:
    """Why no roofline may be claimed for `report` (a software renderer), or None."""
    why = software_reason(override if override is not None else report.get("ceilings"), report["backend"])
    if why:
        return why
    dev = report.get("device") or {}
    if ((dev.get("limits") or {}).get("software_renderer")) is True:
        return f"{dev.get('renderer', '?')} is a software renderer: its ceilings are {SOFTWARE_NOTE}"
    return None


def compute_roofline(backend: str, problem: Mapping, ceilings: Mapping | None) -> dict | None:
    """The backend's bound for the problem's best config under `ceilings`, or None."""
    best = problem.get("best")
    model = backend_model(backend)
    if not ceilings or not best or model is None:
        return None
    from ..core.problem import Problem
    try:
        roof = model.roofline(Problem.from_dict(problem), best["config"], ceilings)
    except (KeyError, ValueError, TypeError):   # ceilings of another backend, or a config the model lacks
        return None
    return dict(roof) if roof else None


def ceiling_lines(report: Mapping, override: Mapping | None = None) -> list[tuple[str, float]]:
    """Device-wide bounds to draw across sizes, from the report's backend; none for a
    software renderer or without ceilings."""
    flat = ceilings_of(report, override)
    model = backend_model(report["backend"])
    if not flat or model is None or no_roofline(report, override):
        return []
    try:
        return [(str(label), float(v)) for label, v in model.ceiling_lines(flat)]
    except (KeyError, ValueError, TypeError):
        return []


def roofline_of(report: Mapping, problem: Mapping, override: Mapping | None = None) -> dict | None:
    """Explicit ceilings win; then the roofline stored with the problem; then the report's
    ceilings.  None on a software renderer."""
    if no_roofline(report, override):
        return None
    if override is None and problem.get("roofline"):
        return dict(problem["roofline"])
    return compute_roofline(report["backend"], problem, ceilings_of(report, override))


def annotate(report: Mapping, ceilings: Mapping) -> dict:
    """A copy of `report` with top-level 'ceilings' and each problem's 'roofline' filled in
    (no rooflines for a software renderer: the ceilings are kept, flagged)."""
    out = copy.deepcopy(dict(report))
    out["ceilings"] = copy.deepcopy(dict(ceilings))
    if no_roofline(out):
        for p in out["problems"]:
            p.pop("roofline", None)
        return out
    for p in out["problems"]:
        roof = compute_roofline(out["backend"], p, ceilings_of(out))
        if roof is not None:
            p["roofline"] = roof
    return out


def fraction(gflops: float | None, roof: Mapping | None) -> float | None:
    if gflops is None or not roof or not roof.get("gflops"):
        return None
    return gflops / roof["gflops"]
