"""The store's change counter: how a reader (auto's kept selections) knows that a
store changed since it last read it, without keeping a connection open.

Two counts, both the store's own:

- in the file: the table `changes` holds the store's identity (a random id, new for
  every store file made) and a count that triggers on the results table raise in the
  same transaction as every insert, update or delete.  A trigger is part of the
  database, so every writer bumps it: this shadertune, an older one, the sqlite3 shell.
  Reading it takes a short read-only connection (counter(); about 0.35 ms here).
- in this process: every commit of a Store raises a count kept per store file (its
  device and inode; committed()), exact and free to read.

A reader's stamp (stamp()) is the store file's and its write-ahead log's identity,
size and modification time and this process's count: two stats.  A stamp that moved
says "maybe changed": the reader then reads the file's counter, and the same (id,
count) means the same results (a checkpoint, a space-size cache write, another
reader's open move the stamp, not the results).  A stamp taken within FRESH seconds
of the files' last modification is not trusted alone: a file system stamps times from
a coarse clock (Linux: the kernel's tick, at most 10 ms), so a later commit by another
process within the same tick can leave size and time as they were; such a reader
reads the counter until the files are older than that.  (SQLite's write-ahead log
needs a local file system; one with coarser stamps, FAT's 2 s, is the case left.)

Why not SQLite's `PRAGMA data_version`: it counts other connections' commits on a
connection kept open, and a kept reader holds a store's write-ahead log alive (the
last writer cannot remove it), so a store replaced on disk (mv) was then read with
the old file's log (notes/cuda.md, "A kept watch connection and a replaced store").
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse

# File times within this many seconds of now may share their clock tick with a later
# write (Linux stamps files from the kernel's tick: 1-10 ms): a stamp that young is
# checked against the counter in the file.
FRESH = 0.1

CREATE = (
    "CREATE TABLE IF NOT EXISTS changes (id TEXT NOT NULL, n INTEGER NOT NULL)",
    "INSERT INTO changes SELECT lower(hex(randomblob(16))), 0 WHERE NOT EXISTS (SELECT 1 FROM changes)",
    *(f"CREATE TRIGGER IF NOT EXISTS results_{what}_counts AFTER {what.upper()} ON results "
      f"BEGIN UPDATE changes SET n = n + 1; END" for what in ("insert", "update", "delete")),
)

_commits: dict = {}  # (st_dev, st_ino) of a store file -> commits this process made to it
_lock = threading.Lock()
# Commits this process made to any store: a reader that keeps what it read (matmul's
# express lane) compares it instead of stamping the store on every call.
generation = 0


def _stat(path) -> tuple | None:
    """(device, inode, size, mtime) of `path`; None where there is no file.  A path that
    cannot be reached (a folder without permission) is not 'no store': its stamp is the
    error, so that opening it is tried and its reader warns."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return ("unreachable", e.errno, None, None)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def committed(path) -> None:
    """Count a commit this process made to the store at `path` (Store calls it)."""
    global generation
    st = _stat(path)
    with _lock:
        generation += 1
        if st is not None:
            _commits[st[:2]] = _commits.get(st[:2], 0) + 1


def stamp(path: str) -> tuple | None:
    """The reader's stamp of the store at `path` (None: no file there)."""
    st = _stat(path)
    if st is None:
        return None
    return st, _stat(path + "-wal"), _commits.get(st[:2], 0)


def fresh(store_stamp: tuple, now: float | None = None) -> bool:
    """Whether a stamp's files were modified within FRESH seconds of `now`: a write in
    the same clock tick would not have moved it."""
    times = [s[3] for s in store_stamp[:2] if s is not None]
    if None in times:
        return True                      # unreachable: never trusted, always read again
    newest = max(times) / 1e9
    return (time.time() if now is None else now) - newest < FRESH


def counter(path: str) -> tuple[str, int] | None:
    """(store id, count) from the file's changes table; None where there is none (a
    store written before the table, opened read-only since) or it cannot be read."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT id, n FROM changes").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return (str(row[0]), int(row[1])) if row else None
