"""One row per kernel: configs are stored in their backend's canonical form.

A backend says what the one form of its configs is (Backend.canonical_config, read
without a device; GL completes a config to every knob it has: a config written
before a knob existed, or one of the compute family without `lang`, is the same
kernel as the config naming the knob's value).  The store keeps that form wherever
a config enters it: every row written (Store.row_of: searches, imports, merges) and
every lookup (Store.get), so the two spellings of one kernel are one key.

Stores written before (schema version 3 and older) may hold both spellings of one
kernel as two rows.  The migration to version 4 (merge_spellings) rewrites every row
to the canonical form and merges the rows that then share a key: the newest
measurement stays in `results` (the rule an import follows for one kernel measured
twice, exchange.py), and every other row moves, whole, to `superseded_results` with
the key it was merged into: nothing measured is lost, and every reader sees one row
per kernel.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable

from ..core.config import Config

# Rows of one kernel that a merge took out of `results` (every column kept), with the
# canonical config key of the row that stayed.
SUPERSEDED = """
CREATE TABLE IF NOT EXISTS superseded_results AS SELECT * FROM results WHERE 0"""
SUPERSEDED_BY = "ALTER TABLE superseded_results ADD COLUMN superseded_by TEXT"


def canonical(backend: str, config) -> Config:
    """`config` in backend `backend`'s canonical form (as given for a backend this
    shadertune does not know: a module:Class backend, one that cannot be imported)."""
    return _canonical_of(backend)(config if isinstance(config, Config) else Config(config))


@functools.lru_cache(maxsize=None)
def _canonical_of(backend: str) -> Callable[[Config], Config]:
    from ..backends import backend_class   # the registry names backends; it imports them lazily
    try:
        return backend_class(backend).canonical_config
    except (ValueError, ImportError):
        return lambda config: config


def _measured_at(result_text: str) -> float:
    try:
        return float(json.loads(result_text)["timestamp"])
    except (ValueError, KeyError, TypeError):
        return float("-inf")             # an undecodable result gives way


def merge_spellings(c) -> dict:
    """Rewrite every row of the results table to its canonical config and merge the rows
    that then share a key (the module docstring), on the connection `c` inside the
    caller's transaction.  Rows whose config is not JSON are left as they are (db check
    names them).  Returns {"rewritten": rows whose config changed, "superseded": rows
    moved out}."""
    key_cols = ("backend", "device", "problem", "template_hash", "schema")
    groups: dict[tuple, list[tuple[int, str, bool]]] = {}
    for rowid, config_text, *key in c.execute(
            f"SELECT rowid, config, {', '.join(key_cols)} FROM results"):
        try:
            cfg = Config(json.loads(config_text))
        except (ValueError, TypeError):
            continue
        can = canonical(key[0], cfg).key
        groups.setdefault((*key, can), []).append((rowid, config_text, config_text == can))
    counts = {"rewritten": 0, "superseded": 0}
    for group_key, rows in groups.items():
        if len(rows) == 1 and rows[0][2]:
            continue                     # one row, already canonical: the common case
        can = group_key[-1]
        measured = {rowid: _measured_at(c.execute("SELECT result FROM results WHERE rowid = ?",
                                                  (rowid,)).fetchone()[0]) for rowid, _, _ in rows}
        # the newest measurement stays; on a tie the row already canonical, then the last written
        keep = max(rows, key=lambda r: (measured[r[0]], r[2], r[0]))[0]
        for rowid, _, _ in rows:
            if rowid != keep:
                c.execute("INSERT INTO superseded_results SELECT *, ? FROM results WHERE rowid = ?",
                          (can, rowid))
                c.execute("DELETE FROM results WHERE rowid = ?", (rowid,))
                counts["superseded"] += 1
        kept = next(r for r in rows if r[0] == keep)
        if not kept[2]:
            text = c.execute("SELECT result FROM results WHERE rowid = ?", (keep,)).fetchone()[0]
            try:
                d = json.loads(text)
                d["config"] = json.loads(can)
                text = json.dumps(d, allow_nan=True)
            except (ValueError, TypeError):
                pass                     # db check names a result that does not decode
            c.execute("UPDATE results SET config = ?, result = ? WHERE rowid = ?", (can, text, keep))
            counts["rewritten"] += 1
    return counts
