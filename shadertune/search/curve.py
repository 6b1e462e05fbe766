"""The best-so-far curve of a search: how the best time fell with evaluations and seconds.

Read from the report's results (Result.to_dict(): timestamp, status, times), in
evaluation order.  A point is kept where the best time improves.  Seconds count
from `t0` (the search's start); a result replayed from the store keeps the
timestamp of its first measurement, so it counts at 0 s.
"""
from __future__ import annotations

import statistics


def best_so_far(results: list[dict], t0: float | None = None) -> list[dict]:
    """[{"evals", "seconds", "best_ms"}, ...] at each improvement of the best time."""
    if not results:
        return []
    start = min(r["timestamp"] for r in results) if t0 is None else t0
    out: list[dict] = []
    best = None
    for i, r in enumerate(results, 1):
        ms = _median_ok(r)
        if ms is not None and (best is None or ms < best):
            best = ms
            out.append({"evals": i, "seconds": round(max(0.0, r["timestamp"] - start), 3),
                        "best_ms": ms})
    return out


def best_within(curve: list[dict], evals: int) -> float | None:
    """The best time after the first `evals` evaluations (None: nothing yet)."""
    got = [p["best_ms"] for p in curve if p["evals"] <= evals]
    return got[-1] if got else None


def _median_ok(r: dict) -> float | None:
    if r.get("status") != "ok" or not r.get("times_ms"):
        return None
    return statistics.median(r["times_ms"])
