"""The measured results of one problem, from whatever holds them.

    m = measured("tune.sqlite", "1024x1024x1024")          # a store
    m = measured("gl-1024.json", "1024x1024x1024")         # a search report (schema 1)
    m = measured("bench-cuda.json", "256x256x60000 NT")    # a tuned candidate list (scripts/bench-cuda)

A problem is named as "MxNxK", optionally followed by the dtype (f32, f64,
float32, float64) and the operation (NN, NT, TN, TT), separated by spaces or
colons; a name that fits several problems of the source is refused with the
list of those it fits.  A store can hold several backends, devices and
template versions: `backend` and `device` (a part of the renderer's name)
choose; of several template versions the newest is read (a landscape drawn
across two versions of the kernels would mix two different programs).

Every point keeps its status; only `ok` ones carry GFLOP/s (a slow, wrong or
failed config is a point without a value).
"""
from __future__ import annotations

import math
import pathlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.problem import Problem
from ..core.result import OK
from .schema import ReportError, problem_label, validate

_SQLITE_MAGIC = b"SQLite format 3\x00"
_DTYPE_NAMES = {"f32": "float32", "float32": "float32", "f64": "float64", "float64": "float64"}


@dataclass
class Point:
    """One evaluated config: its knobs, its status and, when it is ok, its speed."""
    config: dict
    status: str
    gflops: float | None            # None unless status is ok and it was timed
    median_ms: float | None = None
    timestamp: float | None = None
    timed: bool = False             # it has timed runs (a slow config was abandoned untimed)


@dataclass
class Measured:
    """The points of one problem on one backend and device, in evaluation order."""
    source: str
    backend: str
    device: str                     # the renderer, as a reader names the device
    problem: dict                   # M, N, K, dtype, trans_a, trans_b
    points: list[Point]
    notes: list[str] = field(default_factory=list)
    # every config of the pruned space was evaluated (a complete exhaustive search): a
    # place without a point is outside the space, not a place the search skipped
    complete: bool = False
    candidates: bool = False        # a tuned candidate list, not a search

    @property
    def label(self) -> str:
        return problem_label(self.problem)

    @property
    def missing(self) -> tuple[str, str]:
        """(a cell's word, a legend's words) for a place without a point."""
        if self.complete:
            return "pruned", "outside the pruned space"
        if self.candidates:
            return "not tried", "not among the tuned candidates"
        return "not run", "never evaluated"


# --- problem names ----------------------------------------------------------

def parse_problem(spec: str) -> dict:
    """'1024x1024x1024', '2560x16x2560 TN', '64x64x60000:f32:NT' -> the fields it names; a
    problem as the tables write it (Problem.label: '64x48x32 float32', with NT, TN or TT
    when an operand is transposed) names that one problem."""
    parts = [p for p in re.split(r"[\s:]+", str(spec).strip()) if p]
    try:
        size = Problem.parse(parts[0]) if parts else None      # the size syntax of every tool
    except (TypeError, ValueError):
        size = None
    if size is None:
        raise ReportError(f"--problem {spec!r}: expected MxNxK (or N), optionally with a "
                          f"dtype and an operation, e.g. 1024 or '2560x16x2560 TN'")
    out = {"M": size.M, "N": size.N, "K": size.K}
    if size.batch > 1:
        out["batch"] = size.batch
    for part in parts[1:]:
        if part.lower() in _DTYPE_NAMES:
            out["dtype"] = _DTYPE_NAMES[part.lower()]
        elif re.fullmatch(r"[NT]{2}", part.upper()):
            out["trans_a"], out["trans_b"] = part.upper()[0] == "T", part.upper()[1] == "T"
        else:
            raise ReportError(f"--problem {spec!r}: {part!r} is neither a dtype (f32, f64) nor an "
                              f"operation (NN, NT, TN, TT)")
    if "dtype" in out and "trans_a" not in out:
        # a problem as every table writes it (Problem.label: '64x48x32 float32') names NN
        out["trans_a"] = out["trans_b"] = False
    return out


def pick_problem(problems: Sequence[Mapping], spec: str | None, src: str) -> Mapping:
    """The one problem `spec` names (the only one, when spec is None)."""
    want = parse_problem(spec) if spec else {}
    fits = [p for p in problems if all(p.get(k, 1 if k == "batch" else None) == v
                                       for k, v in want.items())]
    names = list(dict.fromkeys(problem_label(p) for p in problems))
    if not names:
        raise ReportError(f"{src}: holds no results")
    if not fits:
        raise ReportError(f"{src}: no results for {spec!r}; it holds {_few(names)}")
    labels = list(dict.fromkeys(problem_label(p) for p in fits))
    if len(labels) > 1:
        what = f"{spec!r} fits" if spec else "give --problem: it holds"
        raise ReportError(f"{src}: {what} {_few(labels)}")
    return fits[0]


def _few(names: Sequence[str], n: int = 8) -> str:
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


# --- sources ----------------------------------------------------------------

def measured(path, problem: str | None = None, *, backend: str | None = None,
             device: str | None = None) -> Measured:
    """The results of one problem in a store, a search report or a candidate-list file."""
    p = pathlib.Path(path)
    try:
        with open(p, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        raise ReportError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{p}: not a file") from None
    except OSError as e:            # a folder on its path that cannot be entered, ...
        raise ReportError(f"{p}: cannot read ({e.strerror or e})") from None
    if head == _SQLITE_MAGIC:
        return _from_store(p, problem, backend, device)
    from ..core.jsonio import read_json
    doc = read_json(p, ReportError, "a report, a store or a candidate-list file")
    if isinstance(doc, Mapping) and "schema" in doc:
        return _from_report(validate(doc, str(p)), str(p), problem, backend, device)
    if isinstance(doc, Mapping) and isinstance(doc.get("rows"), list) and "candidates_per_problem" in doc:
        return _from_candidates(doc, str(p), problem, backend, device)
    raise ReportError(f"{p}: not a report (schema 1), a store or a candidate-list file")


def _check_backend(src: str, have: str, want: str | None) -> None:
    if want is not None and have != want:
        raise ReportError(f"{src}: holds {have} results, not {want}")


def _check_device(src: str, have: str, want: str | None) -> None:
    if want is not None and want.lower() not in have.lower():
        raise ReportError(f"{src}: its device is {have!r}, not {want!r}")


def _point(config: Mapping, status: str, median_ms, flops: int, timestamp=None, timed=None) -> Point:
    ok = status == OK and isinstance(median_ms, (int, float)) and median_ms > 0 and math.isfinite(median_ms)
    return Point(config=dict(config), status=status,
                 gflops=flops / (median_ms * 1e-3) / 1e9 if ok else None,
                 median_ms=median_ms if isinstance(median_ms, (int, float)) else None,
                 timestamp=timestamp, timed=bool(ok if timed is None else timed))


def result_point(r: Mapping, flops: int) -> Point:
    """A Point from a Result.to_dict() (a report's or a store's)."""
    return _point(r["config"], r["status"], r.get("median_ms"), flops, _seconds(r.get("timestamp")),
                  timed=bool(r.get("times_ms")))


def _seconds(ts) -> float | None:
    """A timestamp as seconds since the epoch (reports may carry ISO text)."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    if isinstance(ts, str):
        import datetime
        try:
            return datetime.datetime.fromisoformat(ts).timestamp()
        except ValueError:
            return None
    return None


def _from_report(doc: Mapping, src: str, problem, backend, device) -> Measured:
    _check_backend(src, doc["backend"], backend)
    _check_device(src, doc["device"]["renderer"], device)
    p = pick_problem([q for q in doc["problems"] if q["results"]], problem, src)
    flops = Problem.from_dict(p).flops
    return Measured(src, doc["backend"], doc["device"]["renderer"], _problem_fields(p),
                    [result_point(r, flops) for r in p["results"]],
                    complete=doc["strategy"] == "exhaustive" and 0 < p["space_size"] <= p["evaluated"])


def _problem_fields(p: Mapping) -> dict:
    return {k: p[k] for k in ("M", "N", "K", "dtype", "trans_a", "trans_b")}


def _from_candidates(doc: Mapping, src: str, problem, backend, device) -> Measured:
    """A tuned candidate list (scripts/bench-cuda writes them): per row a problem and
    its timed trials; the backend and device are the file's own."""
    dev = doc.get("device") or {}
    have = dev.get("backend")
    if not isinstance(have, str):
        raise ReportError(f"{src}: not a candidate-list file: its device names no backend")
    _check_backend(src, have, backend)
    renderer = str(dev.get("renderer", f"{have} device"))
    _check_device(src, renderer, device)
    rows = [r for r in doc["rows"] if isinstance(r, Mapping) and isinstance(r.get("problem"), Mapping)
            and r.get("trials")]
    try:
        shapes = [{**Problem.from_dict(r["problem"]).to_dict(), "_row": r} for r in rows]
    except (KeyError, TypeError, ValueError) as e:
        raise ReportError(f"{src}: not a candidate-list file: a row's problem is unreadable ({e})") from None
    row = pick_problem(shapes, problem, src)["_row"]
    flops = Problem.from_dict(row["problem"]).flops
    try:
        points = [_point(t["config"], t["status"], t.get("median_ms"), flops) for t in row["trials"]]
    except (KeyError, TypeError) as e:
        raise ReportError(f"{src}: not a candidate-list file: a trial lacks {e}") from None
    return Measured(src, have, renderer, Problem.from_dict(row["problem"]).to_dict(), points,
                    [f"{len(points)} model-ranked candidates of a candidate-list run, not a search"],
                    candidates=True)


def _from_store(path: pathlib.Path, problem, backend, device) -> Measured:
    from ..db import Store, StoreError
    src = str(path)
    try:
        with Store(path, readonly=True) as store:     # a report only reads
            rows = store.conn.execute(
                "SELECT backend, device, M, N, K, dtype, trans_a, trans_b, template_hash, "
                "COUNT(*), MAX(written) FROM results GROUP BY backend, device, problem, template_hash "
                "ORDER BY MAX(written)").fetchall()
            groups = [{"backend": b, "device": d, "M": M, "N": N, "K": K, "dtype": dt,
                       "trans_a": bool(ta), "trans_b": bool(tb), "hash": h, "count": n}
                      for b, d, M, N, K, dt, ta, tb, h, n, _ in rows]
            groups = [g for g in groups if backend is None or g["backend"] == backend]
            groups = [g for g in groups if device is None or device.lower() in g["device"].lower()]
            if not groups:
                raise ReportError(f"{src}: holds no results" + (f" for backend {backend}" if backend else "")
                                  + (f" on a device named like {device!r}" if device else ""))
            chosen = pick_problem(groups, problem, src)
            same = [g for g in groups if _problem_fields(g) == _problem_fields(chosen)]
            for what, flag in (("backend", "--backend"), ("device", "--device")):
                seen = list(dict.fromkeys(g[what] for g in same))
                if len(seen) > 1:
                    raise ReportError(f"{src}: {problem_label(chosen)} was measured on "
                                      f"several {what}s ({_few(seen)}); choose one with {flag}")
            newest = same[-1]
            notes = [f"{sum(g['count'] for g in same[:-1])} results of {len(same) - 1} older template "
                     f"version(s) left out"] if len(same) > 1 else []
            prob = Problem(**_problem_fields(newest))
            results = store.results(newest["backend"], newest["device"], prob, newest["hash"])
    except StoreError as e:
        raise ReportError(str(e)) from None
    points = [result_point(r.to_dict(), prob.flops) for r in results]
    renderer = newest["device"].split(" | ")[0]
    return Measured(src, newest["backend"], renderer, prob.to_dict(), points, notes)
