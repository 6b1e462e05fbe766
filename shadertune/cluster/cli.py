"""Command lines of the cluster: the search CLI's --workers/--gpus/--cluster, and

    python -m shadertune.cluster worker ADDRESS --gpus 0,1

which serves the scheduler at ADDRESS with one worker per GPU of this host.
"""
from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass

from ..errors import ShadertuneError
from . import engine

WORKER_PROG = "python -m shadertune.cluster"


def clustered(args) -> bool:
    """Whether the search CLI's arguments ask for a cluster."""
    return args.workers is not None or args.gpus is not None or args.cluster is not None


def check_args(args, parser) -> None:
    """One-line argparse errors for the cluster options of the search CLI."""
    if args.cluster is not None and (args.workers is not None or args.gpus is not None):
        parser.error("give --workers/--gpus (a local cluster) or --cluster ADDRESS, not both")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.gpus is not None:
        try:
            gpus = engine.parse_gpus(args.gpus)
        except ValueError as e:
            parser.error(f"--gpus: {e}")
        if args.workers is not None and args.workers != len(gpus):
            parser.error(f"--workers {args.workers} but --gpus names {len(gpus)} GPUs")


def local_gpus(args) -> list[int]:
    return engine.parse_gpus(args.gpus) if args.gpus is not None else list(range(args.workers))


@dataclass
class ClusterRun:
    runs: list          # [(backend name, DeviceInfo, report entries)], one per device
    summary: str        # evaluations per worker and in total


def tune_on_cluster(args, problems, budget, store_path, stream=None) -> ClusterRun:
    """The search CLI's tuning step on a local cluster (--workers/--gpus) or on the
    scheduler at --cluster; worker events (exclusions) go to `stream` as they happen."""
    engine.require_distributed()
    from .coordinator import Coordinator
    from .progress import ClusterProgress
    from .table import tune_table
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
            groups = len(coordinator.groups)
            total = args.budget * len(problems) * groups if args.budget else None
            label = f"{len(problems)} problem{'s' * (len(problems) > 1)} on " \
                    f"{len(coordinator.names())} workers"
            bar = ClusterProgress(label, total, stream=stream,
                                  enabled=None if not args.quiet else False)
            try:
                table = tune_table(coordinator, problems, strategy=args.strategy, budget=budget,
                                   store_path=store_path, retune=args.retune,
                                   repeats=args.repeats, warmup=args.warmup, seed=args.seed,
                                   tolerance=args.tolerance, on_result=bar.update)
            finally:
                bar.close()
    except OSError as e:                 # Dask's lost connections and time-outs
        raise ShadertuneError(f"the Dask cluster failed ({type(e).__name__}: "
                              f"{' '.join(str(e).split())}); results measured so far are in "
                              f"the store, rerun to resume") from None
    return ClusterRun([(g.backend, g.device, entries) for g, entries in table], bar.summary())


def build_worker_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=WORKER_PROG,
        description="Serve a Dask scheduler with one shadertune worker per GPU of this host "
                    "(start the scheduler with `dask scheduler`; tune with python -m "
                    "shadertune.search ... --cluster ADDRESS).")
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="one worker process per GPU of this host")
    w.add_argument("address", help="the scheduler, e.g. tcp://head-node:8786")
    w.add_argument("--gpus", default="0", help="GPU indices, one worker each (default 0), e.g. 0,1")
    w.add_argument("--backends", default="gl,cuda",
                   help="the backends each worker opens on its GPU as it starts: gl, cuda or "
                        "module:Class, comma-separated (default gl,cuda; one that does not "
                        "open is reported to the coordinators that ask for it)")
    w.add_argument("--host", help="the address the workers listen on (default: Dask's choice)")
    w.add_argument("--name", help="worker name prefix (default: this host's name)")
    return p


def main(argv=None) -> int:
    args = build_worker_parser().parse_args(argv)
    try:
        gpus = engine.parse_gpus(args.gpus)
    except ValueError as e:
        print(f"{WORKER_PROG}: error: --gpus: {e}", file=sys.stderr)
        return 2
    try:
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        engine.run_workers(args.address, gpus, backends, host=args.host, name_prefix=args.name)
    except KeyboardInterrupt:
        return 130
    except Exception as e:               # Dask raises OSError/TimeoutError and its own types here
        print(f"{WORKER_PROG}: error: {' '.join(str(e).split()) or type(e).__name__}",
              file=sys.stderr)
        return 1
    return 0
