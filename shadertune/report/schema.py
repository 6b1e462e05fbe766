"""Load and validate a run report (schema 1, written by `python -m shadertune.search`).

Extra fields are tolerated; a missing or mistyped required field is refused
with a ReportError naming the file and the field's path, e.g.
    run.json: problems[1].best.gflops: missing required field
The file is read by the one bounded JSON reader (shadertune.jsonio: sizes,
integer digits, nesting); a required number must be finite (NaN and Infinity,
which that reader reads as floats, are refused here).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..result import STATUSES

SCHEMA = 1

_NUM = (int, float)
_NONE = type(None)


class ReportError(ValueError):
    """A file is not a valid report; str(e) is one line naming the file and the field."""


def _tname(t) -> str:
    ts = t if isinstance(t, tuple) else (t,)
    names = {int: "int", float: "number", str: "string", bool: "bool", dict: "object",
             list: "array", _NONE: "null", Mapping: "object"}
    return " or ".join(dict.fromkeys(names.get(x, x.__name__) for x in ts))


def _check(obj, field: str, types, where: str, src: str):
    if not isinstance(obj, Mapping):
        raise ReportError(f"{src}: {where or 'top level'} must be an object, got {_tname(type(obj))}")
    path = f"{where}.{field}" if where else field
    if field not in obj:
        raise ReportError(f"{src}: {path}: missing required field")
    v = obj[field]
    types = types if isinstance(types, tuple) else (types,)
    # bool is an int in Python; a count given as true/false is still wrong.
    if (isinstance(v, bool) and bool not in types) or not isinstance(v, types):
        raise ReportError(f"{src}: {path}: expected {_tname(types)}, got {_tname(type(v))} ({v!r:.60})")
    if isinstance(v, float) and not math.isfinite(v):
        # NaN and Infinity read as floats (shadertune.jsonio); no report number may be one
        raise ReportError(f"{src}: {path}: expected a finite number, got {v!r}")
    return v


_PROBLEM_KEYS = (("M", int), ("N", int), ("K", int), ("dtype", str), ("trans_a", bool), ("trans_b", bool))
_RESULT_KEYS = (("backend", str), ("device", (str, Mapping)), ("problem", Mapping), ("config", Mapping),
                ("status", str), ("times_ms", list), ("median_ms", _NUM + (_NONE,)),
                ("gflops", _NUM + (_NONE,)), ("compile_ms", _NUM + (_NONE,)),
                ("error", _NUM + (_NONE,)), ("message", (str, _NONE)), ("timestamp", _NUM + (str,)))


def _validate_problem(p, where: str, src: str):
    for k, t in _PROBLEM_KEYS:
        _check(p, k, t, where, src)
    for k in ("space_size", "evaluated", "measured", "cached"):
        _check(p, k, int, where, src)
    _check(p, "full_space_size", (int, _NONE), where, src)
    _check(p, "seconds", _NUM, where, src)
    best = _check(p, "best", (Mapping, _NONE), where, src)
    if best is not None:
        w = f"{where}.best"
        _check(best, "config", Mapping, w, src)
        _check(best, "median_ms", _NUM, w, src)
        _check(best, "gflops", _NUM, w, src)
        _check(best, "error", _NUM + (_NONE,), w, src)
    results = _check(p, "results", list, where, src)
    for j, r in enumerate(results):
        w = f"{where}.results[{j}]"
        for k, t in _RESULT_KEYS:
            _check(r, k, t, w, src)
        for k, t in _PROBLEM_KEYS:
            _check(r["problem"], k, t, f"{w}.problem", src)
        if r["status"] not in STATUSES:
            raise ReportError(f"{src}: {w}.status: {r['status']!r} is not one of {', '.join(STATUSES)}")
    if "baselines" in p:
        base = _check(p, "baselines", Mapping, where, src)
        for name, b in base.items():
            w = f"{where}.baselines.{name}"
            _check(b, "median_ms", _NUM + (_NONE,), w, src)
            _check(b, "gflops", _NUM + (_NONE,), w, src)
    if "roofline" in p and p["roofline"] is not None:
        roof = _check(p, "roofline", Mapping, where, src)
        _check(roof, "gflops", _NUM, f"{where}.roofline", src)
        _check(roof, "bound", str, f"{where}.roofline", src)


def validate(d, src: str = "<report>") -> dict:
    """Return `d` if it is a schema-1 report, else raise ReportError naming the field."""
    if not isinstance(d, Mapping):
        raise ReportError(f"{src}: not a report: expected a JSON object, got {_tname(type(d))}")
    if "schema" not in d:
        raise ReportError(f"{src}: not a report: missing required field 'schema'"
                          + (" (this looks like a ceilings file)" if d.get("kind") == "roofline" else ""))
    schema = _check(d, "schema", int, "", src)
    if schema != SCHEMA:
        raise ReportError(f"{src}: schema: version {schema} is not supported (expected {SCHEMA})")
    if d.get("kind") == "roofline":
        raise ReportError(f"{src}: not a report: this is a ceilings file (kind 'roofline')")
    _check(d, "backend", str, "", src)
    dev = _check(d, "device", Mapping, "", src)
    for k in ("backend", "vendor", "renderer", "driver"):
        _check(dev, k, str, "device", src)
    _check(dev, "limits", Mapping, "device", src)
    _check(d, "strategy", str, "", src)
    _check(d, "created", str, "", src)
    problems = _check(d, "problems", list, "", src)
    for i, p in enumerate(problems):
        _validate_problem(p, f"problems[{i}]", src)
    if d.get("ceilings") is not None:
        _check(d, "ceilings", Mapping, "", src)
    return d


def load(path) -> dict:
    """Read and validate a report file; every failure is a one-line ReportError."""
    from ..jsonio import read_json
    return validate(read_json(path, ReportError, "a report"), str(path))


def problem_key(p: Mapping) -> tuple:
    """What identifies a problem across reports: (M, N, K, dtype, trans_a, trans_b)."""
    return (p["M"], p["N"], p["K"], p["dtype"], p["trans_a"], p["trans_b"])


def problem_label(p: Mapping) -> str:
    """A report's problem as every table and message writes one (Problem.label)."""
    from ..problem import Problem
    return Problem.from_dict(p).label
