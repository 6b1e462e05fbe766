"""Is a store healthy?  `python -m shadertune.db check`, and the integrity check every
store gets before its first write and before a reader answers from it.

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
It returns a Health whose state is one of STATES, each with its exit status (EXIT):
healthy (0), damaged (1), busy (3: another connection held a lock for longer than the
wait; the store may well be healthy) or unchecked (4: this user cannot read it as the
check needs, e.g. a write-ahead log in a folder it may not write).  A store that is
busy or cannot be checked is never called damaged, and never advised deleted.

ensure_healthy(conn, path) runs SQLite's integrity_check (step 2) and raises
StoreDamaged when it finds anything (StoreBusy while another connection locks the
store).  A Store runs it once before its first write and once before it first
answers a read, and the tools that write (search, db import and prune, perfmodel
sample) right after opening one, so that a damaged store is refused before any
work: nothing is ever written into a damaged store (a new result would land beside
pages that are gone, and a later check could no longer tell the old damage from the
new), and no reader answers from one (`auto` warns and takes the default config).
Why integrity_check and not quick_check: quick_check skips the index cross-checks,
and a store truncated at an index page passes it ("row 5 missing from index
results_ok" is integrity_check's alone) while a reader that walks that index misses
rows.  It costs about 2.3x quick_check (7.3 against 3.1 ms per MB on a 46 MB store,
under load on the 2-core machine; PRAGMA integrity_check(N) bounds the errors
listed, not the work: the same time); notes/store.md.  A verdict is kept per store
file state (the files' identity, size and modification time, the write-ahead log's
too: verified_stamp), so a process pays for it once per state of the store.
"""
from __future__ import annotations

import json
import os
import pathlib
import sqlite3
import stat
import urllib.parse
from dataclasses import dataclass, field

from ..core.problem import Problem
from ..core.result import STATUSES, Result
from . import schema
from .errors import StoreBusy, StoreDamaged, StoreError

SQLITE_MAGIC = b"SQLite format 3\x00"
EXAMPLES = 3                 # rows named per finding
_FINITE = "({c} < 1e308 AND {c} > -1e308)"   # SQLite keeps inf as a REAL; NaN becomes NULL
STATES = ("healthy", "damaged", "busy", "unchecked")
EXIT = {"healthy": 0, "damaged": 1, "busy": 3, "unchecked": 4}
WAIT = 5.0                   # seconds check waits for another connection's lock


@dataclass
class Health:
    path: pathlib.Path
    findings: list[str] = field(default_factory=list)
    results: int | None = None
    version: int | None = None
    # busy / unchecked: why the check could not run (the store is not judged)
    not_judged: tuple[str, str] | None = None
    note: str = ""               # how it was read, where that matters (immutable)

    @property
    def healthy(self) -> bool:
        return self.not_judged is None and not self.findings

    @property
    def state(self) -> str:
        if self.not_judged is not None:
            return self.not_judged[0]
        return "damaged" if self.findings else "healthy"

    @property
    def exit_status(self) -> int:
        return EXIT[self.state]

    def verdict(self) -> str:
        if self.not_judged is not None:
            state, why = self.not_judged
            what = "busy" if state == "busy" else "not checked"
            return f"store {self.path}: {what}: {why}"
        if self.healthy:
            return (f"store {self.path}: healthy ({self.results} results, schema version "
                    f"{self.version}){self.note}")
        n = len(self.findings)
        return (f"store {self.path}: damaged ({n} problem{'s' * (n > 1)} found): export what "
                f"can still be read (python -m shadertune.db --db {self.path} export -o "
                f"rescued.jsonl), import it into a new store, or delete it (its results can "
                f"be re-measured)")


def _errname(e: BaseException) -> str:
    return getattr(e, "sqlite_errorname", "") or ""


def _is_busy(e: BaseException) -> bool:
    return _errname(e).startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def _is_refused(e: BaseException) -> bool:
    """SQLite could not open or read the file as asked (permissions, a read-only
    place): nothing about the store's content."""
    return _errname(e).startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM",
                                   "SQLITE_AUTH"))


def _busy_why(e, wait: float) -> str:
    return (f"another connection holds a lock on it ({e}; waited {wait:g} s); it may well "
            f"be healthy: check it again when the writer is done (--wait SECONDS waits longer)")


def _connect(path: pathlib.Path, wait: float, immutable: bool = False) -> sqlite3.Connection:
    wait = min(wait, 86400.0)            # SQLite's busy timeout is an int of milliseconds
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    conn = sqlite3.connect(uri + ("&immutable=1" if immutable else ""), uri=True,
                           isolation_level=None, timeout=wait)
    conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    return conn


def _file_findings(path: pathlib.Path, h: Health) -> list[str]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return [f"{path}: no such file"]
    except PermissionError as e:
        h.not_judged = ("unchecked", f"this user cannot reach it ({e.strerror or e})")
        return []
    except OSError as e:
        return [f"{path}: cannot be reached ({e.strerror or e})"]
    if not stat.S_ISREG(st.st_mode):
        return [f"{path}: not a regular file"]
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except PermissionError as e:
        h.not_judged = ("unchecked", f"this user cannot read it ({e.strerror or e})")
        return []
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
    """PRAGMA integrity_check's findings (none: healthy).  A lock held by another
    connection or a file SQLite may not open as asked is raised, not a finding."""
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as e:
        if _is_busy(e) or _is_refused(e):
            raise
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


def _wal_has_content(path: pathlib.Path) -> bool:
    try:
        return os.path.getsize(str(path) + "-wal") > 0
    except OSError:
        return False


def _open_for_check(h: Health, wait: float) -> sqlite3.Connection | None:
    """A read-only connection that reads the store as its writers see it, or None with
    h.not_judged (busy, or unchecked) or a finding saying why not.  mode=ro reads a WAL
    store only where the -shm file exists or can be made; in a folder this user may not
    write (a shared store, a read-only mount) the store is read as immutable, which is
    the store exactly when its write-ahead log is empty: otherwise its newest pages are
    in the log, unreadable here, and the check cannot run."""
    for immutable in (False, True):
        try:
            conn = _connect(h.path, wait, immutable)
        except sqlite3.Error as e:
            h.findings.append(f"SQLite cannot open it: {e}")
            return None
        try:
            conn.execute("PRAGMA user_version").fetchone()
            if immutable:
                h.note = (" (read as immutable: SQLite cannot open it read-only as usual in "
                          "this place, a read-only folder or mount, and its write-ahead log is "
                          "empty)")
            return conn
        except sqlite3.DatabaseError as e:
            conn.close()
            if _is_busy(e):
                h.not_judged = ("busy", _busy_why(e, wait))
                return None
            if not _is_refused(e) or immutable:
                if _is_refused(e):
                    h.not_judged = ("unchecked", f"SQLite cannot read it here ({e})")
                else:
                    h.findings.append(f"SQLite cannot open it: {e}")
                return None
            if _wal_has_content(h.path):
                h.not_judged = ("unchecked", (
                    f"its write-ahead log ({h.path.name}-wal) holds its newest changes, which SQLite "
                    f"reads only through a -shm file this user cannot make ({e}): check it as a "
                    f"user who may write its folder, or have its owner checkpoint it"))
                return None
    return None


def check_store(path, wait: float = WAIT) -> Health:
    """Every check in the module docstring, reading the store only; a lock held by
    another connection is waited for `wait` seconds, then the store is called busy."""
    h = Health(pathlib.Path(path))
    h.findings = _file_findings(h.path, h)
    if h.findings or h.not_judged:
        return h
    conn = _open_for_check(h, wait)
    if conn is None:
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
        if _is_busy(e):
            h.findings, h.not_judged = [], ("busy", _busy_why(e, wait))
        elif _is_refused(e):
            h.findings, h.not_judged = [], ("unchecked", f"SQLite cannot read it here ({e})")
        else:
            h.findings.append(f"SQLite: {e}")
    finally:
        conn.close()
    return h


# --- the check before a write or a read --------------------------------------------

_verified: dict[str, tuple] = {}      # the store's real path -> its stamp when found healthy


def verified_stamp(path) -> tuple | None:
    """The state of a store's files a verdict holds for: identity, size and modification
    time of the store and of its write-ahead log (None: the store is not there)."""
    out = []
    for name in (str(path), str(path) + "-wal"):
        try:
            st = os.stat(name)
        except OSError:
            if not out:
                return None
            out.append(None)
            continue
        out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def ensure_healthy(conn, path) -> None:
    """SQLite's integrity_check on an open connection: StoreDamaged when the store is
    damaged, StoreBusy while another connection locks it past the connection's busy
    timeout; kept per state of the store's files (verified_stamp)."""
    key = os.path.realpath(path)
    stamp = verified_stamp(path)
    if stamp is not None and _verified.get(key) == stamp:
        return
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as e:
        if _is_busy(e):
            raise StoreBusy(f"store {path} is busy: another connection holds a lock on it ({e}); "
                            f"nothing was done: try again when it is free") from None
        if _is_refused(e):
            raise StoreError(f"store {path} cannot be read here ({e})") from None
        rows = [str(e)]
    if rows != ["ok"]:
        _verified.pop(key, None)
        more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
        first = rows[0].replace("\n", "; ")
        raise StoreDamaged(f"store {path} is damaged ({first}{more}): nothing is written to it "
                           f"or read from it; python -m shadertune.db --db {path} check says more")
    if stamp is not None:
        if len(_verified) > 64:
            _verified.clear()
        _verified[key] = stamp


__all__ = ["EXIT", "Health", "STATES", "check_store", "ensure_healthy", "verified_stamp"]
