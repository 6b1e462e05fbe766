"""SQLite store of every Result: resumable searches and the best config per key.

One row per (backend, device, problem, config, template hash, schema
version): everything that changes the answer.  A writable store is in WAL mode
with a busy timeout and each Result is written in its own short transaction, so
a killed search loses at most the measurement in flight and several searches
may write one store at once.  A failed write (a full disk, a file that turned
read-only) rolls its transaction back and raises StoreError: what was stored
before stays.

Read-only stores (a read-only file, directory or mount, as a lab shares its tuned
results; or `readonly=True`) are opened read-only: no WAL switch, no migration,
nothing created.  They are read as they are when their version's rows are
readable by this one (schema.READABLE_AS_IS); writing to one raises StoreError.

Where it lives: `path` if given (the CLI's --db), else $SHADERTUNE_DB, else
$XDG_CACHE_HOME/shadertune/tune.sqlite (~/.cache when XDG_CACHE_HOME is unset),
read when a Store is opened, never at import.

Versions: PRAGMA user_version holds schema.SCHEMA_VERSION.  A store written by a
newer shadertune is refused; an older one is migrated when schema.MIGRATIONS has
a step for it and refused otherwise, with a message saying what to do (the
results are measurements: deleting the file only costs re-tuning).  A file whose
tables are not a store's (no results table, missing columns) and a result that
cannot be decoded raise StoreError with one line, never a traceback.

Health: before its first write and before it first answers a read, a Store runs
SQLite's integrity check (db/check.py: kept per state of the store's files, so a
process pays once per state): a damaged store raises StoreDamaged, nothing is
written into it and no reader answers from it (a damaged index can hide rows, and
a best config read through it can be silently wrong); damaged_ok=True lets the
store CLI's listings and export show what can still be read.

Verdicts: readers that pick correct results (ranked, best, tuned_problems) judge
each stored error against the tolerance in force (shadertune.core.verdict), not the
status the measuring run gave it.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable, Iterator

from ..core.config import Config
from ..core.problem import Problem
from ..core.result import OK, Result
from ..core.verdict import DEFAULT_TOLERANCE
from . import changes, check, schema
from .canonical import canonical
from .errors import StoreBusy, StoreError
from .location import names_default_place, store_path

log = logging.getLogger(__name__)

_FIX = "delete it (its results can be re-measured) or pass another with --db / SHADERTUNE_DB"


def looks_read_only(path: pathlib.Path) -> bool:
    """An existing store this process may not write, or whose folder it may not write
    (SQLite keeps its WAL and lock files beside the store): open it read-only."""
    kw = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    return path.exists() and not (os.access(path, os.W_OK, **kw) and
                                  os.access(path.parent, os.W_OK | os.X_OK, **kw))


def _errname(e: sqlite3.Error) -> str:
    return getattr(e, "sqlite_errorname", "") or ""


class Store:
    def __init__(self, path: str | os.PathLike | None = None, *, timeout: float = 60.0,
                 readonly: bool | None = None, damaged_ok: bool = False):
        """Open (or create) the store at `path`; readonly None: read-only exactly when
        the file or its folder cannot be written.  damaged_ok: reads do not run the
        health check first (the store CLI's listings and export, which say on stderr
        that the store is damaged and show what can still be read)."""
        self.path = store_path(path)
        # the folder is made only for the built-in default location (a cache folder the
        # user never named); a folder missing on a path the user gave (an argument or
        # $SHADERTUNE_DB) is a mistyped path, not one to make
        self._makes_folder = names_default_place(path)
        self.damaged_ok = damaged_ok
        self.damaged = False                      # the CLI found it damaged (a rescue export)
        self.version = schema.SCHEMA_VERSION      # the version of the rows read
        self.conn = None
        self._healthy = False                     # integrity_check passed (check_health)
        try:
            self._open(timeout, readonly)
        except OSError as e:         # a folder on its path that cannot be entered, a file there
            if self.conn is not None:
                self.conn.close()
            raise StoreError(f"cannot open store {self.path}: {e.strerror or e}"
                             + (f" ({e.filename})" if e.filename and str(e.filename) != str(self.path)
                                else "")) from None

    def _open(self, timeout: float, readonly: bool | None) -> None:
        self.readonly = looks_read_only(self.path) if readonly is None else bool(readonly)
        if not self.readonly:
            try:
                self._open_writable(timeout)
            except _RefusedWrite as e:
                # access() allowed it, the file system did not (root on a read-only
                # mount, a network file system): read what is there
                if readonly is False or not self.path.exists():
                    raise StoreError(f"cannot write store {self.path}: {e}") from None
                log.info("store %s refused a write (%s): opening it read-only", self.path, e)
                self.readonly = True
        if self.readonly:
            self._open_read_only(timeout)
        cols = {r[1] for r in self.conn.execute("PRAGMA table_info(results)")}
        self._cols = cols
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        self._has_space_sizes = "space_sizes" in tables
        if "changes" not in tables and not self.readonly:
            # the change counter readers consult (changes.py): a store made before it
            # gets it at its first writable open
            self._write(lambda c: [c.execute(stmt) for stmt in changes.CREATE])

    # --- opening ----------------------------------------------------------
    def _open_writable(self, timeout: float) -> None:
        try:
            if self._makes_folder:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            elif not self.path.parent.is_dir():
                raise StoreError(f"cannot open store {self.path}: the folder {self.path.parent} "
                                 f"is not there (make it first, or give another path)")
            self.conn = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else e
            raise StoreError(f"cannot open store {self.path}: {why}") from None
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if self._switch_to_wal(timeout).lower() != "wal":
                raise _RefusedWrite("it stays out of WAL mode")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self._check_schema()
        except sqlite3.DatabaseError as e:
            self.conn.close()
            if _errname(e).startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
                raise _RefusedWrite(str(e)) from None
            raise self._unusable(e) from None
        except BaseException:
            self.conn.close()
            raise

    def _switch_to_wal(self, timeout: float) -> str:
        """PRAGMA journal_mode = WAL, the mode it gives.  While another connection is
        creating the same new file, SQLite refuses the switch at once (SQLITE_BUSY,
        without the busy timeout): it is tried again until `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as e:
                if not _errname(e).startswith("SQLITE_BUSY") or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    def _open_read_only(self, timeout: float) -> None:
        if not self.path.exists():
            raise StoreError(f"store {self.path} does not exist")
        uri = "file:" + urllib.parse.quote(str(self.path.resolve()))
        # mode=ro reads a WAL store when its -shm file exists or can be made; a WAL store
        # in a read-only folder without one can only be read as immutable (which reads
        # no -wal file: a store shared with one should be checkpointed first)
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                self.conn = sqlite3.connect(uri + query, uri=True, timeout=timeout,
                                            isolation_level=None)
                self.conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
                self._check_read_only_schema()
                return
            except sqlite3.DatabaseError as e:
                if self.conn is not None:
                    self.conn.close()
                if _errname(e).startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")) \
                        and "immutable" not in query:
                    continue
                raise self._unusable(e) from None
            except BaseException:
                self.conn.close()
                raise

    def _unusable(self, e: sqlite3.DatabaseError) -> StoreError:
        """Why an open failed: busy (another connection's lock outlasted the timeout: the
        store may be healthy, never advised deleted), or not a usable store."""
        if _errname(e).startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return StoreBusy(f"store {self.path} is busy: another connection holds a lock on it "
                             f"({e}); nothing was done: try again when it is free")
        return StoreError(f"{self.path} is not a usable shadertune store ({e}); {_FIX}")

    # --- schema -----------------------------------------------------------
    def _check_schema(self) -> None:
        c = self.conn
        if c.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION:
            self._check_tables(schema.SCHEMA_VERSION)
            return                       # the common case takes no write lock
        c.execute("BEGIN IMMEDIATE")     # two processes creating one new store: one wins
        try:
            v = c.execute("PRAGMA user_version").fetchone()[0]
            tables = [r[0] for r in c.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            if v == 0 and not tables:
                for stmt in schema.CREATE:
                    c.execute(stmt)
                c.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION}")
            elif v > schema.SCHEMA_VERSION:
                raise self._newer(v)
            elif v < schema.SCHEMA_VERSION:
                if v > 0:
                    self._check_tables(v)
                while v < schema.SCHEMA_VERSION and v in schema.MIGRATIONS:
                    schema.MIGRATIONS[v](c)
                    v += 1
                    c.execute(f"PRAGMA user_version = {v}")
                    log.info("store %s migrated to schema version %d", self.path, v)
                if v < schema.SCHEMA_VERSION:
                    what = "an unversioned file" if v == 0 else f"schema version {v}"
                    raise StoreError(
                        f"store {self.path} is {what}, older than schema version "
                        f"{schema.SCHEMA_VERSION} and cannot be migrated: {_FIX}")
            self._check_tables(schema.SCHEMA_VERSION)
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    def _check_read_only_schema(self) -> None:
        v = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if v > schema.SCHEMA_VERSION:
            raise self._newer(v)
        if v != schema.SCHEMA_VERSION and v not in schema.READABLE_AS_IS:
            what = "an unversioned file" if v == 0 else f"schema version {v}"
            raise StoreError(f"store {self.path} is {what} and read-only: it cannot be migrated to "
                             f"schema version {schema.SCHEMA_VERSION} where it is; copy it somewhere "
                             f"writable or {_FIX}")
        self._check_tables(v)
        self.version = v
        log.info("store %s opened read-only (schema version %d)", self.path, v)

    def _check_tables(self, version: int) -> None:
        """A store's results table with every column of `version`, else StoreError."""
        cols = {r[1] for r in self.conn.execute("PRAGMA table_info(results)")}
        if not cols:
            raise StoreError(f"store {self.path} (schema version {version}) has no results table: "
                             f"it is not a usable shadertune store; {_FIX}")
        need = schema.REQUIRED_COLUMNS + (schema.ADDED_COLUMNS if version >= 3 else ())
        missing = [c for c in need if c not in cols]
        if missing:
            raise StoreError(f"store {self.path} (schema version {version}) lacks the columns "
                             f"{', '.join(missing)}: it is not a usable shadertune store; {_FIX}")

    def _newer(self, v: int) -> StoreError:
        return StoreError(f"store {self.path} has schema version {v}, newer than this shadertune's "
                          f"{schema.SCHEMA_VERSION}: upgrade shadertune or use another store "
                          f"(--db / SHADERTUNE_DB)")

    # --- writing ----------------------------------------------------------
    def put(self, result: Result, template_hash: str, *, seconds: float | None = None,
            seed: int | None = None) -> None:
        """Write one Result in its own transaction (replacing an older measurement).

        `seconds`: the wall time its measurement took; `seed`: its inputs' seed."""
        self.write_rows([self.row_of(result, template_hash, time.time(), seconds, seed)])

    @staticmethod
    def row_of(result: Result, template_hash: str, written: float, seconds=None, seed=None) -> dict:
        """The results row of a Result (every column derived from it but these four), its
        config in the backend's canonical form (canonical.py: one row per kernel)."""
        config = canonical(result.backend, result.config)
        if config != result.config:
            result = dataclasses.replace(result, config=config)
        p = result.problem
        return {"backend": result.backend, "device": result.device, "problem": p.key,
                "config": result.config.key, "template_hash": template_hash,
                "schema": schema.SCHEMA_VERSION, "M": p.M, "N": p.N, "K": p.K, "dtype": p.dtype,
                "trans_a": int(p.trans_a), "trans_b": int(p.trans_b), "status": result.status,
                "median_ms": result.median_ms, "gflops": result.gflops, "error": result.error,
                "result": json.dumps(result.to_dict(), allow_nan=True), "written": written,
                "seconds": seconds, "seed": seed}

    def write_rows(self, rows: Iterable[dict], *, keep_old=None) -> dict:
        """Insert or replace rows (dicts of the results columns) in one transaction: all
        or none are written.  keep_old(new_row, old_result_json) -> bool decides a row
        whose key is stored already (None: the new one replaces it).  Returns the counts
        {"added", "replaced", "kept"} (a row replaced without keep_old counts as added)."""
        cols = schema.REQUIRED_COLUMNS + schema.ADDED_COLUMNS
        insert = (f"INSERT OR REPLACE INTO results ({', '.join(cols)}) "
                  f"VALUES ({', '.join('?' * len(cols))})")
        key = ("backend", "device", "problem", "config", "template_hash", "schema")
        counts = dict.fromkeys(("added", "replaced", "kept"), 0)

        def write(c):
            for row in rows:
                what = "added"
                if keep_old is not None:
                    old = c.execute("SELECT result FROM results WHERE " +
                                    " AND ".join(f"{k}=?" for k in key), [row[k] for k in key]).fetchone()
                    if old is not None:
                        what = "kept" if keep_old(row, old[0]) else "replaced"
                if what != "kept":
                    c.execute(insert, [row.get(k) for k in cols])
                counts[what] += 1
        self._write(write)
        return counts

    def delete(self, where: str, args: list) -> int:
        """Delete the rows matching an SQL condition (the store CLI's prune)."""
        n = [0]
        self._write(lambda c: n.__setitem__(0, c.execute(f"DELETE FROM results WHERE {where}",
                                                          args).rowcount))
        return n[0]

    def keep_space_size(self, backend: str, device: str, template_hash: str, problem_key: str,
                        fingerprint: str, size: int, full_size: int) -> None:
        """Cache a counted space size (a no-op on a read-only store: counting is only slow)."""
        if self.readonly or not self._has_space_sizes:
            return
        try:
            self._write(lambda c: c.execute(
                "INSERT OR REPLACE INTO space_sizes VALUES (?,?,?,?,?,?,?)",
                (backend, device, template_hash, problem_key, fingerprint, size, full_size)))
        except StoreError as e:          # a cache: the next search counts again
            log.info("space size not kept: %s", e)

    def check_health(self) -> None:
        """SQLite's integrity_check, once per Store, before its first write and before it
        first answers a read (or when a tool that will write calls it first, to refuse
        before any work): StoreDamaged when the store is damaged, so that nothing is
        written into it and no reader answers from it; StoreBusy while another
        connection locks it (db/check.py)."""
        if not self._healthy:
            check.ensure_healthy(self.conn, self.path)
            self._healthy = True

    def require_writable(self) -> None:
        """StoreError naming the way out when this store was opened read-only (a shared
        store): what every write says, for a tool to say before its work starts."""
        if self.readonly:
            raise StoreError(f"store {self.path} is read-only (a shared store?): nothing can be "
                             f"written to it; pass a writable --db (python -m shadertune.db import "
                             f"{self.path} --db YOURS copies its results)")

    def _write(self, fn) -> None:
        self.require_writable()
        self.check_health()
        c = self.conn
        try:
            c.execute("BEGIN IMMEDIATE")
            try:
                fn(c)
                c.execute("COMMIT")
            except BaseException:
                if c.in_transaction:
                    try:
                        c.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass             # SQLite rolls back a failed transaction itself
                raise
        except sqlite3.Error as e:
            raise StoreError(self._write_failure(e)) from None
        changes.committed(self.path)      # the store's count of this process's commits (changes.py)

    def _write_failure(self, e: sqlite3.Error) -> str:
        name = _errname(e)
        kept = "every result stored before is kept"
        if name == "SQLITE_FULL":
            return f"store {self.path}: the disk is full ({e}); {kept}: free space and rerun to resume"
        if name.startswith("SQLITE_READONLY"):
            return f"store {self.path} is read-only ({e}); {kept}: pass a writable --db"
        return f"cannot write store {self.path} ({e}); {kept}"

    # --- reading ----------------------------------------------------------
    def _query(self, sql: str, args: Iterable = ()) -> list:
        if not self.damaged_ok:
            self.check_health()      # a damaged store answers nothing (it may miss rows)
        try:
            return self.conn.execute(sql, list(args)).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"cannot read store {self.path} ({e}); {_FIX}") from None

    def _decode(self, text) -> Result:
        try:
            return Result.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StoreError(f"store {self.path} holds a result that cannot be decoded "
                             f"({type(e).__name__}: {e}); {_FIX}") from None

    def _col(self, name: str) -> str:
        """A column, or NULL where a read-only older store lacks it."""
        return name if name in self._cols else "NULL"

    @staticmethod
    def _within(tolerance: float | None) -> tuple[str, list]:
        """SQL judging a stored error against the tolerance in force (None: per dtype)."""
        if tolerance is not None:
            return "error <= ?", [float(tolerance)]
        cases = " ".join("WHEN ? THEN ?" for _ in DEFAULT_TOLERANCE)
        return (f"error <= (CASE dtype {cases} END)",
                [v for kv in DEFAULT_TOLERANCE.items() for v in kv])

    def get(self, backend: str, device: str, problem: Problem, config: Config,
            template_hash: str) -> Result | None:
        """The stored Result, with the status its run gave it (see shadertune.core.verdict)."""
        rows = self._query(
            "SELECT result FROM results WHERE backend=? AND device=? AND problem=? AND config=? "
            "AND template_hash=? AND schema=?",
            (backend, device, problem.key, canonical(backend, config).key, template_hash, self.version))
        return self._decode(rows[0][0]) if rows else None

    def results(self, backend: str, device: str, problem: Problem,
                template_hash: str | None = None) -> list[Result]:
        """Every stored Result for a problem, oldest write first."""
        q = "SELECT result FROM results WHERE backend=? AND device=? AND problem=? AND schema=?"
        args: list = [backend, device, problem.key, self.version]
        if template_hash is not None:
            q += " AND template_hash=?"
            args.append(template_hash)
        return [self._decode(r[0]) for r in self._query(q + " ORDER BY written", args)]

    def ranked(self, backend: str, device: str, problem: Problem, template_hash: str,
               limit: int | None = None, tolerance: float | None = None) -> list[Result]:
        """Correct results for a problem, fastest first: ok, with an error within
        `tolerance` (None: the dtype's default).  Wrong or failed ones never."""
        within, wargs = self._within(tolerance)
        q = ("SELECT result FROM results WHERE backend=? AND device=? AND problem=? AND "
             f"template_hash=? AND schema=? AND status=? AND median_ms IS NOT NULL AND {within} "
             "ORDER BY median_ms, rowid")
        args: list = [backend, device, problem.key, template_hash, self.version, OK, *wargs]
        if limit is not None:
            q += " LIMIT ?"
            args.append(int(limit))
        return [self._decode(r[0]) for r in self._query(q, args)]

    def best(self, backend: str, device: str, problem: Problem, template_hash: str,
             tolerance: float | None = None) -> Result | None:
        r = self.ranked(backend, device, problem, template_hash, limit=1, tolerance=tolerance)
        return r[0] if r else None

    def tuned_problems(self, backend: str, device: str, template_hash: str,
                       tolerance: float | None = None) -> list[Problem]:
        """Problems with at least one correct result (as ranked() judges) for this
        backend, device and templates (a batched problem's count is in its key)."""
        within, wargs = self._within(tolerance)
        rows = self._query(
            "SELECT DISTINCT M, N, K, dtype, trans_a, trans_b, problem FROM results WHERE backend=? AND "
            f"device=? AND template_hash=? AND schema=? AND status=? AND {within} ORDER BY M, N, K, problem",
            (backend, device, template_hash, self.version, OK, *wargs))
        try:
            return [Problem(M, N, K, dt, bool(ta), bool(tb), Problem.batch_of_key(key))
                    for M, N, K, dt, ta, tb, key in rows]
        except (TypeError, ValueError) as e:
            raise StoreError(f"store {self.path} holds a problem that cannot be read ({e}); "
                             f"{_FIX}") from None

    def measured_seconds(self, backend: str, device: str, problem: Problem, template_hash: str,
                         configs: Iterable[Config]) -> tuple[float, int]:
        """(seconds the stored measurements of `configs` took, how many have no time
        on record: written before schema version 3)."""
        keys = [canonical(backend, c).key for c in configs]
        total, unknown = 0.0, 0
        for i in range(0, len(keys), 500):          # SQLite's bound-parameter limit
            chunk = keys[i:i + 500]
            for (s,) in self._query(
                    f"SELECT {self._col('seconds')} FROM results WHERE backend=? AND device=? AND "
                    f"problem=? AND template_hash=? AND schema=? AND config IN "
                    f"({','.join('?' * len(chunk))})",
                    [backend, device, problem.key, template_hash, self.version, *chunk]):
                if s is None:
                    unknown += 1
                else:
                    total += s
        return total, unknown

    def cached_space_size(self, backend: str, device: str, template_hash: str, problem_key: str,
                          fingerprint: str) -> int | None:
        if not self._has_space_sizes:
            return None
        rows = self._query("SELECT size FROM space_sizes WHERE backend=? AND device=? AND "
                           "template_hash=? AND problem=? AND fingerprint=?",
                           (backend, device, template_hash, problem_key, fingerprint))
        return rows[0][0] if rows else None

    def rows(self, where: str = "1", args: Iterable = ()) -> Iterator[dict]:
        """Every column of the rows matching an SQL condition, oldest write first (the
        store CLI's listing and export); columns an older store lacks are None."""
        cols = schema.REQUIRED_COLUMNS + schema.ADDED_COLUMNS
        sel = ", ".join(self._col(c) for c in cols)
        for r in self._query(f"SELECT {sel} FROM results WHERE schema=? AND ({where}) "
                             f"ORDER BY written, rowid", [self.version, *args]):
            yield dict(zip(cols, r))

    def summary(self, group: tuple[str, ...], where: str = "1", args: Iterable = (),
                tolerance: float | None = None) -> list[dict]:
        """Per group of columns: results, correct ones (as ranked() judges), problems,
        template hashes, last write; the store CLI's listings."""
        within, wargs = self._within(tolerance)
        cols = ", ".join(group)
        q = (f"SELECT {cols}, COUNT(*), SUM(status = ? AND median_ms IS NOT NULL AND {within}), "
             f"COUNT(DISTINCT problem), COUNT(DISTINCT template_hash), MAX(written) FROM results "
             f"WHERE schema = ? AND ({where}) GROUP BY {cols} ORDER BY {cols}")
        out = []
        for r in self._query(q, [OK, *wargs, self.version, *args]):
            d = dict(zip(group, r))
            d.update(zip(("results", "correct", "problems", "template_hashes", "written"), r[len(group):]))
            out.append(d)
        return out

    def count_rows(self, where: str = "1", args: Iterable = ()) -> int:
        return self._query(f"SELECT COUNT(*) FROM results WHERE schema = ? AND ({where})",
                           [self.version, *args])[0][0]

    def count(self) -> int:
        return self._query("SELECT COUNT(*) FROM results")[0][0]

    def changes(self) -> tuple[str, int] | None:
        """(this store's id, its count of result writes): the change counter readers
        consult (changes.py); None for a store without one (made before it, read-only)."""
        try:
            row = self.conn.execute("SELECT id, n FROM changes").fetchone()
        except sqlite3.Error:
            return None
        return (str(row[0]), int(row[1])) if row else None

    # --- lifetime -----------------------------------------------------------
    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _RefusedWrite(Exception):
    """Opening read-write failed because the file system refuses writes."""
