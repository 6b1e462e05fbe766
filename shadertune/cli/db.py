"""python -m shadertune.db: look into a tuning store, export it, import others, prune it."""
from __future__ import annotations

import datetime
import os
import sys
import time

from . import args as ca
from ..core.atomic import OutputError
from ..backends import config_text
from ..core.version import __version__
from ..core.problem import Problem
from ..core.texttable import text_table
from ..db import check as checks
from ..db import exchange
from ..db.location import store_files, store_path
from ..db.store import Store, StoreError

TOOL = "db"
PROG = "shadertune.db"

EPILOG = """\
commands:
  devices    backends and devices in the store: results, correct ones, problems,
             template hashes (kernel versions), last write
  problems   the same per problem
  best       the fastest correct config per problem (errors judged against
             --tolerance, default 1e-5 float32, 1e-12 float64)
  export     every matching result as JSON lines (default) or CSV, to -o FILE or stdout;
             --best: one row per problem, its fastest correct result with a column
             per knob (a table for a spreadsheet or pandas)
  import     merge stores (any version this one reads) or exports (JSON lines, CSV)
             into --db: device keys and template hashes kept; a result stored
             already keeps the newer measurement (its timestamp); all or nothing;
             '-' reads an export from standard input (db export | db import -)
  prune      delete the matching results (at least one filter; --dry-run counts)
  check      is the store healthy: SQLite's integrity check, the schema, and the
             results' own invariants (statuses, times, sizes, the result JSON of
             each row); one line per problem found and a verdict line; exit 0
             healthy, 1 damaged, 3 busy (another connection held a lock past
             --wait SECONDS, default 5), 4 not checked (this user cannot read it
             as the check needs: no access, or a write-ahead log in a folder it
             may not write); busy and not checked say nothing of its health

filters (every listing, export and prune): --backend NAME, --device TEXT (a part of
the device key 'renderer | driver'), --template-hash H, --problem SIZE (N, MxNxK),
--dtype; export and prune also --status S and --older-than DAYS; prune also
--stale-templates (results of kernels this shadertune no longer has, for the
backends it knows).

store: --db PATH (before or after the command), else $SHADERTUNE_DB, else
$XDG_CACHE_HOME/shadertune/tune.sqlite, else ~/.cache/shadertune/tune.sqlite.  A
read-only store is read where it is; import and prune need a writable one, and
refuse to write into a damaged store (run check).  best refuses a damaged store
(its answer could be silently wrong); the other listings and export of a damaged
store say so on stderr and show what can still be read.

output: export -o FILE writes FILE whole or not at all (a temporary file renamed
into place); '-' or /dev/stdout is standard output; a device node, a folder or
the store's own files are refused.

exit status: 0; 1 with one line '{prog}: error: <reason>' on stderr when the store
or a file cannot be used (check: when the store is damaged); 2 on bad arguments;
check alone: 3 busy, 4 not checked.
""".format(prog=PROG)


def build_parser() -> ca.Parser:
    top, sub_common = ca.common_parents(ca.add_db)
    p = ca.tool_parser(TOOL, "Inspect, export, import/merge, prune and check a shadertune tuning "
                       "store.", EPILOG, parents=[top])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, help_text):
        return sub.add_parser(name, help=help_text, description=help_text, parents=[sub_common])

    def filters(sp, more=False):
        sp.add_argument("--backend", help="only this backend (gl, cuda, ...)")
        sp.add_argument("--device", metavar="TEXT", help="only devices whose key contains TEXT")
        sp.add_argument("--template-hash", metavar="H", help="only results of these kernels")
        sp.add_argument("--problem", metavar="SIZE", type=ca.size,
                        help=f"only this shape: {ca.SIZE_HELP}")
        sp.add_argument("--dtype", choices=("float32", "float64"), help="only this element type")
        if more:
            sp.add_argument("--status", type=ca.status,
                            help="only results with this status (ok, invalid, compile_failed, "
                                 "run_failed, wrong, slow)")
            sp.add_argument("--older-than", type=ca.days, metavar="DAYS",
                            help="only results written more than DAYS days ago")
        return sp

    filters(command("devices", "backends and devices in the store"))
    filters(command("problems", "problems per device")).add_argument(
        "--tolerance", type=ca.tolerance, help="judge errors against this (default: per dtype)")
    best = filters(command("best", "the best config per problem"))
    best.add_argument("--tolerance", type=ca.tolerance, help="judge errors against this (default: per dtype)")
    ca.add_full_config(best)
    ex = filters(command("export", "results as JSON lines or CSV"), more=True)
    ex.add_argument("--format", choices=exchange.FORMATS, default=None,
                    help="jsonl (default) or csv (default from -o's extension)")
    ex.add_argument("-o", "--output", metavar="FILE",
                    help="write here, whole or not at all (default: stdout)")
    ex.add_argument("--best", action="store_true",
                    help="one row per problem (and backend, device, template hash): its fastest "
                         "correct result, with one column per knob (not importable: a summary)")
    ex.add_argument("--tolerance", type=ca.tolerance,
                    help="with --best: judge errors against this (default: per dtype)")
    im = command("import", "merge stores or exports into --db")
    im.add_argument("sources", nargs="+", metavar="SOURCE",
                    help="a store, .jsonl or .csv export; '-': an export on standard input")
    pr = filters(command("prune", "delete matching results"), more=True)
    pr.add_argument("--stale-templates", action="store_true",
                    help="only results whose template hash is not the backend's current one")
    pr.add_argument("--dry-run", action="store_true", help="count, delete nothing")
    command("check", "SQLite's integrity check, the schema and the results' invariants; "
                     "exit 0 healthy, 1 damaged, 3 busy, 4 not checked").add_argument(
        "--wait", type=ca.seconds, default=checks.WAIT, metavar="SECONDS",
        help=f"wait this long for another connection's lock (default {checks.WAIT:g})")
    return p


def where_of(args) -> tuple[list[str], list]:
    """SQL conditions and their arguments from the filter options."""
    conds, vals = [], []
    for opt, cond in (("backend", "backend = ?"), ("device", "instr(device, ?) > 0"),
                      ("template_hash", "template_hash = ?"), ("dtype", "dtype = ?"),
                      ("status", "status = ?")):
        v = getattr(args, opt, None)
        if v is not None:
            conds.append(cond)
            vals.append(v)
    p = getattr(args, "problem", None)
    if p is not None:
        conds.append("M = ? AND N = ? AND K = ?")
        vals += [p.M, p.N, p.K]
    days = getattr(args, "older_than", None)
    if days is not None:
        conds.append("written < ?")
        vals.append(time.time() - days * 86400)
    return conds, vals


def _when(t) -> str:
    return datetime.datetime.fromtimestamp(t).isoformat(sep=" ", timespec="seconds") if t else "-"


def cmd_devices(store, args, where, vals) -> None:
    rows = store.summary(("backend", "device"), where, vals)
    print(text_table(["backend", "device", "results", "correct", "problems", "template hashes",
                      "last written"],
                     [[r["backend"], r["device"], r["results"], r["correct"], r["problems"],
                       r["template_hashes"], _when(r["written"])] for r in rows]))


def _problem(r) -> str:
    return Problem(r["M"], r["N"], r["K"], r["dtype"], bool(r["trans_a"]), bool(r["trans_b"])).label


_PROBLEM_COLS = ("backend", "device", "template_hash", "M", "N", "K", "dtype", "trans_a", "trans_b")


def cmd_problems(store, args, where, vals) -> None:
    rows = store.summary(_PROBLEM_COLS, where, vals, tolerance=args.tolerance)
    print(text_table(["backend", "device", "template hash", "problem", "results", "correct",
                      "last written"],
                     [[r["backend"], r["device"], r["template_hash"], _problem(r), r["results"],
                       r["correct"], _when(r["written"])] for r in rows]))


def cmd_best(store, args, where, vals) -> None:
    out = []
    for r in store.summary(_PROBLEM_COLS, where, vals, tolerance=args.tolerance):
        p = Problem(r["M"], r["N"], r["K"], r["dtype"], bool(r["trans_a"]), bool(r["trans_b"]))
        b = store.best(r["backend"], r["device"], p, r["template_hash"], tolerance=args.tolerance)
        out.append([r["backend"], r["device"], r["template_hash"], _problem(r),
                    config_text(r["backend"], b.config, full=args.full_config) if b else "(none correct)",
                    f"{b.gflops:.4g}" if b else "-", f"{b.median_ms:.4g}" if b else "-",
                    f"{b.error:.1e}" if b and b.error is not None else "-"])
    print(text_table(["backend", "device", "template hash", "problem", "best config", "GFLOP/s",
                      "ms", "error"], out))


def cmd_export(store, args, where, vals) -> None:
    from ..core.atomic import output
    fmt = args.format or ("csv" if (args.output or "").lower().endswith(".csv") else "jsonl")
    # a damaged store's export is its rescue: rows that no longer make a whole record
    # are left out (and counted), so that what is written imports into a new store
    skipped: list | None = [] if store.damaged else None
    with output(args.output or "-", "w", newline="", protect=store_files(store.path)) as out:
        if args.best:
            n = exchange.export_best(store, out, fmt, where, vals, args.tolerance)
        else:
            n = exchange.export(store, out, fmt, where, vals, skipped)
    if skipped:
        print(f"{PROG}: warning: {len(skipped)} damaged results left out (first: {skipped[0]})",
              file=sys.stderr)
    if args.output not in (None, "-"):
        what = "problems' best results" if args.best else "results"
        print(f"{n} {what} written to {args.output} ({fmt})", file=sys.stderr)


def cmd_import(store, args, where, vals) -> None:
    counts = exchange.merge(store, args.sources)
    print(f"{counts['added']} added, {counts['replaced']} replaced by newer measurements, "
          f"{counts['kept']} kept (the stored measurement was as new or newer); store: {store.path}")


def cmd_prune(store, args, where, vals) -> None:
    if args.stale_templates:
        (stale, more), skipped = _stale_templates(store)
        where, vals = f"{where} AND {stale}", [*vals, *more]
        for name in skipped:
            print(f"{PROG}: backend {name!r} is not known here: its results are left alone",
                  file=sys.stderr)
    cond = where
    n = store.count_rows(cond, vals)
    if args.dry_run:
        print(f"{n} results would be deleted from {store.path}")
        return
    store.delete(f"schema = ? AND {cond}", [store.version, *vals])
    print(f"{n} results deleted from {store.path}")


def _stale_templates(store) -> tuple[tuple[str, list], list[str]]:
    """An SQL condition for results of template hashes not current for their backend."""
    from ..backends import available, get_backend
    names = [r["backend"] for r in store.summary(("backend",))]
    known = [n for n in names if n in available()]
    current = {n: get_backend(n).template_hash() for n in known}
    if not current:
        return ("0", []), names
    cond = " OR ".join("(backend = ? AND template_hash != ?)" for _ in current)
    return (f"({cond})", [v for kv in current.items() for v in kv]), [n for n in names if n not in current]


class _BadArgument(Exception):
    pass


def cmd_check(path, wait: float) -> int:
    health = checks.check_store(path, wait=wait)
    for line in health.findings:
        print(line)
    print(health.verdict())
    return health.exit_status


def _warn_if_damaged(store) -> None:
    """A listing or export of a damaged store shows what can still be read, and says so
    (store.damaged: the export then leaves out rows it cannot make whole)."""
    try:
        store.check_health()
    except StoreError as e:
        store.damaged = True
        print(ca.error_line(TOOL, f"{e} (below: what can still be read)").replace(
            ": error: ", ": warning: ", 1), file=sys.stderr)


COMMANDS = {"devices": cmd_devices, "problems": cmd_problems, "best": cmd_best,
            "export": cmd_export, "import": cmd_import, "prune": cmd_prune}


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "export" and args.best and (args.status or args.older_than is not None):
            raise _BadArgument("export --best takes each problem's fastest correct result: "
                               "--status and --older-than do not go with it")
        if args.command == "export" and args.tolerance is not None and not args.best:
            raise _BadArgument("--tolerance goes with export --best")
        conds, vals = where_of(args) if args.command not in ("import", "check") else ([], [])
        if args.command == "prune" and not conds and not args.stale_templates:
            raise _BadArgument("prune needs at least one filter (it would delete every result)")
        path = store_path(args.db)
        if args.command == "export":
            ca.check_output(args.output, protect=store_files(path))
    except _BadArgument as e:
        parser.error(str(e))
    except (StoreError, OutputError) as e:
        parser.error(str(e))
    where = " AND ".join(conds) or "1"
    reading = args.command not in ("import", "prune")
    try:
        if args.command == "check":
            try:
                missing = not ca.path_exists(path)
            except PermissionError:      # a folder on its way this user may not enter
                missing = False          # check says: not checked (exit 4)
            if missing:
                raise StoreError(f"store {path} does not exist")
            return cmd_check(path, args.wait)
        if args.command != "import" and not ca.path_exists(path):    # only import makes a store
            raise StoreError(f"store {path} does not exist")
        # best answers what auto would run: from a damaged store it refuses (the health
        # check runs on its first read); the other listings and export show what can
        # still be read, and say the store is damaged
        rescue = reading and args.command != "best"
        with Store(path, readonly=True if reading else None, damaged_ok=rescue) as store:
            if rescue:
                _warn_if_damaged(store)
            elif not store.readonly:
                store.check_health()     # import and prune never write into a damaged store
            COMMANDS[args.command](store, args, where, vals)
    except _BadArgument as e:
        parser.error(str(e))
    except (StoreError, OutputError) as e:
        return ca.fail(TOOL, e)
    except BrokenPipeError:              # e.g. `export | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as e:                 # a store or source path that cannot be reached
        return ca.fail(TOOL, ca.os_error_text(e))
    return 0
