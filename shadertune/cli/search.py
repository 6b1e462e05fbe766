"""python -m shadertune.search: tune matmul for one or more shapes on one backend."""
from __future__ import annotations

import argparse
import logging
import sys

from . import args as ca
from ..backends import check_environment, config_text, load_backend
from ..core.problem import Problem
from ..core.texttable import text_table
from ..db.location import store_files
from ..errors import ContextError, ShadertuneError
from ..search.progress import InterruptGuard, Progress
from ..search.registry import DESCRIPTIONS, STRATEGIES
from ..search.report_json import make_report, write_report
from .search_cluster import check_args, clustered   # imports no Dask
from .search_runs import SOFTWARE_TIME_LIMIT, DeviceRun, report_paths, search_budget

TOOL = "search"
PROG = "shadertune.search"
log = logging.getLogger("shadertune.search")

EPILOG = f"""\
sizes: --size N tunes N x N x N; --m M --n N --k K one shape; --sizes 256,512,1024
a table of squares (an item may also be MxNxK, or BxMxNxK: a batch of B products run
as one launch, a CUDA problem of its own; repeated items are tuned once), so
that shadertune.matmul(A, B) with config="auto" can pick the best stored config
for a shape (exact, else the nearest tuned shape).

limits: --budget and --time-limit apply to each problem.  On a software renderer
(device limit software_renderer, e.g. Mesa's llvmpipe) a search given neither
stops starting evaluations after {SOFTWARE_TIME_LIMIT:g} s per problem; --time-limit 0
means no limit.

store: --db PATH, else $SHADERTUNE_DB, else $XDG_CACHE_HOME/shadertune/tune.sqlite
(~/.cache/shadertune/tune.sqlite).  Every result is written as it is measured: an
interrupted search resumes where it stopped when run again with the same
arguments, and --retune measures everything afresh.  Stored verdicts are judged
against this run's --tolerance.  A read-only store (a shared one) is replayed, and
the search stops at the first measurement it would have to write: import it into
a writable one first (python -m shadertune.db import SHARED --db MINE).
--report must be another file than the store.

progress: on a terminal a bar per problem (evaluations out of the budget with an
ETA, or the time out of the limit; phase; best so far); elsewhere a line when a
problem starts, every 10 s and when it ends; -q prints none; -v logs each
evaluation (logger "shadertune"), -vv more.

Ctrl-C stops the search: the table and --report hold the finished problems and
the one in progress (marked incomplete); rerun to resume.  A second Ctrl-C while
it stops is noted and the report still written (exit 130); a third stops at once.

several GPUs: --workers N (this machine) or --cluster ADDRESS (GPU hosts running
'python -m shadertune.cluster worker ADDRESS --gpus 0,1') spread the problems and
evaluations over one worker per GPU (Dask distributed: pip install
'shadertune[cluster]').  One store; one table and one report per device (with
several devices, --report r.json writes r.0.json, r.1.json, ...); the progress
counts evaluations per worker (docs/cluster.md).

time limits: a search measures its first config whatever --time-limit says (its
start point; the default config for the model strategy), so a short search still
ends with a measurement.

exit status: 0 when every problem has a verified best config; 1 on failure (no
GPU context, unusable or unwritable store, no config passed verification, nothing
measured) with one line '{PROG}: error: <reason>' on stderr; 2 on bad arguments
(--fix included: checked against the device's space before the store is opened);
130 when interrupted.
"""


def build_parser() -> argparse.ArgumentParser:
    p = ca.tool_parser(TOOL, "Autotune C = A @ B for a backend and shape(s): phased "
                       "(Jiang),\nexhaustive or random search over the pruned kernel space; every config "
                       "verified\nagainst float64, timed with GPU timers and stored in SQLite.", EPILOG)
    ca.add_backend(p)
    g = p.add_argument_group("problem")
    g.add_argument("--size", type=ca.size, metavar="SIZE", help=ca.SIZE_HELP)
    g.add_argument("--m", type=ca.positive, metavar="M", help="rows of A and C (with --n and --k)")
    g.add_argument("--n", type=ca.positive, metavar="N", help="columns of B and C")
    g.add_argument("--k", type=ca.positive, metavar="K", help="columns of A, rows of B")
    g.add_argument("--sizes", type=ca.sizes, metavar="LIST",
                   help="comma-separated sizes, each N, MxNxK or BxMxNxK, e.g. 256,512,1024 or "
                        "512x256x64 (BxMxNxK: a batch of B products, one launch)")
    g.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                   help="element type (float64 on CUDA only; default float32)")
    g.add_argument("--trans-a", action="store_true", help="A is stored transposed (K x M)")
    g.add_argument("--trans-b", action="store_true", help="B is stored transposed (N x K)")
    s = p.add_argument_group("search")
    s.add_argument("--strategy", choices=sorted(STRATEGIES),
                   help="; ".join(f"{k}: {v}" for k, v in DESCRIPTIONS.items()) +
                        " (default: the backend's, phased for gl, model for cuda)")
    s.add_argument("--fix", action="append", metavar="KNOB=V[,V...]", type=_fix_item,
                   help="search only the configs with these knob values, e.g. family=fragment "
                        "(Jiang's reproduction) or family=compute; repeatable (a knob fixed twice "
                        "keeps the values both allow); checked against the space's domains on "
                        "the device before the store is opened")
    s.add_argument("--budget", type=ca.positive, metavar="N", help="at most N evaluations per problem")
    s.add_argument("--time-limit", type=ca.seconds, metavar="S",
                   help="stop starting new evaluations after S seconds per problem (0: no "
                        f"limit; default: none, {SOFTWARE_TIME_LIMIT:g} on a software renderer "
                        "without --budget)")
    s.add_argument("--repeats", type=ca.positive, default=10, help="timed runs per config (default 10)")
    s.add_argument("--warmup", type=ca.non_negative, default=2, help="untimed runs first (default 2)")
    s.add_argument("--tolerance", type=ca.tolerance,
                   help="largest relative Frobenius error accepted, a finite number > 0 "
                        "(default 1e-5 float32, 1e-12 float64)")
    s.add_argument("--seed", type=ca.seed, default=0,
                   help="seed of the inputs and of random, an integer >= 0 (default 0; not a "
                        "store key)")
    s.add_argument("--retune", action="store_true",
                   help="measure every config afresh instead of reusing stored results")
    c = p.add_argument_group("several GPUs or hosts (Dask distributed: pip install "
                             "'shadertune[cluster]'; see docs/cluster.md)")
    c.add_argument("--workers", type=ca.positive, metavar="N",
                   help="N worker processes on this machine, one per GPU (GL: EGL device index, "
                        "CUDA: device id 0..N-1); the problems and evaluations spread over them")
    c.add_argument("--gpus", metavar="LIST",
                   help="the GPU of each local worker, e.g. 1,2 (default 0..N-1)")
    c.add_argument("--cluster", metavar="ADDRESS",
                   help="use the workers of the Dask scheduler at ADDRESS (started on each GPU "
                        "host with: python -m shadertune.cluster worker ADDRESS --gpus 0,1)")
    o = p.add_argument_group("output")
    ca.add_db(o)
    o.add_argument("--report", metavar="PATH",
                   help="write the JSON report here, whole or not at all ('-' or /dev/stdout: "
                        "standard output)")
    ca.add_full_config(o)
    o.add_argument("-q", "--quiet", action="store_true", help="no progress")
    o.add_argument("-v", "--verbose", action="count", default=0,
                   help="log each evaluation (-vv: more)")
    return p


def _fix_item(text: str):
    """An argparse type: one --fix item (search/restrict.fix_item)."""
    from ..search.restrict import fix_item
    try:
        return fix_item(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--fix ")) from None


def problems_from(args, parser) -> list[Problem]:
    """The problems to tune, in the order given, each once."""
    forms = [args.size is not None, any(v is not None for v in (args.m, args.n, args.k)),
             args.sizes is not None]
    if sum(forms) != 1:
        parser.error("give exactly one of --size SIZE, --m M --n N --k K, or --sizes LIST")
    if args.size is not None:
        shapes = [args.size]
    elif args.sizes is not None:
        shapes = args.sizes
    else:
        if None in (args.m, args.n, args.k):
            parser.error("--m, --n and --k go together")
        shapes = [Problem(args.m, args.n, args.k)]
    out = [Problem(s.M, s.N, s.K, args.dtype, args.trans_a, args.trans_b, s.batch) for s in shapes]
    unique = list(dict.fromkeys(out))
    if len(unique) < len(out):
        log.info("repeated sizes tuned once: %d problems", len(unique))
    return unique


def check_arguments(args, parser) -> None:
    """What the parser's types cannot see, checked before the store is opened: the
    dtype against the backend's, the environment the backend reads, and that --report
    may be written (not a device node, a folder, or the store's own files)."""
    from ..db.location import store_files, store_path
    from ..search.restrict import parse_fix
    try:
        if args.fix and clustered(args):
            raise ValueError("--fix narrows a search on this machine; it does not reach a "
                             "cluster's workers (leave out --workers / --gpus / --cluster)")
        args.fix = parse_fix(args.fix) if args.fix else None      # a knob fixed twice: both
        ca.check_dtype(args.backend, args.dtype)
        check_environment(args.backend)
        store = store_path(args.db)
        if args.report:
            for path in report_paths(args.report, 1):
                ca.check_output(path, protect=store_files(store))
    except (ValueError, ShadertuneError, OSError) as e:
        parser.error(str(e))


class _BadArgument(ValueError):
    """An argument found wrong once the backend is there (--fix against its spaces): exit 2."""


def table(entries: list[dict], backend: str | None = None, *, full_config: bool = False) -> str:
    """The search's table: one row per problem, its best config with the knobs that act
    on it (every knob with `full_config`, or without `backend`)."""
    head = ["problem", "best config", "GFLOP/s", "ms", "error", "evals (measured/cached)",
            "seconds", "space (pruned/full)"]
    rows = []
    for e in entries:
        b = e["best"]
        rows.append([Problem.from_dict(e).label + (" (incomplete)" if e.get("incomplete") else ""),
                     config_text(backend or "", b["config"], full=full_config or backend is None)
                     if b else "(none passed)",
                     f"{b['gflops']:.2f}" if b else "-", f"{b['median_ms']:.4g}" if b else "-",
                     f"{b['error']:.1e}" if b and b["error"] is not None else "-",
                     f"{e['evaluated']} ({e['measured']}/{e['cached']})", f"{e['seconds']:.1f}",
                     f"{e['space_size']}/{e['full_space_size']}"])
    return text_table(head, rows)


def header(backend: str, device) -> str:
    """The line a search starts with: the backend, and the device by its renderer and
    driver (its key in the store is 'renderer | driver')."""
    return f"{PROG}: tuning on the {backend} backend: {device.describe()}"


def fail(reason: str, code: int = 1) -> int:
    return ca.fail(TOOL, reason, code)


class _TqdmHandler(logging.Handler):
    """Log lines on stderr that leave a progress bar intact."""

    def emit(self, record):
        try:
            from tqdm import tqdm
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:
            self.handleError(record)


def _logging(args):
    logger = logging.getLogger("shadertune")
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    level = logging.ERROR if args.quiet else (logging.WARNING, logging.INFO)[min(args.verbose, 1)]
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if args.verbose > 1 else level)

    def restore():
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return restore


def main(argv=None) -> int:
    from ..db import Store, StoreError
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(args, parser)
    problems = problems_from(args, parser)
    check_arguments(args, parser)
    restore_logging = _logging(args)
    try:
        with InterruptGuard():           # a second Ctrl-C still gets the report written
            return _search(args, problems, Store, StoreError)
    except KeyboardInterrupt:            # Ctrl-C again and again: stopped at once
        return fail("interrupted while stopping; results measured so far are in the store", 130)
    finally:
        restore_logging()


def _open_store(args, Store):
    store = Store(args.db)
    if not store.readonly:
        try:
            store.check_health()         # a damaged store is refused before anything is measured
        except BaseException:
            store.close()
            raise
    if store.readonly:
        log.warning("store %s is read-only: its results are replayed and the search stops at "
                    "the first measurement it would have to write", store.path)
    return store


def _search(args, problems, Store, StoreError) -> int:
    # tune, then train: the search ranks by the learned model saved beside the store and
    # trains it at the end (perfmodel.tuning_run, as tune(), the demo and sampling do)
    from ..perfmodel.tuning_run import TuningRun
    runs: list[DeviceRun] = []           # one per device, in the order of their tables
    notes: list[str] = []                # lines after the tables (a cluster's per-worker counts)
    store = None
    code, reason = 0, None
    try:
        if clustered(args):
            from .search_cluster import tune_on_cluster

            def open_store():
                # once the workers have opened their backends: a cluster none of whose
                # workers can open it leaves no store file behind
                nonlocal store
                store = _open_store(args, Store)
                return store
            tune_on_cluster(args, problems, open_store, runs, notes)
        else:
            backend = load_backend(args.backend)
            if args.fix:
                # checked on the device's spaces before the store is opened: a bad --fix is
                # an argument error (exit 2), not a search that finds nothing
                from ..search.restrict import RestrictedBackend, check_fix
                try:
                    check_fix(backend, problems, args.fix)
                except ValueError as e:
                    raise _BadArgument(f"argument --fix: {str(e).removeprefix('--fix ')}") from None
                backend = RestrictedBackend(backend, args.fix)
            device = backend.device()
            if not args.quiet:
                print(header(backend.name, device), file=sys.stderr, flush=True)
            budget = search_budget(args, device)
            store = _open_store(args, Store)
            run = DeviceRun(backend, device)
            runs.append(run)
            with TuningRun(backend, store) as tuning:
                for i, pr in enumerate(problems, 1):
                    progress = Progress(pr.label, index=i, count=len(problems),
                                        total=budget.max_evals, time_limit=budget.seconds,
                                        mode="off" if args.quiet else None)
                    current = run.start(pr, progress)
                    entry = tuning.search(pr, strategy=args.strategy, budget=budget,
                                          retune=args.retune, repeats=args.repeats,
                                          warmup=args.warmup, seed=args.seed,
                                          tolerance=args.tolerance, on_result=current.record,
                                          on_phase=current.phase)
                    run.finish(pr, entry, store)
                    progress.close()
    except _BadArgument as e:
        code, reason = 2, str(e)
    except KeyboardInterrupt:
        code, reason = 130, "interrupted; results measured so far are in the store, rerun to resume"
    except (ContextError, StoreError, ShadertuneError, ValueError, ImportError) as e:
        code, reason = 1, str(e) or type(e).__name__
    except OSError as e:                 # a path of the store or the backend's files
        code, reason = 1, ca.os_error_text(e)
    for run in runs:
        run.stop(store)
    if store is not None:
        store.close()
    tables = [(run, run.ordered(problems)) for run in runs]
    tables = [(run, entries) for run, entries in tables if entries]
    for run, entries in tables:
        if len(tables) > 1:
            print(f"device: {run.device.key}")
        print(table(entries, run.backend.name, full_config=args.full_config))
    for line in notes:
        print(line)
    if tables:
        print(f"store: {store.path}")
    if args.report and tables:
        for path, (run, entries) in zip(report_paths(args.report, len(tables)), tables):
            try:
                write_report(path, make_report(run.backend.name, run.device,
                                               args.strategy or run.backend.default_strategy,
                                               entries), protect=store_files(store.path))
            except OSError as e:         # atomic.OutputError: one line naming the file
                return fail(f"report not written: {e}" + (f" (and: {reason})" if reason else ""),
                            code or 1)
    if reason is not None:
        return fail(reason, code)
    reason = failure([e for _, entries in tables for e in entries])
    return 0 if reason is None else fail(reason)


def failure(entries: list[dict]) -> str | None:
    """Why the search failed, from its report entries (None: each problem has a verified
    best config).  Nothing measured is no verdict on any config: it is said apart from
    configs that all failed verification."""
    def named(es):
        return ", ".join(Problem.from_dict(e).label for e in es)
    empty = [e for e in entries if e["evaluated"] == 0 and e.get("space_size") == 0]
    unmeasured = [e for e in entries if e["evaluated"] == 0 and e not in empty]
    failed = [e for e in entries if e["best"] is None and e["evaluated"]]
    reasons = ([f"the space of {named(empty)} has no valid config"] if empty else []) + \
        ([f"nothing was measured within the time limit for {named(unmeasured)}"] if unmeasured else []) + \
        ([f"no config passed verification for {named(failed)} (see the statuses in the store or "
          f"--report)"] if failed else [])
    return "; ".join(reasons) or None


__all__ = ["build_parser", "failure", "header", "main", "problems_from",
           "table"]
