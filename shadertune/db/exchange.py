"""Export, import and merge: a store's results as JSON lines or CSV, and other stores.

Export writes one record per stored result, oldest write first, with the fields
FIELDS: the key (backend, device, problem, config, template_hash), the columns a
reader filters on, when it was written, the seconds its measurement took, the
seed it was verified with, and `result`, the whole Result (every time kept).  In
JSON lines `config` and `result` are objects; in CSV they are JSON text and an
empty cell is null.

Import reads another store (SQLite, any schema version this one reads, opened
read-only) or an export (JSON lines or CSV, told apart by their first
character); '-' is an export on standard input, read whole (at most
jsonio.MAX_BYTES) before the store's write begins.  Every record is checked (its result decodes; its key columns agree
with its result) as it is read, and all are written in one transaction: a bad
record writes nothing and says which line it is.  Records keep their backend,
device and template hash, so results of different devices never mix and results
of other kernels stay apart.

Best (export --best): one row per problem, for each backend, device and template hash
(the fastest correct result, errors judged against the tolerance in force), with the
fields BEST_FIELDS and then one column per knob (the union over the rows, by name;
a knob a row's config lacks is null in JSON lines, an empty cell in CSV): a table
for a spreadsheet or pandas, and the format of the pre-tuned table shipped with
shadertune (pretuned.py).  It holds no Result: import takes full exports.

Conflicts: a record whose key is stored already keeps the newer measurement, by
the Result's timestamp (when it was measured); on a tie the stored one stays, so
importing the same file twice changes nothing.  Both are measurements of one
kernel on one device and driver, and the newer one is the machine as it is now:
the rule a search follows when it measures a config again.  Keeping both would
make the key ambiguous for every reader.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import pathlib
from collections.abc import Iterator

from ..core import jsonio
from ..core.config import Config
from ..core.problem import Problem
from ..core.result import Result
from . import schema
from .store import Store, StoreError

FIELDS = ("backend", "device", "problem", "config", "template_hash", "schema", "M", "N", "K",
          "dtype", "trans_a", "trans_b", "status", "median_ms", "gflops", "error", "written",
          "seconds", "seed", "result")
FORMATS = ("jsonl", "csv")
# the fields of a best row before its knob columns ('measured': when the best result was
# measured, Unix seconds; 'batch': products of one launch, 1 for one)
BEST_FIELDS = ("backend", "device", "template_hash", "problem", "M", "N", "K", "dtype", "trans_a",
               "trans_b", "batch", "gflops", "median_ms", "error", "measured")
_SQLITE_MAGIC = b"SQLite format 3\x00"


# --- export --------------------------------------------------------------------

def records(store: Store, where: str = "1", args=(), skipped: list | None = None) -> Iterator[dict]:
    """The store's rows as export records (config and result decoded).  `skipped` a
    list: a row that does not make a whole record (its JSON or columns damaged, as
    row_from checks an import) is left out and its rowid-free description appended
    there, instead of raising: the rescue of a damaged store."""
    for i, row in enumerate(store.rows(where, args), 1):
        rec = {k: row[k] for k in FIELDS}
        try:
            rec["config"] = json.loads(row["config"])
            rec["result"] = json.loads(row["result"])
            rec["trans_a"], rec["trans_b"] = bool(row["trans_a"]), bool(row["trans_b"])
            rec["schema"] = schema.SCHEMA_VERSION     # what the record reads as now
            if skipped is not None:
                row_from(f"row {i}", dict(rec))         # what an import of it would check
        except (ValueError, TypeError, StoreError) as e:
            if skipped is None:
                raise StoreError(f"store {store.path} holds a result that cannot be decoded ({e})") from None
            skipped.append(f"row {i}: {e}")
            continue
        yield rec


def export(store: Store, out, fmt: str = "jsonl", where: str = "1", args=(),
           skipped: list | None = None) -> int:
    """Write the matching records to the text stream `out`; returns how many.
    `skipped`: as records()."""
    if fmt not in FORMATS:
        raise ValueError(f"export format must be one of {FORMATS}, got {fmt!r}")
    n = 0
    if fmt == "jsonl":
        for rec in records(store, where, args, skipped):
            out.write(json.dumps(rec, allow_nan=True, separators=(",", ":")) + "\n")
            n += 1
        return n
    w = csv.DictWriter(out, FIELDS, lineterminator="\n")
    w.writeheader()
    for rec in records(store, where, args, skipped):
        rec["config"] = json.dumps(rec["config"], sort_keys=True, separators=(",", ":"))
        rec["result"] = json.dumps(rec["result"], allow_nan=True, separators=(",", ":"))
        w.writerow({k: ("" if v is None else v) for k, v in rec.items()})
        n += 1
    return n


def best_rows(store: Store, where: str = "1", args=(), tolerance: float | None = None) -> list[dict]:
    """One flat row per (backend, device, template hash, problem) with a correct result:
    BEST_FIELDS of its fastest one, then its knobs by name (see the module docstring)."""
    groups = store.summary(("backend", "device", "template_hash", "problem", "M", "N", "K", "dtype",
                            "trans_a", "trans_b"), where, args, tolerance=tolerance)
    out = []
    for g in groups:
        if not g["correct"]:
            continue
        try:
            p = Problem(g["M"], g["N"], g["K"], g["dtype"], bool(g["trans_a"]), bool(g["trans_b"]),
                        Problem.batch_of_key(g["problem"]))
        except (TypeError, ValueError) as e:
            raise StoreError(f"store {store.path} holds a problem that cannot be read ({e})") from None
        r = store.best(g["backend"], g["device"], p, g["template_hash"], tolerance=tolerance)
        if r is None:
            continue
        clash = set(r.config) & set(BEST_FIELDS)
        if clash:
            raise StoreError(f"a config of {g['backend']} has knobs named like best-row fields: "
                             f"{sorted(clash)}")
        row = {"backend": g["backend"], "device": g["device"], "template_hash": g["template_hash"],
               "problem": p.key, "M": p.M, "N": p.N, "K": p.K, "dtype": p.dtype,
               "trans_a": p.trans_a, "trans_b": p.trans_b, "batch": p.batch,
               "gflops": r.gflops, "median_ms": r.median_ms, "error": r.error,
               "measured": r.timestamp}
        out.append({**row, **r.config.to_dict()})
    return out


def export_best(store: Store, out, fmt: str = "jsonl", where: str = "1", args=(),
                tolerance: float | None = None) -> int:
    """Write best_rows to the text stream `out` with the same columns in every row
    (knobs a config lacks: null, an empty cell); returns how many rows."""
    if fmt not in FORMATS:
        raise ValueError(f"export format must be one of {FORMATS}, got {fmt!r}")
    rows = best_rows(store, where, args, tolerance)
    knobs = sorted({k for row in rows for k in row} - set(BEST_FIELDS))
    columns = list(BEST_FIELDS) + knobs
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps({k: row.get(k) for k in columns}, separators=(",", ":")) + "\n")
        return len(rows)
    w = csv.DictWriter(out, columns, lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    return len(rows)


# --- import --------------------------------------------------------------------

STDIN = "-"


def read_stdin(stream=None) -> str:
    """An export on standard input, read whole (before the store's write transaction
    begins, so a slow pipe never holds the store's lock), bounded as every JSON a tool
    reads is (jsonio.MAX_BYTES); StoreError when it is too large, a store or not text."""
    import sys
    f = (stream if stream is not None else sys.stdin).buffer
    data = f.read(jsonio.MAX_BYTES + 1)
    if len(data) > jsonio.MAX_BYTES:
        raise StoreError(f"cannot read -: more than {jsonio.MAX_BYTES} bytes on standard input "
                         f"(export to a file and import that)")
    if data.startswith(_SQLITE_MAGIC):
        raise StoreError("cannot read -: standard input is an SQLite store; name its file instead")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StoreError(f"cannot read -: not a JSON lines or CSV export ({e})") from None


def read_records(path, text: str | None = None) -> Iterator[tuple[str, dict]]:
    """(where, record) from a store or an export file (or `text`, an export already
    read: standard input); where names the record for errors."""
    name = str(path)
    if text is None:
        path = pathlib.Path(path)
        try:
            with open(path, "rb") as f:
                head = f.read(len(_SQLITE_MAGIC))
        except OSError as e:
            raise StoreError(f"cannot read {path}: {e.strerror or e}") from None
        if head == _SQLITE_MAGIC:
            with Store(path, readonly=True) as src:
                for i, rec in enumerate(records(src), 1):
                    yield f"{path}: row {i}", rec
            return
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise StoreError(f"cannot read {path}: not a store, JSON lines or CSV export ({e})") from None
    yield from _text_records(name, text)


def _text_records(name: str, text: str) -> Iterator[tuple[str, dict]]:
    if text.lstrip()[:1] == "{":
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rec = jsonio.loads(line)
                except ValueError as e:
                    raise StoreError(f"{name}: line {i}: not JSON ({e})") from None
                yield f"{name}: line {i}", rec
        return
    if not text.strip():
        return                           # an empty export: nothing to import
    reader = csv.DictReader(io.StringIO(text))
    missing = [k for k in ("template_hash", "written", "result") if k not in (reader.fieldnames or [])]
    if missing:
        raise StoreError(f"{name}: not a store, JSON lines or CSV export of one (no "
                         f"{', '.join(missing)} column)")
    for i, rec in enumerate(reader, 2):
        yield f"{name}: line {i}", {k: (None if v == "" else v) for k, v in rec.items()}


def _decoded(v):
    return jsonio.loads(v) if isinstance(v, str) else v


_INT64 = (-(1 << 63), (1 << 63) - 1)     # what SQLite's INTEGER holds


def _number(v, kind):
    if v is None:
        return None
    x = kind(v)
    if kind is float and not math.isfinite(x):
        raise ValueError(f"{v!r} is not a finite number")
    if kind is int and not _INT64[0] <= x <= _INT64[1]:
        raise ValueError(f"{v!r} does not fit a 64-bit integer")
    return x


def row_from(where: str, rec) -> dict:
    """A results row from an export record, checked; StoreError naming `where` if not one."""
    try:
        if not isinstance(rec, dict):
            raise TypeError(f"a record is an object, got {type(rec).__name__}")
        r = Result.from_dict(_decoded(rec["result"]))
        th = rec["template_hash"]
        if not isinstance(th, str) or not th:
            raise ValueError("template_hash must be a non-empty string")
        version = int(rec.get("schema") or schema.SCHEMA_VERSION)
        written = _number(rec["written"], float)
        seconds, seed = _number(rec.get("seconds"), float), _number(rec.get("seed"), int)
        config = Config(_decoded(rec["config"])) if rec.get("config") is not None else r.config
        for name in ("M", "N", "K"):
            _number(getattr(r.problem, name), int)
        if seed is not None and seed < 0:
            raise ValueError(f"seed {seed} is negative")
    except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as e:
        raise StoreError(f"{where}: not a shadertune result record ({type(e).__name__}: {e})") from None
    if version > schema.SCHEMA_VERSION:
        raise StoreError(f"{where}: written by a newer shadertune (schema version {version}): "
                         f"upgrade shadertune to import it")
    for field, mine in (("backend", r.backend), ("device", r.device), ("problem", r.problem.key)):
        if rec.get(field) is not None and rec[field] != mine:
            raise StoreError(f"{where}: its {field} {rec[field]!r} is not its result's {mine!r}")
    if config != r.config:
        raise StoreError(f"{where}: its config {config.key} is not its result's {r.config.key}")
    row = Store.row_of(r, th, written, seconds, seed)
    row["_measured"] = r.timestamp
    return row


def _older_or_same(new_row: dict, old_result_json: str) -> bool:
    """keep_old for merging: the stored measurement stays unless the new one is newer."""
    try:
        old = float(json.loads(old_result_json)["timestamp"])
    except (ValueError, KeyError, TypeError):
        return False                     # an undecodable stored result gives way
    return new_row["_measured"] <= old


def merge(store: Store, sources, stdin=None) -> dict:
    """Import every source into `store` in one transaction; counts {"added", "replaced", "kept"}.
    A source '-' is an export on standard input (`stdin`: a stream in its place)."""
    sources = [str(s) if os.fspath(s) == STDIN else pathlib.Path(s) for s in sources]
    if sources.count(STDIN) > 1:
        raise StoreError("standard input ('-') can be imported once")
    for s in sources:
        if s == STDIN:
            continue
        try:
            if os.path.samefile(s, store.path):
                raise StoreError(f"{s} is the store itself: nothing to import")
        except FileNotFoundError:
            pass                         # read_records says so, naming the file
        except OSError as e:             # a folder on its path that cannot be entered
            raise StoreError(f"cannot read {s}: {e.strerror or e}") from None
    piped = read_stdin(stdin) if STDIN in sources else None

    def rows():
        for s in sources:
            for where, rec in read_records(s, piped if s == STDIN else None):
                yield row_from(where, rec)
    return store.write_rows(rows(), keep_old=_older_or_same)
