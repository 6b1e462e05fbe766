"""The cluster's command line:

    python -m shadertune.cluster worker ADDRESS --gpus 0,1

serves the scheduler at ADDRESS with one worker per GPU of this host.  The search's
--workers/--gpus/--cluster step is the search command line's (search_cluster.py).
"""
from __future__ import annotations

import argparse
import sys

from . import args as ca
from ..errors import ShadertuneError
from ..cluster import engine

TOOL = "cluster"
WORKER_PROG = ca.prog(TOOL)
EPILOG = ("A scheduler that cannot be reached (refused, no such host, no answer in 5 s) "
          "fails at once with one line 'shadertune.cluster: error: <reason>' and exit "
          "status 1; 2 on bad arguments.")


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
