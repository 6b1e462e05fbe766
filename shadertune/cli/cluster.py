"""Command lines of the cluster: the search CLI's --workers/--gpus/--cluster, and

    python -m shadertune.cluster worker ADDRESS --gpus 0,1

which serves the scheduler at ADDRESS with one worker per GPU of this host.
"""
from __future__ import annotations

import argparse
import logging
import sys
import threading

from . import args as ca
from ..errors import ShadertuneError
from ..cluster import engine

TOOL = "cluster"
WORKER_PROG = ca.prog(TOOL)
EPILOG = ("A scheduler that cannot be reached (refused, no such host, no answer in 5 s) "
          "fails at once with one line 'shadertune.cluster: error: <reason>' and exit "
          "status 1; 2 on bad arguments.")


def clustered(args) -> bool:
    """Whether the search CLI's arguments ask for a cluster."""
    return args.workers is not None or args.gpus is not None or args.cluster is not None


def check_args(args, parser) -> None:
    """One-line argparse errors for the cluster options of the search CLI."""
    if args.cluster is not None and (args.workers is not None or args.gpus is not None):
        parser.error("give --workers/--gpus (a local cluster) or --cluster ADDRESS, not both")
    if args.gpus is not None:
        try:
            gpus = engine.parse_gpus(args.gpus)
        except ValueError as e:
            parser.error(f"--gpus: {e}")
        if args.workers is not None and args.workers != len(gpus):
            parser.error(f"--workers {args.workers} but --gpus names {len(gpus)} GPUs")


def local_gpus(args) -> list[int]:
    return engine.parse_gpus(args.gpus) if args.gpus is not None else list(range(args.workers))


def tune_on_cluster(args, problems, store, runs: list, notes: list, device_run, budget_of,
                    stream=None) -> None:
    """The search CLI's tuning step on a local cluster (--workers/--gpus) or on the
    scheduler at --cluster: one search per problem and device group, their results
    in `store`'s file.  Fills `runs` with a device_run(backend, device) per device
    (the search CLI's DeviceRun, sorted by device key) holding the finished entries
    and the problems still in progress when it stopped (an error or Ctrl-C: also
    then), and `notes` with the line of evaluations per worker; budget_of(args,
    device) is the search CLI's budget per device.  Worker events (exclusions) go to
    `stream` as they happen; one progress for the table (search.progress.Progress)
    counts per worker.  The search CLI hands DeviceRun and its budget rule over, so
    the two command lines do not import each other."""
    engine.require_distributed()
    from ..search.progress import Progress
    from ..cluster.coordinator import Coordinator
    from ..cluster.table import tune_table
    stream = stream or sys.stderr

    def event(message: str) -> None:
        print(f"shadertune.search: {message}", file=stream, flush=True)

    # what matters reaches the user as these events or as one error line; Dask's own log
    # lines (a lost connection's traceback) would bury them
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.CRITICAL)

    where = engine.local_cluster(local_gpus(args), [args.backend]) if args.cluster is None \
        else engine.connect(args.cluster)
    try:
        with where as client:
            coordinator = Coordinator(client, args.backend, on_event=event)
            total = args.budget * len(problems) * len(coordinator.groups) if args.budget else None
            workers = len(coordinator.names())
            label = f"{len(problems)} problem{'s' * (len(problems) > 1)} on " \
                    f"{workers} worker{'s' * (workers != 1)}"
            progress = Progress(label, total=total, stream=stream,
                                mode="off" if args.quiet else None)
            by_group: dict = {}          # DeviceGroup -> DeviceRun
            finished: dict = {}          # (DeviceGroup, Problem) -> entry
            lock = threading.Lock()      # the table's search threads report here

            def on_search(group, problem):
                with lock:
                    if group not in by_group:
                        by_group[group] = device_run(group.backend, group.device)
                    current = by_group[group].start(problem, progress)

                def on_result(result, cached, worker):
                    with lock:
                        current.record(result, cached, worker)
                return on_result
            try:
                tune_table(coordinator, problems, strategy=args.strategy,
                           budget=lambda device: budget_of(args, device),
                           store_path=store.path, retune=args.retune, repeats=args.repeats,
                           warmup=args.warmup, seed=args.seed, tolerance=args.tolerance,
                           on_search=on_search, finished=finished)
            finally:
                for (group, problem), entry in finished.items():
                    by_group[group].finish(problem, entry, store)
                progress.close(incomplete=any(r.current for r in by_group.values()))
                runs.extend(sorted(by_group.values(), key=lambda r: r.device.key))
                if progress.n:
                    notes.append(workers_line(progress))
    except OSError as e:                 # Dask's lost connections and time-outs
        raise ShadertuneError(f"the Dask cluster failed ({type(e).__name__}: "
                              f"{' '.join(str(e).split())}); results measured so far are in "
                              f"the store, rerun to resume") from None


def workers_line(progress) -> str:
    """'evaluations per worker: gpu0 12, gpu1 11; total 23 measured, 1 replayed from
    the store' (a Progress that counted a cluster's evaluations)."""
    counts = ", ".join(f"{w} {n}" for w, n in sorted(progress.per_worker.items())) or "-"
    measured = progress.n - progress.cached
    stored = f", {progress.cached} replayed from the store" if progress.cached else ""
    return f"evaluations per worker: {counts}; total {measured} measured{stored}"


def _gpus(text: str) -> list[int]:
    try:
        return engine.parse_gpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _backends(text: str) -> list[str]:
    from ..backends import available
    names = [b.strip() for b in str(text).split(",") if b.strip()]
    bad = [b for b in names if b not in available() and ":" not in b]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"backends are {', '.join(available())} or module:Class, "
                                         f"comma-separated; got {text!r}")
    return names


def build_parser() -> argparse.ArgumentParser:
    p = ca.tool_parser(TOOL, "Serve a Dask scheduler with one shadertune worker per GPU of this host "
                       "(start the scheduler with `dask scheduler`; tune with python -m "
                       "shadertune.search ... --cluster ADDRESS).", EPILOG, raw=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    w = sub.add_parser("worker", help="one worker process per GPU of this host")
    w.add_argument("address", help="the scheduler, e.g. tcp://head-node:8786")
    w.add_argument("--gpus", type=_gpus, default=[0],
                   help="GPU indices, one worker each (default 0), e.g. 0,1")
    w.add_argument("--backends", type=_backends, default=["gl", "cuda"],
                   help="the backends each worker opens on its GPU as it starts: gl, cuda or "
                        "module:Class, comma-separated (default gl,cuda; one that does not "
                        "open is reported to the coordinators that ask for it)")
    w.add_argument("--host", help="the address the workers listen on (default: Dask's choice)")
    w.add_argument("--name", help="worker name prefix (default: this host's name)")
    w.add_argument("--rejoin", type=ca.seconds, default=engine.REJOIN_SECONDS, metavar="S",
                   help="seconds to wait for a scheduler that went away (stopped, restarted) to "
                        f"come back and join it again (default {engine.REJOIN_SECONDS:g})")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        engine.check_reachable(args.address)
        engine.run_workers(args.address, args.gpus, args.backends, host=args.host,
                           name_prefix=args.name, rejoin=args.rejoin,
                           on_event=lambda m: print(f"{WORKER_PROG}: {m}", file=sys.stderr,
                                                    flush=True))
    except KeyboardInterrupt:
        return 130
    except Exception as e:               # Dask raises OSError/TimeoutError and its own types here
        return ca.fail(TOOL, str(e) or type(e).__name__)
    return 0
