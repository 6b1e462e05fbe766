"""SQLite store of every Result: resumable searches and the best config per key.

One row per (backend, device, problem, config, template hash, schema
version): everything that changes the answer.  The file is in WAL mode with
a busy timeout and each Result is written in its own short transaction, so a
killed search loses at most the measurement in flight and several searches
may write one store at once.

Where it lives: `path` if given (the CLI's --db), else $SHADERTUNE_DB, else
$XDG_CACHE_HOME/shadertune/tune.sqlite (~/.cache when XDG_CACHE_HOME is unset),
read when a Store is opened, never at import.

Versions: PRAGMA user_version holds SCHEMA_VERSION.  A store written by a
newer shadertune is refused; an older one is migrated when MIGRATIONS has a
step for it and refused otherwise, with a message saying what to do (the
results are measurements: deleting the file only costs re-tuning).
"""
from __future__ import annotations

import json
import os
import pathlib
import sqlite3
import time

from .config import Config
from .errors import ShadertuneError
from .problem import Problem
from .result import OK, Result

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE results (
    backend       TEXT NOT NULL,
    device        TEXT NOT NULL,      -- DeviceInfo.key: renderer | driver version
    problem       TEXT NOT NULL,      -- Problem.key
    config        TEXT NOT NULL,      -- Config.key (canonical JSON)
    template_hash TEXT NOT NULL,
    schema        INTEGER NOT NULL,
    M INTEGER NOT NULL, N INTEGER NOT NULL, K INTEGER NOT NULL,
    dtype TEXT NOT NULL, trans_a INTEGER NOT NULL, trans_b INTEGER NOT NULL,
    status        TEXT NOT NULL,
    median_ms     REAL,
    gflops        REAL,
    error         REAL,
    result        TEXT NOT NULL,      -- Result.to_dict() as JSON: every time kept
    written       REAL NOT NULL,
    PRIMARY KEY (backend, device, problem, config, template_hash, schema)
);
CREATE INDEX results_ok ON results (backend, device, template_hash, dtype, status, median_ms);
"""

# from_version -> function(conn) bringing a store to from_version + 1.
# 1 -> 2: version 2 adds the status 'slow' (which version 1 cannot read); its rows are
# version 2 rows as they are.
MIGRATIONS: dict = {1: lambda c: c.execute("UPDATE results SET schema = 2 WHERE schema = 1")}


class StoreError(ShadertuneError):
    """The store cannot be used (wrong schema version, not a database, unwritable)."""


def default_path() -> pathlib.Path:
    env = os.environ.get("SHADERTUNE_DB")
    if env:
        return pathlib.Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "shadertune" / "tune.sqlite"


class Store:
    def __init__(self, path: str | os.PathLike | None = None, *, timeout: float = 60.0):
        self.path = pathlib.Path(path).expanduser() if path else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open store {self.path}: {e}") from None
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self._check_schema()
        except sqlite3.DatabaseError as e:
            self.conn.close()
            raise StoreError(f"{self.path} is not a usable shadertune store ({e}); "
                             f"delete it or pass another with --db / SHADERTUNE_DB") from None
        except StoreError:
            self.conn.close()
            raise

    # --- schema -----------------------------------------------------------
    def _check_schema(self) -> None:
        c = self.conn
        if c.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return                       # the common case takes no write lock
        c.execute("BEGIN IMMEDIATE")     # two processes creating one new store: one wins
        try:
            v = c.execute("PRAGMA user_version").fetchone()[0]
            tables = [r[0] for r in c.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            if v == 0 and not tables:
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        c.execute(stmt)
                c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif v > SCHEMA_VERSION:
                raise StoreError(
                    f"store {self.path} has schema version {v}, newer than this shadertune's "
                    f"{SCHEMA_VERSION}: upgrade shadertune or use another store (--db / SHADERTUNE_DB)")
            elif v < SCHEMA_VERSION:
                while v < SCHEMA_VERSION and v in MIGRATIONS:
                    MIGRATIONS[v](c)
                    v += 1
                    c.execute(f"PRAGMA user_version = {v}")
                if v < SCHEMA_VERSION:
                    what = "an unversioned file" if v == 0 else f"schema version {v}"
                    raise StoreError(
                        f"store {self.path} is {what}, older than schema version {SCHEMA_VERSION} "
                        f"and cannot be migrated: delete it (its results can be re-measured) or use "
                        f"another store (--db / SHADERTUNE_DB)")
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    # --- writing ----------------------------------------------------------
    def put(self, result: Result, template_hash: str) -> None:
        """Write one Result in its own transaction (replacing an older measurement)."""
        p = result.problem
        row = (result.backend, result.device, p.key, result.config.key, template_hash,
               SCHEMA_VERSION, p.M, p.N, p.K, p.dtype, int(p.trans_a), int(p.trans_b),
               result.status, result.median_ms, result.gflops, result.error,
               json.dumps(result.to_dict(), allow_nan=True), time.time())
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute(f"INSERT OR REPLACE INTO results VALUES ({','.join('?' * len(row))})", row)
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    # --- reading ----------------------------------------------------------
    def get(self, backend: str, device: str, problem: Problem, config: Config,
            template_hash: str) -> Result | None:
        row = self.conn.execute(
            "SELECT result FROM results WHERE backend=? AND device=? AND problem=? AND config=? "
            "AND template_hash=? AND schema=?",
            (backend, device, problem.key, Config(config).key, template_hash, SCHEMA_VERSION)).fetchone()
        return Result.from_dict(json.loads(row[0])) if row else None

    def results(self, backend: str, device: str, problem: Problem,
                template_hash: str | None = None) -> list[Result]:
        """Every stored Result for a problem, oldest write first."""
        q = "SELECT result FROM results WHERE backend=? AND device=? AND problem=? AND schema=?"
        args: list = [backend, device, problem.key, SCHEMA_VERSION]
        if template_hash is not None:
            q += " AND template_hash=?"
            args.append(template_hash)
        return [Result.from_dict(json.loads(r[0]))
                for r in self.conn.execute(q + " ORDER BY written", args)]

    def ranked(self, backend: str, device: str, problem: Problem, template_hash: str,
               limit: int | None = None) -> list[Result]:
        """Correct results for a problem, fastest first (wrong or failed ones never)."""
        q = ("SELECT result FROM results WHERE backend=? AND device=? AND problem=? AND "
             "template_hash=? AND schema=? AND status=? AND median_ms IS NOT NULL ORDER BY median_ms, rowid")
        args: list = [backend, device, problem.key, template_hash, SCHEMA_VERSION, OK]
        if limit is not None:
            q += " LIMIT ?"
            args.append(int(limit))
        return [Result.from_dict(json.loads(r[0])) for r in self.conn.execute(q, args)]

    def best(self, backend: str, device: str, problem: Problem, template_hash: str) -> Result | None:
        r = self.ranked(backend, device, problem, template_hash, limit=1)
        return r[0] if r else None

    def tuned_problems(self, backend: str, device: str, template_hash: str) -> list[Problem]:
        """Problems with at least one correct result for this backend, device and templates."""
        rows = self.conn.execute(
            "SELECT DISTINCT M, N, K, dtype, trans_a, trans_b FROM results WHERE backend=? AND "
            "device=? AND template_hash=? AND schema=? AND status=? ORDER BY M, N, K",
            (backend, device, template_hash, SCHEMA_VERSION, OK))
        return [Problem(M, N, K, dt, bool(ta), bool(tb)) for M, N, K, dt, ta, tb in rows]

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    # --- lifetime -----------------------------------------------------------
    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
