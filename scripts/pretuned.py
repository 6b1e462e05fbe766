#!/usr/bin/env python3
"""Regenerate the pre-tuned table shipped with shadertune (shadertune/db/pretuned.jsonl).

The table is the fallback below the user's store (docs/store.md, "The pre-tuned
table"): one row per backend, device key and problem, the fastest verified config,
in the format of `python -m shadertune.db export --best --format jsonl` with a
`source` field.  Its sources, given as files:

- stores (.sqlite, or .sqlite.xz as benchmarks/ keeps them): each problem's fastest
  correct result under each device key and template hash (exchange.best_rows);
- search reports (python -m shadertune.search --report): each problem's best; a
  report records no template hash, so its rows have none (verified on first use);
- scripts/bench-cuda JSON (rows with best_config) and scripts/bench-gl-compute JSON
  (its 'tune' rows): the tuned bests of the GPU runs, likewise without a template hash;
- tables in this format (the shipped one, `db export --best --format jsonl`): their rows
  as they are, so that a new store's rows join the table's.

Per (backend, device key, problem) one row stays: one of today's templates (the
backend's template_hash here) before any other, then the fastest (a study of a
subspace finds a slower best than a whole tune; every row is verified where it is
used unless it is of this device key and today's templates).  Rows of the device at hand whose config is not valid in today's space
are dropped (other devices' rows are checked where they are used: selection/chain.py skips a
config that is not valid there).

    scripts/pretuned --out shadertune/db/pretuned.jsonl tune.sqlite benchmarks/h200-*/gl.json
    scripts/pretuned tune.sqlite shadertune/db/pretuned.jsonl    # a new store joins the table
    scripts/pretuned --dry-run tune.sqlite benchmarks/h200-2026-11-26-s12   # a folder's reports

The committed table was made by the command in notes/pretuned.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("numpy")

from shadertune.core.atomic import output                 # noqa: E402
from shadertune.core.config import Config                 # noqa: E402
from shadertune.db import Store, StoreError          # noqa: E402
from shadertune.db.exchange import BEST_FIELDS, best_rows   # noqa: E402
from shadertune.db.pretuned import parse             # noqa: E402
from shadertune.core.problem import Problem               # noqa: E402

_SQLITE = b"SQLite format 3\x00"


def _when(text: str | None, path: pathlib.Path) -> float:
    """A file's date: its own ('created', 'date'), else the date in its folder's name."""
    for t in (text, *(re.findall(r"\d{4}-\d{2}-\d{2}", str(path)) or [None])):
        if t:
            try:
                d = datetime.datetime.fromisoformat(str(t).replace(" ", "T"))
            except ValueError:
                continue
            return (d if d.tzinfo else d.replace(tzinfo=datetime.timezone.utc)).timestamp()
    return path.stat().st_mtime


def _row(backend, device_key, th, p: Problem, config, ms, error, measured, source) -> dict | None:
    if not config or not ms or ms <= 0:
        return None
    row = {"backend": backend, "device": device_key, "template_hash": th, "problem": p.key,
           "M": p.M, "N": p.N, "K": p.K, "dtype": p.dtype, "trans_a": p.trans_a,
           "trans_b": p.trans_b, "batch": p.batch, "gflops": p.flops / (ms * 1e6),
           "median_ms": ms, "error": error, "measured": measured, "source": source}
    return {**row, **Config(config).to_dict()}


def _key_of(dev: dict) -> str:
    return f"{dev['renderer']} | {dev['driver']}"


def _name(path: pathlib.Path) -> str:
    """A source as the table names it: its path in the repository, else its file name."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def from_store(path: pathlib.Path, named: pathlib.Path | None = None) -> list[dict]:
    with Store(path, readonly=True) as s:
        rows = best_rows(s)
    for r in rows:
        r["source"] = _name(named or path)
    return rows


def from_compressed_store(path: pathlib.Path) -> list[dict]:
    """A store committed xz-compressed (benchmarks/**/*.sqlite.xz), read through a
    temporary copy; its rows name the compressed file."""
    from shadertune.db.compressed import readable
    with readable(path) as copy:
        return from_store(copy, named=path)


def from_json(path: pathlib.Path) -> list[dict]:
    d = json.loads(path.read_text())
    if not isinstance(d, dict) or not isinstance(d.get("device"), dict):
        return []
    dev, src = d["device"], _name(path)
    backend = d.get("backend") or dev.get("backend")
    out = []
    if d.get("schema") == 1 and "problems" in d:                 # a search report
        when = _when(d.get("created"), path)
        for e in d["problems"]:
            b = e.get("best")
            if b:
                out.append(_row(backend, _key_of(dev), None, Problem.from_dict(e), b["config"],
                                b["median_ms"], b.get("error"), when, src))
    elif "rows" in d and backend == "cuda":                      # scripts/bench-cuda
        when = _when(d.get("date"), path)
        for r in d["rows"]:
            if r.get("best_config") and r.get("problem"):
                out.append(_row("cuda", _key_of(dev), None, Problem.from_dict(r["problem"]),
                                r["best_config"], r.get("ours_ms") or r.get("search_best_ms"),
                                r.get("best_error"), when, src))
    elif "rows" in d and backend == "gl":                        # scripts/bench-gl-compute
        when = _when(d.get("date"), path)
        for r in d["rows"]:
            if r.get("stage") == "tune" and r.get("config") and r.get("shape"):
                p = _problem_of_key(r["shape"])
                out.append(_row("gl", _key_of(dev), None, p, r["config"], r.get("ms"),
                                r.get("error_rows"), when, src))
    return [r for r in out if r is not None]


def _problem_of_key(key: str) -> Problem:
    size, dtype, ops = key.split(":")[:3]
    m, n, k = (int(x) for x in size.split("x"))
    return Problem(m, n, k, dtype, ops[0] == "T", ops[1] == "T", Problem.batch_of_key(key))


def from_table(path: pathlib.Path) -> list[dict]:
    """The rows of a table in this format (the shipped one, or `db export --best`)."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            d.setdefault("source", _name(path))
            rows.append(d)
    parse([json.dumps(r) for r in rows], str(path))      # each a readable best row
    return rows


def read(path: pathlib.Path) -> list[dict]:
    if path.name.endswith(".sqlite.xz"):
        return from_compressed_store(path)
    with open(path, "rb") as f:
        head = f.read(len(_SQLITE))
    if head == _SQLITE:
        return from_store(path)
    text = path.read_text()
    try:
        json.loads(text)
    except ValueError:             # more than one JSON value: a table, one row a line
        return from_table(path)
    return from_json(path)


def current_hashes() -> dict:
    from shadertune.backends import available, get_backend
    out = {}
    for name in available():
        try:
            out[name] = get_backend(name).template_hash()
        except Exception:          # a backend whose modules cannot load here
            pass
    return out


def keep_valid_here(rows: list[dict]) -> tuple[list[dict], int]:
    """Drop rows of the device at hand whose config is not valid in today's space."""
    from shadertune.backends import get_backend
    from shadertune.db.pretuned import META
    here, dropped, out = {}, 0, []
    for r in rows:
        be = here.get(r["backend"])
        if be is None and r["backend"] not in here:
            try:
                be = get_backend(r["backend"])
                be.device()
            except Exception:       # no such device here: nothing to check against
                be = None
            here[r["backend"]] = be
        if be is not None and be.device().renderer == r["device"].rsplit(" | ", 1)[0]:
            p = _problem_of_key(r["problem"])
            cfg = {k: v for k, v in r.items() if k not in META and v is not None}
            try:
                bad = be.space(p).why_invalid(cfg)
            except Exception as e:
                bad = str(e)
            if bad:
                dropped += 1
                continue
        out.append(r)
    return out, dropped


def choose(rows: list[dict], hashes: dict) -> list[dict]:
    best: dict = {}
    for r in rows:
        k = (r["backend"], r["device"], r["problem"])
        rank = (r["template_hash"] == hashes.get(r["backend"]), r["gflops"], r["measured"] or 0)
        if k not in best or rank > best[k][0]:
            best[k] = (rank, r)
    return sorted((r for _, r in best.values()),
                  key=lambda r: (r["backend"], r["device"], r["dtype"], r["trans_a"], r["trans_b"],
                                 r["M"], r["N"], r["K"], r["batch"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/pretuned", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("sources", nargs="+", type=pathlib.Path,
                    help="stores (.sqlite), search reports, bench-cuda or bench-gl-compute JSON, "
                         "tables in this format, or folders (their *.json files that are one)")
    ap.add_argument("--out", default=str(ROOT / "shadertune" / "db" / "pretuned.jsonl"),
                    help="the table to write, whole or not at all (default: the package's)")
    ap.add_argument("--dry-run", action="store_true", help="count, write nothing")
    args = ap.parse_args(argv)
    rows = []
    for given in args.sources:
        found = sorted(given.rglob("*.json")) if given.is_dir() else [given]
        for path in found:
            try:
                got = read(path)
            except (OSError, ValueError, KeyError, TypeError, StoreError) as e:
                if path is not given:
                    continue       # a folder's other JSON files (ceilings, studies) are not sources
                print(f"scripts/pretuned: error: {path}: {e}", file=sys.stderr)
                return 1
            if got:
                print(f"{path}: {len(got)} best rows", file=sys.stderr)
            rows += got
    rows, dropped = keep_valid_here(rows)
    hashes = current_hashes()
    table = choose(rows, hashes)
    knobs = sorted({k for r in table for k in r} - set(BEST_FIELDS) - {"source"})
    columns = list(BEST_FIELDS) + ["source"] + knobs
    lines = [json.dumps({k: r.get(k) for k in columns}, separators=(",", ":")) for r in table]
    parse(lines, args.out)           # what the package reads back
    current = sum(r["template_hash"] == hashes.get(r["backend"]) for r in table)
    print(f"{len(table)} rows ({current} of today's templates; {dropped} not valid in today's space "
          f"dropped) for {len({(r['backend'], r['device']) for r in table})} devices", file=sys.stderr)
    if not args.dry_run:
        with output(args.out, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        print(f"written: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
