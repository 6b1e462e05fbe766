"""python -m shadertune.search: tune matmul for one or more shapes on one backend."""
from __future__ import annotations

import argparse
import importlib
import logging
import pathlib
import sys

from . import args as ca
from ..core.version import __version__
from .cluster import check_args, clustered   # imports no Dask
from ..db.location import store_files
from ..errors import ContextError, ShadertuneError
from ..core.problem import Problem
from ..core.texttable import text_table
from ..search.budget import Budget
from ..search.progress import InterruptGuard, Progress
from ..search.registry import DESCRIPTIONS, STRATEGIES
from ..search.report_json import make_report, problem_entry, write_report

TOOL = "search"
PROG = "shadertune.search"
log = logging.getLogger("shadertune.search")

# Seconds per problem on a software renderer when neither --budget nor --time-limit is
# given: llvmpipe measures a 1024^3 config in seconds, and Jiang's full order takes hours.
SOFTWARE_TIME_LIMIT = 30.0

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


def check_environment(name: str) -> None:
    """The environment variables backend `name` reads (Backend.check_environment), checked
    before anything touches a store; a module:Class backend is checked when it loads."""
    if ":" in name:
        return
    from ..backends import backend_class
    try:
        cls = backend_class(name)
    except (KeyError, ValueError):
        return                       # an unknown name fails where the backend is made
    cls.check_environment()


def load_backend(name: str):
    """A backend by registry name, or module:Class of a shadertune Backend subclass."""
    from ..backends import Backend, get_backend
    if ":" not in name:
        return get_backend(name)
    mod, cls = name.split(":", 1)
    try:
        obj = getattr(importlib.import_module(mod), cls)
    except Exception as e:               # ImportError, AttributeError, or the module's own error
        raise ShadertuneError(f"cannot load backend {name!r}: {type(e).__name__}: {e}") from None
    if not (isinstance(obj, type) and issubclass(obj, Backend)):
        raise ShadertuneError(f"cannot load backend {name!r}: {mod}.{cls} is not a shadertune "
                              f"Backend class (a subclass of shadertune.backends.Backend)")
    try:
        return obj()
    except ContextError:
        raise
    except Exception as e:
        raise ShadertuneError(f"cannot create backend {name!r}: {type(e).__name__}: {e}") from None


def check_arguments(args, parser) -> None:
    """What the parser's types cannot see, checked before the store is opened: the
    environment the backend reads, and that --report may be written (not a device
    node, a folder, or the store's own files)."""
    from ..db.location import store_files, store_path
    from ..search.restrict import parse_fix
    try:
        if args.fix and clustered(args):
            raise ValueError("--fix narrows a search on this machine; it does not reach a "
                             "cluster's workers (leave out --workers / --gpus / --cluster)")
        args.fix = parse_fix(args.fix) if args.fix else None      # a knob fixed twice: both
        check_environment(args.backend)
        store = store_path(args.db)
        if args.report:
            for path in report_paths(args.report, 1):
                ca.check_output(path, protect=store_files(store))
    except (ValueError, ShadertuneError, OSError) as e:
        parser.error(str(e))


class _BadArgument(ValueError):
    """An argument found wrong once the backend is there (--fix against its spaces): exit 2."""


def fmt_config(cfg: dict, backend: str | None = None, full: bool = True) -> str:
    """'knob=value ...': every knob, or with `backend` and not `full` the knobs that act
    on the config (shadertune.backends.config_text)."""
    from ..backends import config_text
    return config_text(backend or "", cfg, full=full or backend is None)


def table(entries: list[dict], backend: str | None = None, *, full_config: bool = False) -> str:
    """The search's table: one row per problem, its best config with the knobs that act
    on it (every knob with `full_config`, or without `backend`)."""
    head = ["problem", "best config", "GFLOP/s", "ms", "error", "evals (measured/cached)",
            "seconds", "space (pruned/full)"]
    rows = []
    for e in entries:
        b = e["best"]
        rows.append([Problem.from_dict(e).label + (" (incomplete)" if e.get("incomplete") else ""),
                     fmt_config(b["config"], backend, full_config) if b else "(none passed)",
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


def _budget(args, device) -> Budget:
    seconds = args.time_limit
    if seconds is None and args.budget is None and (device.limits or {}).get("software_renderer"):
        seconds = SOFTWARE_TIME_LIMIT
        log.warning("%s is a software renderer: each problem stops starting evaluations after "
                    "%g s (--time-limit S to change, 0: no limit)", device.renderer, seconds)
    # a time limit the user gave is search time asked for: it is spent, not cut short by
    # convergence (the software renderer's implicit limit is only a cap)
    return Budget(args.budget, seconds or None, spend_all=bool(args.time_limit))


class _Problem:
    """One problem being searched: what the report needs if the search stops part-way."""

    def __init__(self, problem: Problem, progress: Progress, backend: str | None = None):
        self.problem = problem
        self.progress = progress
        self.backend = backend       # its name: the log lines print the knobs that act
        self.results = []
        self.cached = []
        self.phases: list[dict] = []     # the strategy's phases as they began (report_json)
        self.t0 = progress.clock()

    def phase(self, label: str) -> None:
        self.phases.append({"at": len(self.results), "label": label})
        self.progress.phase(label)

    def record(self, result, cached: bool, worker: str | None = None) -> None:
        """One Result of this search (`worker`: the cluster worker that measured it)."""
        self.results.append(result)
        if cached:
            self.cached.append(result.config)
        self.progress.update(result, cached, worker)
        if log.isEnabledFor(logging.INFO):
            r = result
            what = (f"{r.median_ms:.4g} ms, {r.gflops or 0:.3g} GFLOP/s, error {r.error or 0:.1e}"
                    if r.ok else r.message)
            log.info("%s %s: %s: %s%s", self.problem.label, fmt_config(r.config, self.backend, False),
                     r.status, what,
                     " (cached)" if cached else "")

    def with_replayed_seconds(self, entry: dict, store, backend, device) -> dict:
        """entry["seconds"]: this run's seconds plus those the store records for measuring
        the results it replayed, so that a report rebuilt from the store carries the
        original search time; entry["run_seconds"]: this run's alone."""
        replayed, unknown = store.measured_seconds(backend.name, device.key, self.problem,
                                                   backend.template_hash(), self.cached)
        if unknown:
            log.info("%s: %d replayed results have no measuring time on record (stored before "
                     "schema version 3)", self.problem.label, unknown)
        entry["run_seconds"] = entry["seconds"]
        entry["seconds"] = round(entry["seconds"] + replayed, 6)
        return entry

    def incomplete_entry(self, store, backend, device) -> dict:
        from ..db import space_sizes
        size, full = space_sizes(store, backend, self.problem, backend.space(self.problem))
        entry = problem_entry(self.problem, self.results, space_size=size, full_space_size=full,
                              measured=len(self.results) - len(self.cached),
                              cached=len(self.cached), seconds=self.progress.clock() - self.t0,
                              phases=self.phases)
        entry["incomplete"] = True
        return self.with_replayed_seconds(entry, store, backend, device)


class DeviceRun:
    """One device's part of a table: the entries of its finished problems and the
    problems in progress (one at a time here; a cluster tunes several at once)."""

    def __init__(self, backend, device):
        self.backend = backend
        self.device = device
        self.entries: dict[Problem, dict] = {}
        self.current: dict[Problem, _Problem] = {}

    def start(self, problem: Problem, progress: Progress) -> _Problem:
        self.current[problem] = _Problem(problem, progress, self.backend.name)
        return self.current[problem]

    def finish(self, problem: Problem, entry: dict, store) -> None:
        current = self.current.pop(problem)
        self.entries[problem] = current.with_replayed_seconds(entry, store, self.backend, self.device)

    def stop(self, store) -> None:
        """The search stopped: each problem still in progress that has results becomes an
        incomplete entry."""
        for problem, current in self.current.items():
            current.progress.close(incomplete=True)
            if current.results:
                try:
                    self.entries[problem] = current.incomplete_entry(store, self.backend, self.device)
                except (Exception, KeyboardInterrupt) as e:      # a second Ctrl-C, a failing store
                    log.warning("no report entry for %s in progress: %s", problem.label,
                                str(e) or type(e).__name__)
        self.current.clear()

    def ordered(self, problems: list[Problem]) -> list[dict]:
        """The entries in the order of the table."""
        return [self.entries[p] for p in problems if p in self.entries]


def report_paths(path: str, count: int) -> list[str]:
    """--report's file per device: as given for one, r.json -> r.0.json, r.1.json, ...
    for several."""
    if count == 1:
        return [path]
    p = pathlib.Path(path)
    return [str(p.with_name(f"{p.stem}.{i}{p.suffix}")) for i in range(count)]


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
    # the command line is the top layer: it searches with the learned model saved
    # beside the store (perfmodel.guided) and trains it when the search has written
    from ..perfmodel.guided import tune
    from ..perfmodel.saved import train_if_stale
    runs: list[DeviceRun] = []           # one per device, in the order of their tables
    notes: list[str] = []                # lines after the tables (a cluster's per-worker counts)
    store = None
    code, reason = 0, None
    try:
        if clustered(args):
            from .cluster import tune_on_cluster
            store = _open_store(args, Store)
            tune_on_cluster(args, problems, store, runs, notes, DeviceRun, _budget)
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
            budget = _budget(args, device)
            store = _open_store(args, Store)
            run = DeviceRun(backend, device)
            runs.append(run)
            for i, pr in enumerate(problems, 1):
                progress = Progress(pr.label, index=i, count=len(problems),
                                    total=budget.max_evals, time_limit=budget.seconds,
                                    mode="off" if args.quiet else None)
                current = run.start(pr, progress)
                entry = tune(backend, pr, strategy=args.strategy, budget=budget, store=store,
                             retune=args.retune, repeats=args.repeats, warmup=args.warmup,
                             seed=args.seed, tolerance=args.tolerance, on_result=current.record,
                             on_phase=current.phase)
                run.finish(pr, entry, store)
                progress.close()
            if not store.readonly:
                train_if_stale(backend, store)       # tuning writes: the learned model follows
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


__all__ = ["DeviceRun", "build_parser", "check_environment", "failure", "load_backend", "main", "problems_from",
           "table"]
