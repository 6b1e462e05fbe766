"""python -m shadertune.perfmodel: sample | train | explain."""
from __future__ import annotations

import argparse
import json

from . import args as ca
from ..errors import ContextError, ShadertuneError
from ..core.problem import Problem

TOOL = "perfmodel"
PROG = "shadertune.perfmodel"

EPILOG = """\
commands:
  sample   measure sampled problems (log-uniform sizes, the layouts asked for) on
           random and model-guided configs into the store, within --time-limit
  train    (re)train the model of a backend and device from the store; prints its
           leave-problems-out validation (--compare: every learner)
  explain  which config config="auto" takes for a shape, and why (exact / model
           with its predicted GFLOP/s / nearest / default)

store: --db PATH (before or after the command), else $SHADERTUNE_DB, else
$XDG_CACHE_HOME/shadertune/tune.sqlite, else ~/.cache/shadertune/tune.sqlite.  The
model is saved next to it (PATH.models/, whole or not at all) and retrained when
the store grows.  --backend, too, goes before or after the command.

exit status: 0 done; 1 on failure (no GPU context, unusable store, no model
possible) with one line '%(prog)s: error: <reason>' on stderr; 2 on bad arguments.
""" % {"prog": PROG}


def build_parser() -> argparse.ArgumentParser:
    from ..perfmodel import learners
    from ..perfmodel.sample import LAYOUTS
    top, sub_common = ca.common_parents(ca.add_backend, ca.add_db)
    p = ca.tool_parser(TOOL, "The learned performance model behind config=\"auto\".", EPILOG,
                       parents=[top])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("sample", help="measure sampled problems and configs into the store",
                       parents=[sub_common])
    s.add_argument("--problems", type=ca.positive, default=20, help="problems to sample (default 20)")
    s.add_argument("--configs", type=ca.positive, default=16, help="configs per problem (default 16)")
    s.add_argument("--min-size", type=ca.positive, default=16, help="smallest M, N, K (default 16)")
    s.add_argument("--max-size", type=ca.positive, default=256, help="largest M, N, K (default 256)")
    s.add_argument("--layouts", type=_layouts, default=",".join(LAYOUTS),
                   help="trans flags to draw from, e.g. NN,NT (default all four)")
    s.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                   help="element type (default float32)")
    s.add_argument("--time-limit", type=ca.seconds, metavar="S",
                   help="no evaluation starts after S seconds (default: no limit)")
    s.add_argument("--repeats", type=ca.positive, default=5, help="timed runs per config (default 5)")
    s.add_argument("--seed", type=ca.seed, default=0,
                   help="seed of the sampled problems, configs and inputs, an integer >= 0 (default 0)")
    s.add_argument("-q", "--quiet", action="store_true", help="no line per problem")
    t = sub.add_parser("train", help="train the model now and validate it", parents=[sub_common])
    t.add_argument("--learner", default=learners.DEFAULT, choices=learners.NAMES,
                   help=f"the learner (default {learners.DEFAULT})")
    t.add_argument("--compare", action="store_true", help="validate every learner and target")
    t.add_argument("--folds", type=ca.integer(2, what="a number of folds >= 2"), default=5,
                   help="folds of the leave-problems-out validation (default 5)")
    t.add_argument("--json", metavar="PATH",
                   help="write the validation as JSON, whole or not at all ('-': standard output)")
    e = sub.add_parser("explain", help="which config auto takes for a shape, and why",
                       parents=[sub_common])
    e.add_argument("--size", type=ca.size, metavar="SIZE", help=ca.SIZE_HELP)
    e.add_argument("--m", type=ca.positive, help="rows of A and C (with --n and --k)")
    e.add_argument("--n", type=ca.positive, help="columns of B and C")
    e.add_argument("--k", type=ca.positive, help="columns of A, rows of B")
    e.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                   help="element type (default float32)")
    e.add_argument("--trans-a", action="store_true", help="A is stored transposed (K x M)")
    e.add_argument("--trans-b", action="store_true", help="B is stored transposed (N x K)")
    e.add_argument("--no-model", action="store_true", help="the chain without the learned model")
    e.add_argument("--json", action="store_true", help="print the selection as JSON")
    ca.add_full_config(e)
    return p


def _layouts(text: str) -> list[str]:
    from ..perfmodel.sample import LAYOUTS
    items = [x.strip().upper() for x in str(text).split(",") if x.strip()]
    bad = [x for x in items if x not in LAYOUTS]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"layouts are some of {', '.join(LAYOUTS)}, comma-separated; "
                                         f"got {text!r}")
    return items


def _fail(reason: str, code: int = 1) -> int:
    return ca.fail(TOOL, reason, code)


def main(argv=None) -> int:
    from ..db import Store, StoreError
    from ..db.location import store_files, store_path
    from ..backends import check_environment, load_backend
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.command == "explain":
        if a.size is not None and all(v is None for v in (a.m, a.n, a.k)):
            dims = (a.size.M, a.size.N, a.size.K)
        elif a.size is None and None not in (a.m, a.n, a.k):
            dims = (a.m, a.n, a.k)
        else:
            parser.error("explain: give --size N or --m M --n N --k K")
        problem = Problem(*dims, a.dtype, a.trans_a, a.trans_b)
    if a.command == "sample" and a.max_size < a.min_size:
        parser.error("--max-size must be at least --min-size")
    try:
        if a.command in ("sample", "explain"):
            ca.check_dtype(a.backend, a.dtype)
        check_environment(a.backend)
        path = store_path(a.db)
        if a.command == "train":
            ca.check_output(a.json, protect=store_files(path))
    except (ValueError, ShadertuneError, OSError) as e:
        parser.error(str(e))
    try:
        backend = load_backend(a.backend)
        backend.device()
        if a.command == "explain":
            from ..selection.chain import select
            # explain only reads: a missing store is reported, not made
            s = select(backend, problem, path, use_model=not a.no_model)
            print(json.dumps(s.to_dict(), indent=1) if a.json else s.text(full_config=a.full_config))
            return 0
        if a.command == "train" and not ca.path_exists(path):
            return _fail(f"no store at {path} (python -m {PROG} sample ... makes one)")
        with Store(path, readonly=True if a.command == "train" else None) as store:
            if a.command == "sample":
                store.require_writable()     # a shared store: refused before anything is measured
                store.check_health()         # never sample into a damaged store
                return _sample(a, backend, store)
            return _train(a, backend, store)
    except KeyboardInterrupt:
        return _fail("interrupted; what was measured is in the store", 130)
    except (ContextError, StoreError, ShadertuneError, ValueError, ImportError) as e:
        return _fail(str(e) or type(e).__name__)
    except OSError as e:
        return _fail(ca.os_error_text(e))


def _sample(a, backend, store) -> int:
    from ..perfmodel.sample import generate, log_uniform_problems
    problems = log_uniform_problems(a.problems, a.min_size, a.max_size, seed=a.seed,
                                    layouts=a.layouts, dtype=a.dtype)
    log = None if a.quiet else (lambda line: print(line, flush=True))
    done = generate(backend, store, problems, configs=a.configs, seconds=a.time_limit,
                    repeats=a.repeats, seed=a.seed, log=log)
    print(f"sampled {done['problems']} problems, {done['evaluated']} configs ({done['ok']} verified, "
          f"{done['guided']} model-guided) in {done['seconds']:.1f} s into {store.path}")
    for s in done["skipped"]:
        print(f"skipped {s}")
    return 0


def _train(a, backend, store) -> int:
    from ..perfmodel import saved
    from ..perfmodel.data import training_data
    from ..perfmodel.model import targets_for
    from ..perfmodel.validate import compare, comparison_table
    dev = backend.device()
    data = training_data(store, backend.name, dev.key, backend.template_hash())
    n = len(data.distinct_problems)
    if n < saved.MIN_PROBLEMS or len(data) < saved.MIN_ROWS:
        return _fail(f"the store has {len(data)} verified results of {n} problems for {backend.name} "
                     f"on {dev.key}: a model needs {saved.MIN_PROBLEMS} problems and "
                     f"{saved.MIN_ROWS} results (python -m {PROG} sample ...)")
    if a.compare:
        rows = compare(data, targets=targets_for(backend.name), folds=a.folds, limits=dev.limits,
                       cost_model=backend.predict_ms)
        print(comparison_table(rows))
    saved.forget()
    path = saved.model_path(store.path, backend.name, dev.key, backend.template_hash())
    path.unlink(missing_ok=True)            # train now, whatever the saved one is
    # trained and validated (with the analytical model where the backend has one: the guard)
    model, note = saved.model_for(backend, store, learner=a.learner, validate=True, folds=a.folds)
    if model is None:
        return _fail(note)
    v = model.meta["validation"]
    print(model.summary())
    if v.get("nearest") is not None:
        print(f"nearest-shape rule on the {v['nearest_compared']} held-out problems it can be scored on: "
              f"{100 * v['nearest']:.1f}% (the model's top-1 there: {100 * v['top1_where_nearest']:.1f}%)")
    print(f"saved to {path}")
    if a.json:
        from ..core.atomic import write_json
        from ..db.location import store_files
        write_json(a.json, {"validation": v, "guard": model.guard,
                            "compare": rows if a.compare else None},
                   protect=store_files(store.path), default=str)
    return 0
