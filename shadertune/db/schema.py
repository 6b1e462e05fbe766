"""The store's tables, its version (PRAGMA user_version) and the steps between versions.

Version 3 adds to every result the wall seconds its measurement took (`seconds`:
a report rebuilt from the store carries the original search time) and the seed
of the inputs it was verified on (`seed`: provenance only, not a key, see
shadertune.core.verdict), and a table caching the size of each pruned space (counting
a space enumerates it: about a second per problem on GL).

Version 4 keeps one row per kernel: every config in its backend's canonical form,
the rows of two spellings of one kernel merged, the rows merged away kept whole in
`superseded_results` (db/canonical.py).
"""
from __future__ import annotations

from . import canonical

SCHEMA_VERSION = 4

RESULTS = """
CREATE TABLE results (
    backend       TEXT NOT NULL,
    device        TEXT NOT NULL,      -- DeviceInfo.key: renderer | driver version
    problem       TEXT NOT NULL,      -- Problem.key
    config        TEXT NOT NULL,      -- Config.key (canonical JSON)
    template_hash TEXT NOT NULL,
    schema        INTEGER NOT NULL,
    M INTEGER NOT NULL, N INTEGER NOT NULL, K INTEGER NOT NULL,
    dtype TEXT NOT NULL, trans_a INTEGER NOT NULL, trans_b INTEGER NOT NULL,
    status        TEXT NOT NULL,      -- the verdict under the tolerance of the run that measured it
    median_ms     REAL,
    gflops        REAL,
    error         REAL,               -- relative error: verdicts are judged again on read
    result        TEXT NOT NULL,      -- Result.to_dict() as JSON: every time kept
    written       REAL NOT NULL,
    seconds       REAL,               -- wall seconds the measurement took (NULL before version 3)
    seed          INTEGER,            -- seed of the verifying inputs (NULL before version 3)
    PRIMARY KEY (backend, device, problem, config, template_hash, schema)
)"""
RESULTS_INDEX = ("CREATE INDEX IF NOT EXISTS results_ok ON results "
                 "(backend, device, template_hash, dtype, status, median_ms)")
SPACE_SIZES = """
CREATE TABLE IF NOT EXISTS space_sizes (
    backend       TEXT NOT NULL,
    device        TEXT NOT NULL,
    template_hash TEXT NOT NULL,
    problem       TEXT NOT NULL,
    fingerprint   TEXT NOT NULL,      -- the space's definition (see shadertune.db.spaces)
    size          INTEGER NOT NULL,
    full_size     INTEGER NOT NULL,
    PRIMARY KEY (backend, device, template_hash, problem, fingerprint)
)"""
# A new store is made with these; the change counter's table and triggers
# (changes.CREATE) come with its first writable open (Store.__init__).
CREATE = (RESULTS, RESULTS_INDEX, SPACE_SIZES, canonical.SUPERSEDED, canonical.SUPERSEDED_BY)

# Columns every version's results table has; a table without one of them is not a store.
REQUIRED_COLUMNS = ("backend", "device", "problem", "config", "template_hash", "schema", "M", "N",
                    "K", "dtype", "trans_a", "trans_b", "status", "median_ms", "gflops", "error",
                    "result", "written")
# Columns added since version 1: a store opened read-only at an older version reads them as NULL.
ADDED_COLUMNS = ("seconds", "seed")


def _to_3(c) -> None:
    c.execute("ALTER TABLE results ADD COLUMN seconds REAL")
    c.execute("ALTER TABLE results ADD COLUMN seed INTEGER")
    c.execute(SPACE_SIZES)
    c.execute("UPDATE results SET schema = 3")


def _to_4(c) -> None:
    c.execute(canonical.SUPERSEDED)
    c.execute(canonical.SUPERSEDED_BY)
    canonical.merge_spellings(c)
    c.execute("UPDATE results SET schema = 4")


# from_version -> function(conn) bringing a store to from_version + 1.
# 1 -> 2: version 2 adds the status 'slow' (which version 1 cannot read); its rows are
# version 2 rows as they are.  2 -> 3: two nullable columns and a cache table.
# 3 -> 4: configs in canonical form, the spellings of one kernel merged.
MIGRATIONS: dict = {1: lambda c: c.execute("UPDATE results SET schema = 2 WHERE schema = 1"),
                    2: _to_3, 3: _to_4}

# Older versions whose rows this version reads as they are (the migrations above only
# add columns, a table, or a status, or merge rows a reader may meet twice): a
# read-only store at one of them is used unmigrated.
READABLE_AS_IS = (1, 2, 3)
