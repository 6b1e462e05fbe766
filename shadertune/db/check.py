"""Is a store healthy?  `python -m shadertune.db check`, and the quick check every store
gets when it is opened for writing.

check_store(path) looks at, in order:
1. the file: there, a regular file, SQLite's header, a whole number of pages;
2. SQLite's PRAGMA integrity_check: every page, every b-tree, every index against its
   table, NOT NULL and CHECK constraints.  A truncated or overwritten file shows here
   (a store truncated by a few pages still opens where its newest pages are in the
   write-ahead log, and only the pages that are gone fail, when something reads them);
3. the schema: a user_version this shadertune reads, the results table with every
   column of that version (and the space-size cache from version 3);
4. the results' own invariants: a known status; times, errors, GFLOP/s and seconds
   finite and not negative (times positive); an ok result timed; sizes, dtype and
   transposes a problem's; the problem key made of its columns; the seed >= 0; the
   row's schema the store's; and each result's JSON decoding to a Result whose
   backend, device, problem, config and status are the row's.
It returns a Health: the findings (one line each) and the verdict.

quick(conn, path) runs PRAGMA quick_check and raises StoreError when it finds
anything.  A Store runs it once before its first write, and the tools that write
(search, db import and prune, perfmodel sample) right after opening one, so that a
damaged store is refused before any work: nothing is ever written into a damaged
store (a new result would land beside pages that are gone, and a later integrity
check could no longer tell the old damage from the new).  Readers (auto, the
listings) do not pay for it.  quick_check reads every
page but skips the index cross-checks: about 1 ms per MB of store here (notes/
reliability.md), 36 ms for a 35 MB store of 20,904 results.
"""
from __future__ import annotations

import json
import os
import pathlib
import sqlite3
import stat
import urllib.parse
from dataclasses import dataclass, field

from ..problem import Problem
from ..result import STATUSES, Result
from . import schema
from .errors import StoreError

SQLITE_MAGIC = b"SQLite format 3\x00"
EXAMPLES = 3                 # rows named per finding
_FINITE = "({c} < 1e308 AND {c} > -1e308)"   # SQLite keeps inf as a REAL; NaN becomes NULL


@dataclass
class Health:
    path: pathlib.Path
    findings: list[str] = field(default_factory=list)
    results: int | None = None
    version: int | None = None

    @property
    def healthy(self) -> bool:
        return not self.findings

    def verdict(self) -> str:
        if self.healthy:
            return (f"store {self.path}: healthy ({self.results} results, schema version "
                    f"{self.version})")
        n = len(self.findings)
        return (f"store {self.path}: damaged ({n} problem{'s' * (n > 1)} found): export what "
                f"can still be read (python -m shadertune.db --db {self.path} export -o "
                f"rescued.jsonl), import it into a new store, or delete it (its results can "
                f"be re-measured)")


def _connect_read_only(path: pathlib.Path) -> sqlite3.Connection:
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def _file_findings(path: pathlib.Path) -> list[str]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return [f"{path}: no such file"]
    except OSError as e:
        return [f"{path}: cannot be reached ({e.strerror or e})"]
    if not stat.S_ISREG(st.st_mode):
        return [f"{path}: not a regular file"]
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as e:
        return [f"{path}: cannot be read ({e.strerror or e})"]
    if st.st_size == 0:
        return [f"{path}: empty (0 bytes): not a store"]
    if head[:16] != SQLITE_MAGIC or len(head) < 100:
        return [f"{path}: not an SQLite database (no SQLite header)"]
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page and st.st_size % page:
        return [f"{path}: {st.st_size} bytes is not a whole number of {page}-byte pages "
                f"(the file was cut short or overwritten)"]
    return []


def _sqlite_findings(conn) -> list[str]:
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as e:
        return [f"SQLite integrity check: {e}"]
    return [] if rows == ["ok"] else [f"SQLite integrity check: {r}" for r in rows]


def _schema_findings(conn, h: Health) -> list[str]:
    v = conn.execute("PRAGMA user_version").fetchone()[0]
    h.version = v
    if v > schema.SCHEMA_VERSION:
        return [f"schema version {v} is newer than this shadertune's {schema.SCHEMA_VERSION}: "
                f"check it with a newer shadertune"]
    if v != schema.SCHEMA_VERSION and v not in schema.READABLE_AS_IS:
        return [f"schema version {v} is not a shadertune store's"]
    cols = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    if not cols:
        return ["no results table"]
    need = schema.REQUIRED_COLUMNS + (schema.ADDED_COLUMNS if v >= 3 else ())
    out = [f"the results table lacks the column {c}" for c in need if c not in cols]
    if v >= 3 and not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                   "name = 'space_sizes'").fetchone():
        out.append("no space_sizes table (schema version 3 has one)")
    return out


def _rules(version: int) -> list[tuple[str, str]]:
    """(what is wrong, SQL condition of a row where it is) for every column rule."""
    f = _FINITE.format
    statuses = ", ".join(f"'{s}'" for s in STATUSES)
    rules = [
        (f"status not one of {', '.join(STATUSES)}", f"status NOT IN ({statuses})"),
        ("median time not a positive finite number",
         f"median_ms IS NOT NULL AND NOT (median_ms > 0 AND {f(c='median_ms')})"),
        ("status ok without a time", "status = 'ok' AND median_ms IS NULL"),
        ("GFLOP/s negative or not finite", f"gflops IS NOT NULL AND NOT (gflops >= 0 AND {f(c='gflops')})"),
        ("error negative or not finite", f"error IS NOT NULL AND NOT (error >= 0 AND {f(c='error')})"),
        ("written time not a positive finite number",
         f"NOT (typeof(written) IN ('real', 'integer') AND written > 0 AND {f(c='written')})"),
        ("M, N or K not a non-negative integer",
         "NOT (typeof(M) = 'integer' AND typeof(N) = 'integer' AND typeof(K) = 'integer' "
         "AND M >= 0 AND N >= 0 AND K >= 0)"),
        ("dtype not float32 or float64", "dtype NOT IN ('float32', 'float64')"),
        ("trans_a or trans_b not 0 or 1", "trans_a NOT IN (0, 1) OR trans_b NOT IN (0, 1)"),
        (f"row schema not the store's version {version}", f"schema != {version}"),
    ]
    if version >= 3:
        rules += [("seconds negative or not finite",
                   f"seconds IS NOT NULL AND NOT (seconds >= 0 AND {f(c='seconds')})"),
                  ("seed not an integer >= 0 (an argument error stored as a verdict?)",
                   "seed IS NOT NULL AND NOT (typeof(seed) = 'integer' AND seed >= 0)")]
    return rules


def _examples(conn, where: str) -> tuple[int, list[int]]:
    n = conn.execute(f"SELECT COUNT(*) FROM results WHERE {where}").fetchone()[0]
    ids = [r[0] for r in conn.execute(f"SELECT rowid FROM results WHERE {where} "
                                      f"ORDER BY rowid LIMIT {EXAMPLES}")] if n else []
    return n, ids


def _finding(what: str, n: int, ids: list[int]) -> str:
    rows = ", ".join(map(str, ids)) + (", ..." if n > len(ids) else "")
    return f"{n} result{'s' * (n > 1)}: {what} (rowid {rows})"


def _row_findings(conn, version: int) -> list[str]:
    out = []
    for what, where in _rules(version):
        n, ids = _examples(conn, where)
        if n:
            out.append(_finding(what, n, ids))
    bad: dict[str, list[int]] = {}
    for rowid, backend, device, problem, config, status, M, N, K, dtype, ta, tb, text in conn.execute(
            "SELECT rowid, backend, device, problem, config, status, M, N, K, dtype, trans_a, "
            "trans_b, result FROM results"):
        why = _row_disagreement(backend, device, problem, config, status, M, N, K, dtype, ta, tb, text)
        if why is not None:
            bad.setdefault(why, []).append(rowid)
    for why, ids in bad.items():
        out.append(_finding(why, len(ids), ids[:EXAMPLES]))
    return out


def _row_disagreement(backend, device, problem, config, status, M, N, K, dtype, ta, tb, text) -> str | None:
    try:
        key = Problem(M, N, K, dtype, bool(ta), bool(tb), Problem.batch_of_key(str(problem))).key
    except (TypeError, ValueError):
        key = None                   # the column rules above name it
    if key is not None and key != problem:
        return "problem key not made of its M, N, K, dtype and transposes"
    try:
        r = Result.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError):
        return "result JSON does not decode to a Result"
    if (r.backend, r.device, r.problem.key, r.config.key, r.status) != (backend, device, problem,
                                                                          config, status):
        return "result JSON disagrees with its row's backend, device, problem, config or status"
    return None


def check_store(path) -> Health:
    """Every check in the module docstring, reading the store only."""
    h = Health(pathlib.Path(path))
    h.findings = _file_findings(h.path)
    if h.findings:
        return h
    try:
        conn = _connect_read_only(h.path)
    except sqlite3.Error as e:
        h.findings.append(f"SQLite cannot open it: {e}")
        return h
    try:
        h.findings += _sqlite_findings(conn)
        if h.findings:
            return h
        h.findings += _schema_findings(conn, h)
        if h.findings:
            return h
        h.results = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        h.findings += _row_findings(conn, h.version)
    except sqlite3.DatabaseError as e:
        h.findings.append(f"SQLite: {e}")
    finally:
        conn.close()
    return h


def quick(conn, path) -> None:
    """PRAGMA quick_check on an open connection; StoreError when the store is damaged."""
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as e:
        rows = [str(e)]
    if rows != ["ok"]:
        more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
        raise StoreError(f"store {path} is damaged ({rows[0]}{more}): nothing is written to it; "
                         f"python -m shadertune.db --db {path} check says more")


__all__ = ["Health", "check_store", "quick"]
