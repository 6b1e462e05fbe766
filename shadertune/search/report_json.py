"""The JSON report of a search; the report package reads it.

    {"schema": 1, "backend", "device": DeviceInfo.to_dict(), "strategy", "created",
     "problems": [{"M", "N", "K", "dtype", "trans_a", "trans_b", "space_size",
                   "full_space_size", "evaluated", "measured", "cached", "seconds",
                   "best": {"config", "median_ms", "gflops", "error"} | null,
                   "results": [Result.to_dict(), ...],
                   "stage_seconds": {"build", "check", "verify", "time", "release",
                                     "store"} (optional: where the search's time went),
                   "run_seconds" (optional: this run's wall seconds; "seconds" then adds the
                                  stored measuring seconds of the results it replayed, so a
                                  report rebuilt from the store carries the original time),
                   "incomplete": true (optional: the search of this problem was stopped),
                   "phases": [{"at", "label"}, ...] (optional: the strategy's phases in the
                              order they began, "at" the number of results before the
                              phase's first, i.e. its first result's index in "results":
                              the plan's steps, "local search", each restart)}]}

Others may add per-problem "baselines" and "roofline"; the names above stay.
"""
from __future__ import annotations

import datetime

from ..core.atomic import write_json
from ..core.result import Result, best

REPORT_SCHEMA = 1
PROBLEM_KEYS = ("M", "N", "K", "dtype", "trans_a", "trans_b", "space_size", "full_space_size",
                "evaluated", "measured", "cached", "seconds", "best", "results")


def best_entry(results: list[Result]) -> dict | None:
    b = best(results)
    if b is None:
        return None
    return {"config": b.config.to_dict(), "median_ms": b.median_ms, "gflops": b.gflops,
            "error": b.error}


def problem_entry(problem, results: list[Result], *, space_size: int, full_space_size: int,
                  measured: int, cached: int, seconds: float,
                  stage_seconds: dict | None = None, phases: list[dict] | None = None) -> dict:
    entry = {**problem.to_dict(), "space_size": space_size, "full_space_size": full_space_size,
             "evaluated": len(results), "measured": measured, "cached": cached,
             "seconds": round(seconds, 6), "best": best_entry(results),
             "results": [r.to_dict() for r in results]}
    if stage_seconds is not None:
        entry["stage_seconds"] = {k: round(v, 3) for k, v in stage_seconds.items()}
    if phases is not None:
        entry["phases"] = [{"at": int(p["at"]), "label": str(p["label"])} for p in phases]
    return entry


def make_report(backend: str, device, strategy: str, problems: list[dict]) -> dict:
    return {"schema": REPORT_SCHEMA, "backend": backend,
            "device": device.to_dict() if hasattr(device, "to_dict") else dict(device),
            "strategy": strategy,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "problems": problems}


def check_report(doc: dict) -> None:
    """Raise ValueError if `doc` lacks a field of the item-7 shape."""
    for k in ("schema", "backend", "device", "strategy", "created", "problems"):
        if k not in doc:
            raise ValueError(f"report lacks {k!r}")
    for i, p in enumerate(doc["problems"]):
        missing = [k for k in PROBLEM_KEYS if k not in p]
        if missing:
            raise ValueError(f"report problem {i} lacks {missing}")
        if p["best"] is not None:
            for k in ("config", "median_ms", "gflops", "error"):
                if k not in p["best"]:
                    raise ValueError(f"report problem {i} best lacks {k!r}")


def write_report(path, doc: dict, *, protect=()) -> None:
    """Write through the one output writer (shadertune.core.atomic): whole or not at all, a
    reader never sees half a report; `protect`: files it may never replace (the store's)."""
    write_json(path, doc, indent=1, protect=protect)
