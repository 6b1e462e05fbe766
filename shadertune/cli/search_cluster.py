"""The search command line's cluster step: --workers N / --gpus LIST (a local Dask
cluster, one worker per GPU) or --cluster ADDRESS (the workers of a running
scheduler) spread a search table over several GPUs or hosts (shadertune.cluster;
docs/cluster.md).  Its runs are the search's own (search_runs.DeviceRun, with the
same budget per problem)."""
from __future__ import annotations

import logging
import sys
import threading

from ..cluster import engine
from ..errors import ShadertuneError
from .search_runs import DeviceRun, search_budget


def clustered(args) -> bool:
    """Whether the search's arguments ask for a cluster."""
    return args.workers is not None or args.gpus is not None or args.cluster is not None


def check_args(args, parser) -> None:
    """One-line argparse errors for the search's cluster options."""
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


def tune_on_cluster(args, problems, open_store, runs: list, notes: list, stream=None) -> None:
    """The search's tuning step on a local cluster (--workers/--gpus) or on the
    scheduler at --cluster: one search per problem and device group, their results
    in the file of the store open_store() opens once a worker has opened the backend.
    Fills `runs` with a DeviceRun per device (sorted by device key) holding the
    finished entries and the problems still in progress when it stopped (an error or
    Ctrl-C: also then), and `notes` with the line of evaluations per worker; each
    device's problems get search_budget(args, device), as on this machine.  Worker
    events (exclusions) go to `stream` as they happen; one progress for the table
    (search.progress.Progress) counts per worker."""
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
            store = open_store()
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
                        by_group[group] = DeviceRun(group.backend, group.device)
                    current = by_group[group].start(problem, progress)

                def on_result(result, cached, worker):
                    with lock:
                        current.record(result, cached, worker)
                return on_result
            try:
                tune_table(coordinator, problems, strategy=args.strategy,
                           budget=lambda device: search_budget(args, device),
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
