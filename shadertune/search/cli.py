"""python -m shadertune.search: tune matmul for one or more shapes on one backend."""
from __future__ import annotations

import argparse
import importlib
import pathlib
import sys

from ..errors import ContextError, ShadertuneError
from ..problem import Problem
from .budget import Budget
from .progress import Progress
from .registry import STRATEGIES
from .report_json import make_report, write_report
from .tune import tune

PROG = "shadertune.search"

EPILOG = """\
sizes: --size N tunes N x N x N; --m M --n N --k K one shape; --sizes 256,512,1024
a table of squares (an item may also be MxNxK), tuned once so that
shadertune.matmul(A, B) with config="auto" can pick the best stored config for a
shape (exact, else the nearest tuned shape).

--budget and --time-limit apply to each problem.  Every result is written to the
store as it is measured: an interrupted search resumes where it stopped when run
again with the same arguments, and --retune measures everything afresh.

several GPUs: --workers N (this machine) or --cluster ADDRESS (GPU hosts running
'python -m shadertune.cluster worker ADDRESS --gpus 0,1') spread the problems and
evaluations over one worker per GPU; one store, one table per device (docs/cluster.md).

store: --db PATH, else $SHADERTUNE_DB, else $XDG_CACHE_HOME/shadertune/tune.sqlite
(~/.cache/shadertune/tune.sqlite).

exit status: 0 when every problem has a verified best config; 1 on failure (no
GPU context, unusable store, no config passed verification) with one line
'shadertune.search: error: <reason>' on stderr; 2 on bad arguments; 130 when
interrupted.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):          # one line, as every other failure
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Autotune C = A @ B for a backend and shape(s): phased "
                "(Jiang),\nexhaustive or random search over the pruned kernel space; every config "
                "verified\nagainst float64, timed with GPU timers and stored in SQLite.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="gl",
                   help="'gl' (default) or 'cuda', or module:Class of another backend")
    g = p.add_argument_group("problem")
    g.add_argument("--size", type=int, metavar="N", help="square N x N x N")
    g.add_argument("--m", type=int, metavar="M", help="rows of A and C (with --n and --k)")
    g.add_argument("--n", type=int, metavar="N", help="columns of B and C")
    g.add_argument("--k", type=int, metavar="K", help="columns of A, rows of B")
    g.add_argument("--sizes", metavar="LIST", help="comma-separated squares, e.g. 256,512,1024")
    g.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                   help="element type (float64 on CUDA only; default float32)")
    g.add_argument("--trans-a", action="store_true", help="A is stored transposed (K x M)")
    g.add_argument("--trans-b", action="store_true", help="B is stored transposed (N x K)")
    s = p.add_argument_group("search")
    s.add_argument("--strategy", default="phased", choices=sorted(STRATEGIES),
                   help="phased: Jiang's order with np refinement (default); exhaustive: every "
                        "valid config; random: uniform without replacement")
    s.add_argument("--budget", type=int, metavar="N", help="at most N evaluations per problem")
    s.add_argument("--time-limit", type=float, metavar="S",
                   help="stop starting new evaluations after S seconds per problem")
    s.add_argument("--repeats", type=int, default=10, help="timed runs per config (default 10)")
    s.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    s.add_argument("--tolerance", type=float,
                   help="largest relative Frobenius error accepted (default 1e-5 float32, "
                        "1e-12 float64)")
    s.add_argument("--seed", type=int, default=0, help="seed of the inputs and of random (default 0)")
    s.add_argument("--retune", action="store_true",
                   help="measure every config afresh instead of reusing stored results")
    c = p.add_argument_group("several GPUs or hosts (Dask distributed: pip install "
                             "'shadertune[cluster]'; see docs/cluster.md)")
    c.add_argument("--workers", type=int, metavar="N",
                   help="N worker processes on this machine, one per GPU (GL: EGL device index, "
                        "CUDA: device id 0..N-1); the problems and evaluations spread over them")
    c.add_argument("--gpus", metavar="LIST",
                   help="the GPU of each local worker, e.g. 1,2 (default 0..N-1)")
    c.add_argument("--cluster", metavar="ADDRESS",
                   help="use the workers of the Dask scheduler at ADDRESS (started on each GPU "
                        "host with: python -m shadertune.cluster worker ADDRESS --gpus 0,1)")
    o = p.add_argument_group("output")
    o.add_argument("--db", metavar="PATH", help="SQLite store (default: $SHADERTUNE_DB or the cache dir)")
    o.add_argument("--report", metavar="PATH", help="write the JSON report here")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return p


def problems_from(args, parser) -> list[Problem]:
    forms = [args.size is not None, any(v is not None for v in (args.m, args.n, args.k)),
             args.sizes is not None]
    if sum(forms) != 1:
        parser.error("give exactly one of --size N, --m M --n N --k K, or --sizes LIST")
    try:
        if args.size is not None:
            shapes = [(args.size,) * 3]
        elif args.sizes is not None:
            shapes = [Problem.parse(t).to_dict() for t in args.sizes.split(",") if t.strip()]
            shapes = [(d["M"], d["N"], d["K"]) for d in shapes]
            if not shapes:
                parser.error("--sizes needs at least one size")
        else:
            if None in (args.m, args.n, args.k):
                parser.error("--m, --n and --k go together")
            shapes = [(args.m, args.n, args.k)]
        out = [Problem(M, N, K, args.dtype, args.trans_a, args.trans_b) for M, N, K in shapes]
    except (TypeError, ValueError) as e:
        parser.error(str(e))
    for pr in out:
        if min(pr.M, pr.N, pr.K) < 1:
            parser.error(f"sizes must be positive, got {pr.M}x{pr.N}x{pr.K}")
    return out


def load_backend(name: str):
    if ":" in name:                      # module:Class, e.g. a test backend
        mod, cls = name.split(":", 1)
        try:
            return getattr(importlib.import_module(mod), cls)()
        except (ImportError, AttributeError) as e:
            raise ShadertuneError(f"cannot load backend {name!r}: {e}") from None
    from ..backends import get_backend
    return get_backend(name)


def fmt_config(cfg: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(cfg.items()))


def table(entries: list[dict]) -> str:
    head = ["problem", "best config", "GFLOP/s", "ms", "error", "evals (measured/cached)",
            "seconds", "space (pruned/full)"]
    rows = []
    for e in entries:
        b = e["best"]
        rows.append([f"{e['M']}x{e['N']}x{e['K']} {e['dtype']}" +
                     ("".join(" T" + w for w, t in (("a", e["trans_a"]), ("b", e["trans_b"])) if t)),
                     fmt_config(b["config"]) if b else "(none passed)",
                     f"{b['gflops']:.2f}" if b else "-", f"{b['median_ms']:.4g}" if b else "-",
                     f"{b['error']:.1e}" if b and b["error"] is not None else "-",
                     f"{e['evaluated']} ({e['measured']}/{e['cached']})", f"{e['seconds']:.1f}",
                     f"{e['space_size']}/{e['full_space_size']}"])
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] +
                     [line(r) for r in rows])


def fail(reason: str, code: int = 1) -> int:
    print(f"{PROG}: error: {reason}", file=sys.stderr)
    return code


def main(argv=None) -> int:
    from ..db import Store, StoreError
    parser = build_parser()
    args = parser.parse_args(argv)
    problems = problems_from(args, parser)
    for name, v in (("--budget", args.budget), ("--repeats", args.repeats)):
        if v is not None and v < 1:
            parser.error(f"{name} must be at least 1")
    if args.time_limit is not None and not args.time_limit > 0:
        parser.error("--time-limit must be positive")
    budget = Budget(args.budget, args.time_limit)
    from ..cluster.cli import check_args, clustered
    check_args(args, parser)
    store = None
    summary = None
    try:
        if clustered(args):
            from ..cluster.cli import tune_on_cluster
            store = Store(args.db)
            run = tune_on_cluster(args, problems, budget, store.path)
            runs, summary = run.runs, run.summary
        else:
            backend = load_backend(args.backend)
            device = backend.device()
            store = Store(args.db)
            entries: list[dict] = []
            for pr in problems:
                bar = Progress(f"{pr.M}x{pr.N}x{pr.K}", total=args.budget,
                               enabled=None if not args.quiet else False)
                try:
                    entries.append(tune(backend, pr, strategy=args.strategy, budget=budget,
                                        store=store, retune=args.retune, repeats=args.repeats,
                                        warmup=args.warmup, seed=args.seed,
                                        tolerance=args.tolerance, on_result=bar.update))
                finally:
                    bar.close()
            runs = [(backend.name, device, entries)]
    except KeyboardInterrupt:
        return fail("interrupted; results measured so far are in the store, rerun to resume", 130)
    except (ContextError, StoreError, ShadertuneError, ValueError, ImportError) as e:
        return fail(" ".join(str(e).split()) or type(e).__name__)
    finally:
        if store is not None:
            store.close()
    for backend_name, device, entries in runs:
        if len(runs) > 1:
            print(f"device: {device.key}")
        print(table(entries))
    if summary:
        print(summary)
    print(f"store: {store.path}")
    for i, (backend_name, device, entries) in enumerate(runs):
        path = args.report
        if path and len(runs) > 1:      # one report per device: r.json -> r.0.json, r.1.json
            p = pathlib.Path(path)
            path = str(p.with_name(f"{p.stem}.{i}{p.suffix}"))
        if path:
            try:
                write_report(path, make_report(backend_name, device, args.strategy, entries))
            except OSError as e:
                return fail(f"cannot write report {path}: {e}")
    failed = [f"{e['M']}x{e['N']}x{e['K']}" for _, _, entries in runs for e in entries
              if e["best"] is None]
    if failed:
        return fail(f"no config passed verification for {', '.join(failed)} "
                    f"(see the statuses in the store or --report)")
    return 0
