#!/usr/bin/env python3
"""Model quality (issue 17): the learned model's picks on held-out shapes, timed.

    scripts/model-quality heldout --backend gl --train-db T.sqlite --out DIR [--sample-time S]
                                  [--template-hash H [--train-device KEY]]
    scripts/model-quality offline STORE [--backend cuda] [--template-hash H] [--targets ...]
    scripts/model-quality replay --backend cuda --train-db T.sqlite --eval-db E.sqlite --out DIR
    scripts/model-quality same-kernels T.sqlite --template-hash H --commit C
    scripts/model-quality same-kernels --sample 60 --exact --commit C
    scripts/model-quality first-use --backend cuda --train-db T.sqlite --out DIR --shape 4096x4096x4096
    scripts/model-quality import-bench-cuda RUN.json [...] --into STORE

heldout: optionally samples a training store first (python -m shadertune.perfmodel
sample, bounded by --sample-time), refuses held-out shapes that the training
store has results for, trains the model (with its leave-problems-out
validation), then for each held-out shape, in a fresh evaluation store:
  tuned    the default search strategy with a generous budget (--tune-time,
           --tune-budget): the reference;
  model    what config="auto" takes from the training store (the learned
           model's pick among the configs verified there and the backend's
           analytical candidate list; the analytical model's where the guard
           says so: the row's auto_how is 'model' or 'analytical');
  space    what auto would take if it ranked the whole space instead (the
           model's top-1 over the sample first-use ranks): the measurement
           behind auto ranking only verified configs;
  top 8    the 8 configs first-use tuning times (the model over the whole
           space), each timed; the fastest counts;
  nearest  the nearest-shape rule on the training store (no model);
  default  the backend's default config.
Every pick is verified and timed through the search core (a config the tuned
search measured is replayed, not re-run), then the picks are re-timed back to
back in --rounds interleaved rounds so that load on the machine hits them
alike; the ratios use the re-timed medians, against the tuned best. Prints a
Markdown table, the shapes where the model loses to the nearest rule, and
--json writes everything.

--template-hash H: the training store's results are of templates H, not of
today's (results are keyed by the template hash, and the trainer reads today's
only): give it only where today's templates render the same kernels as H's
(e.g. a refactor of a template's text). Those results (of this device, or of
--train-device KEY: the same GPU under another driver or CuPy version; its
renderer is checked) are copied, relabelled as today's, into OUT/train-
relabelled.sqlite, which the run trains and selects from; the report says so.

offline: leave-problems-out validation of every learner on a store's verified
results (no device needed), with the nearest rule and the backend's analytical
cost model (CUDA) scored on the same measured configs; the store's largest
(backend, device, templates) group, or the one of --template-hash H.

same-kernels: no device. Whether today's templates render byte-identical CUDA
kernels to those of an earlier commit (--commit C, or --tree DIR holding its
shadertune/ and shaders/) for every (problem, config) the store holds results of
under that commit's template hash H: the condition for --template-hash H. With
--sample N instead of a store: N configs of every kernel family (FFMA, mma.sync,
DMMA, wgmma, wgmma pre-split with its pack kernel, the K_G reduce kernel and the
in-launch reduction, batches) drawn with --seed from that commit's spaces of a few
problems; --exact compares whole sources byte for byte (a template refactor).
Exit status 0 when all do.

replay: no device. For each problem an earlier heldout run measured (its
eval.sqlite), what config="auto" takes today from the training store, and
where that config was measured in the eval store, its GFLOP/s there over the
best measured there (else: not measured). The backend's device and template
hash are the training store's (the largest group, or --template-hash): kernels
are never built, only selected. Also the learned and the analytical model's
picks over the same candidates, the pick among verified configs alone (auto
before the analytical list joined), the nearest rule and the default.

first-use: the cost of tune="first-use" on a new shape: the first
matmul(A, B, config="auto", tune=...) call's wall time on a copy of the
training store (configs timed, what auto then takes), the next calls', and
calls with that config given explicitly (a pre-tuned call) for comparison.

import-bench-cuda: the candidates a bench-cuda run timed (its JSON 'trials') as
Results in a store, so offline can score learners on real GPU measurements.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from project_venv import use_project_venv  # noqa: E402

ROOT = use_project_venv("numpy", "sklearn")      # the project's .venv when this python3 lacks them

from shadertune.core.config import Config  # noqa: E402
from shadertune.db import Store  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

DEFAULT_HELDOUT = {
    # skinny, odd and larger than the sampled sizes (16..256 by default)
    "gl": "256x8x128,12x200x96,97x131x61,203x45x177:TN,320x320x320,48x64x1000:NT",
    "cuda": "4096x4096x4096,3000x77x5000,8192x32x8192:TN,1000x1000x1000,77x4093x1531,2048x2048x96:NT",
}


def parse_problem(text: str, dtype: str = "float32") -> Problem:
    """'MxNxK' or 'MxNxK:TN' (trans flags of A and B)."""
    shape, _, layout = text.strip().partition(":")
    p = Problem.parse(shape, dtype)
    layout = layout or "NN"
    if len(layout) != 2 or set(layout) - set("NT"):
        raise ValueError(f"layout must be NN, NT, TN or TT, got {layout!r} in {text!r}")
    return Problem(p.M, p.N, p.K, dtype, layout[0] == "T", layout[1] == "T")


# --- heldout -----------------------------------------------------------------

def heldout(a) -> int:
    from shadertune.perfmodel import saved
    from shadertune.front.first_use import first_use_configs
    from shadertune.perfmodel.first_use_plan import ranked_space
    from shadertune.perfmodel.measure import measure
    from shadertune.perfmodel.sample import generate, log_uniform_problems
    from shadertune.perfmodel.guided import tune
    from shadertune.search import Budget
    from shadertune.backends import load_backend
    from shadertune.selection.chain import select

    backend = load_backend(a.backend)
    device = backend.device()
    th = backend.template_hash()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    problems = [parse_problem(t, a.dtype) for t in (a.heldout or DEFAULT_HELDOUT[backend.name]).split(",")]
    report = {"backend": backend.name, "device": device.to_dict(), "command": " ".join(sys.argv),
              "heldout": [p.key for p in problems], "rows": []}
    t_all = time.monotonic()
    train_db = a.train_db
    if a.train_device and not a.template_hash:
        print("model-quality: error: --train-device needs --template-hash", file=sys.stderr)
        return 2
    if a.template_hash:
        from_dev = a.train_device or device.key
        if from_dev.split(" | ")[0] != device.renderer:
            print(f"model-quality: error: --train-device {from_dev!r} is not this GPU "
                  f"({device.renderer})", file=sys.stderr)
            return 2
        train_db = out / "train-relabelled.sqlite"
        n = relabelled_store(a.train_db, train_db, backend.name, a.template_hash, th, from_dev, device.key)
        if n == 0:
            with Store(a.train_db) as s:
                held = s.summary(("backend", "device", "template_hash"))
            print(f"model-quality: error: {a.train_db} has no {backend.name} results of templates "
                  f"{a.template_hash} on {from_dev!r}; it has: "
                  + "; ".join(f"{g['backend']} on {g['device']!r}, templates {g['template_hash']}: "
                              f"{g['results']} results" for g in held), file=sys.stderr)
            return 1
        report["training_relabelled"] = {"store": a.train_db, "template_hash": a.template_hash,
                                         "as": th, "device": from_dev, "as_device": device.key,
                                         "results": n}
        print(f"training on {n} results of templates {a.template_hash} on {from_dev!r} from "
              f"{a.train_db}, relabelled as today's templates {th} on this device in {train_db}",
              flush=True)
    with Store(train_db) as train:
        if a.sample_time:
            sampled = log_uniform_problems(a.sample_problems, a.min_size, a.max_size, seed=a.seed)
            sampled = [p for p in sampled if p not in problems]
            report["sampling"] = generate(backend, train, sampled, configs=a.sample_configs,
                                          seconds=a.sample_time, seed=a.seed,
                                          log=lambda line: print(line, flush=True))
        tuned = set(train.tuned_problems(backend.name, device.key, th))
        clash = [p.key for p in problems if p in tuned]
        if clash:
            print(f"model-quality: error: held-out shapes in the training store: {clash}", file=sys.stderr)
            return 1
        saved.forget()
        model, note = saved.model_for(backend, train, validate=True)
        if model is None:
            print(f"model-quality: error: {note}", file=sys.stderr)
            return 1
        report["model"] = model.summary()
        report["validation"] = model.meta.get("validation")
        print(model.summary(), flush=True)
    eval_path = out / "eval.sqlite"
    for suffix in ("", "-wal", "-shm"):
        pathlib.Path(str(eval_path) + suffix).unlink(missing_ok=True)
    with Store(eval_path) as ev, Store(train_db) as train:
        for p in problems:
            t0 = time.monotonic()
            entry = tune(backend, p, budget=Budget(a.tune_budget, a.tune_time), store=ev,
                         repeats=a.repeats)
            tune_s = time.monotonic() - t0
            if entry["best"] is None:
                print(f"{p.key}: the tuned search found no verified config; skipped", flush=True)
                continue
            auto = select(backend, p, train)
            near = select(backend, p, train, use_model=False)
            t0 = time.monotonic()
            top8 = first_use_configs(backend, p, train, 8)
            rank_s = time.monotonic() - t0
            default = backend.default_config(p)
            space_pick = ranked_space(backend, p, train, [default])[0]
            res = {r.config: r for r in measure(backend, p, [auto.config, space_pick, *top8, near.config,
                                                             default],
                                                ev, budget=Budget(), repeats=a.repeats)}
            timed8 = [res[c] for c in top8 if c in res and res[c].ok]
            picks = {"tuned": Config(entry["best"]["config"]), "model": auto.config, "space": space_pick,
                     "top8": min(timed8, key=lambda r: r.median_ms).config if timed8 else None,
                     "nearest": near.config, "default": default}
            missing = [k for k, c in picks.items() if c is not None and k != "tuned" and c not in res]
            if missing:
                print(f"{p.key}: picks {missing} have no result (not timed)", flush=True)
            retimed = retime(backend, p, {k: c for k, c in picks.items() if c is not None and
                                          (k == "tuned" or (c in res and res[c].ok))},
                             a.rounds, a.repeats)
            g = {k: (p.flops / (ms * 1e6) if ms else None) for k, ms in retimed.items()}
            ratio = {k: (g[k] / g["tuned"] if g.get(k) and g.get("tuned") else None)
                     for k in ("model", "space", "top8", "nearest", "default")}
            known = max(x for x in g.values() if x)        # the best of everything re-timed
            ratio_known = {k: (g[k] / known if g.get(k) else None) for k in g}
            row = {"problem": p.key, "tune_seconds": tune_s, "tune_evaluated": entry["evaluated"],
                   "rank_seconds": rank_s, "auto_how": auto.how, "nearest_how": near.how,
                   "auto_reason": auto.reason, "predicted_gflops": auto.predicted_gflops,
                   "configs": {k: (None if c is None else dict(c)) for k, c in picks.items()},
                   "failed": {k: f"{res[c].status}: {res[c].message}" for k, c in picks.items()
                              if k != "tuned" and c is not None and c in res and not res[c].ok},
                   "missing": missing,
                   "gflops": g, "ratio": ratio, "ratio_best_known": ratio_known,
                   "measured_gflops": {k: (res[c].gflops if c in res else None)
                                       for k, c in picks.items() if c is not None}}
            report["rows"].append(row)
            print(f"{p.key}: tuned {g['tuned']:.3f} GFLOP/s ({entry['evaluated']} evals, {tune_s:.0f} s); "
                  + ", ".join(f"{k} {pct(ratio[k])}" for k in ratio), flush=True)
    report["seconds"] = time.monotonic() - t_all
    text = markdown(report)
    print(text)
    (out / "model-quality.md").write_text(text + "\n")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


def relabelled_store(src, dst, backend: str, from_hash: str, to_hash: str, from_device: str,
                     to_device: str) -> int:
    """A new store at `dst` holding the results of `src` for (backend, from_device,
    from_hash), relabelled as (to_device, to_hash); the number copied.  For results
    of an earlier template that renders the same kernels (--template-hash)."""
    from shadertune.db import schema
    dst = pathlib.Path(dst)
    for suffix in ("", "-wal", "-shm"):
        pathlib.Path(str(dst) + suffix).unlink(missing_ok=True)
    rows = []
    with Store(src) as s:
        for r in s.rows("backend = ? AND device = ? AND template_hash = ?", [backend, from_device, from_hash]):
            doc = json.loads(r["result"])
            doc["device"] = to_device
            rows.append({**r, "device": to_device, "template_hash": to_hash,
                         "schema": schema.SCHEMA_VERSION, "result": json.dumps(doc, allow_nan=True)})
    with Store(dst) as d:
        d.write_rows(rows)
    return len(rows)


def retime(backend, problem, picks: dict, rounds: int, repeats: int) -> dict:
    """Median ms of each pick, timed in `rounds` interleaved rounds of `repeats`."""
    from shadertune.search.evaluate import make_inputs
    A, B, _ = make_inputs(problem)
    times = {k: [] for k in picks}
    with backend.search_session():
        kernels = {}
        try:
            for k, c in picks.items():
                kern = kernels.get(c)
                if kern is None:
                    kern = kernels[c] = backend.build(problem, c)
                    kern.run(A, B)
            for _ in range(rounds):
                for k, c in picks.items():
                    times[k] += kernels[c].time(repeats=repeats, warmup=1)
        finally:
            for kern in kernels.values():
                kern.release()
    return {k: statistics.median(v) for k, v in times.items()}


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown(report: dict) -> str:
    rows = report["rows"]
    lines = [f"Held-out shapes on {report['device']['renderer']} ({report['backend']}); "
             f"{report['model']}", "",
             "Each pick's GFLOP/s over the tuned best's, and (in brackets) over the best of all picks:", "",
             "| problem | tuned GFLOP/s (evals) | auto (model) | model over the space | best of top 8 | "
             "nearest rule | default |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    keys = ("model", "space", "top8", "nearest", "default")
    cell = lambda r, k: f"{pct(r['ratio'][k])} ({pct(r['ratio_best_known'].get(k))})"  # noqa: E731
    for r in rows:
        lines.append(f"| {r['problem']} | {r['gflops']['tuned']:.3f} ({r['tune_evaluated']}) | "
                     + " | ".join(cell(r, k) for k in keys) + " |")
    def mean(k, field="ratio"):
        v = [r[field].get(k) for r in rows if r[field].get(k) is not None]
        return sum(v) / len(v) if v else None
    if rows:
        lines.append(f"| mean | ({pct(mean('tuned', 'ratio_best_known'))}) | "
                     + " | ".join(f"{pct(mean(k))} ({pct(mean(k, 'ratio_best_known'))})" for k in keys)
                     + " |")
    if rows:
        lines += ["", "auto's rule per shape (model: the learned model's pick; analytical: the guard "
                  "sent it to the analytical model): "
                  + ", ".join(f"{r['problem']} {r.get('auto_how', '-')}" for r in rows)]
    lose = [r for r in rows if r["ratio"]["model"] is not None and r["ratio"]["nearest"] is not None
            and r["ratio"]["model"] < r["ratio"]["nearest"]]
    lines += ["", "Shapes where auto's model pick loses to the nearest rule: "
              + (", ".join(f"{r['problem']} ({pct(r['ratio']['model'])} vs {pct(r['ratio']['nearest'])})"
                           for r in lose) or "none")]
    worse = [r for r in rows if r["ratio"]["model"] is not None and r["ratio"].get("space") is not None
             and r["configs"]["model"] != r["configs"]["space"] and r["ratio"]["model"] < r["ratio"]["space"]]
    lines += ["Shapes where auto's pick among verified configs loses to the model's pick over the "
              "space: " + (", ".join(f"{r['problem']} ({pct(r['ratio']['model'])} vs "
                                     f"{pct(r['ratio']['space'])})" for r in worse) or "none")]
    fails = [f"{r['problem']} {k}: {m}" for r in rows for k, m in r["failed"].items()]
    if fails:
        lines += ["", "Picks that failed verification or build:"] + [f"- {f}" for f in fails]
    lines += ["", "Ratios: GFLOP/s of the pick over the tuned best, both re-timed back to back; "
              f"whole run {report['seconds']:.0f} s."]
    return "\n".join(lines)


# --- offline -----------------------------------------------------------------

def store_group(s, backend: str | None, template_hash: str | None):
    """(backend, device, template hash) of the store's verified results: the largest
    group, or the largest of templates `template_hash`; None when there is none."""
    where, args = ["status = 'ok'"], []
    if backend:
        where.append("backend = ?")
        args.append(backend)
    if template_hash:
        where.append("template_hash = ?")
        args.append(template_hash)
    row = s.conn.execute(
        f"SELECT backend, device, template_hash, COUNT(*) FROM results WHERE {' AND '.join(where)} "
        "GROUP BY backend, device, template_hash ORDER BY COUNT(*) DESC", args).fetchone()
    return row[:3] if row else None


def offline(a) -> int:
    from shadertune.perfmodel import learners
    from shadertune.perfmodel.validate import comparison_table
    from shadertune.perfmodel.data import training_data
    from shadertune.perfmodel.model import targets_for
    from shadertune.perfmodel.validate import compare
    with Store(a.store) as s:
        group = store_group(s, a.backend, a.template_hash)
        if group is None:
            print("model-quality: error: no verified results in the store", file=sys.stderr)
            return 1
        name, dev, th = group
        data = training_data(s, name, dev, th)
    cost = None
    limits = None
    if name == "cuda":       # the analytical model needs no GPU (sm_90 limits without one)
        from shadertune.backends.cuda import CUDABackend
        be = CUDABackend()
        cost, limits = be.predict_ms, be.limits()
    print(f"{name} on {dev} (templates {th}): {len(data)} verified results of "
          f"{len(data.distinct_problems)} problems")
    names = a.learners.split(",") if a.learners else learners.NAMES
    targets = a.targets.split(",") if a.targets else targets_for(name)
    rows = []
    for seed in range(a.seeds):
        rows += [dict(r, seed=seed) for r in compare(data, names=names, targets=targets, folds=a.folds,
                                                     limits=limits, cost_model=cost, seed=seed)]
    print(comparison_table(rows))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


# --- same-kernels --------------------------------------------------------------

# Run in a child process that imports shadertune from a tree (argv[1]): the digests of
# the CUDA sources that tree's code renders for a set of (problem, config) pairs, given
# by a store's results of one template hash (argv[2] = 'store', argv[3] the store,
# argv[4] the hash) or drawn by the tree itself (argv[2] = 'sample', argv[3] configs per
# family, argv[4] the seed, argv[5] the problems as 'MxNxK:dtype:op:bn' keys joined by
# ','), or named in a JSON file of [problem dict, config dict] pairs (argv[2] = 'pairs',
# argv[3] the file). argv[-1] = 'exact': sha256 of the whole text; 'kernels': the
# kernels' code (see below).
_DIGESTS = """
import hashlib, json, random, sqlite3, sys
sys.path.insert(0, sys.argv[1])
from shadertune.backends.cuda import codegen
from shadertune.core.config import Config
from shadertune.core.problem import Problem
how, mode = sys.argv[2], sys.argv[-1]
pairs = []
if how == 'store':
    db = sqlite3.connect('file:' + sys.argv[3] + '?mode=ro', uri=True)
    for res, in db.execute("SELECT result FROM results WHERE backend = 'cuda' AND template_hash = ?",
                           [sys.argv[4]]):
        d = json.loads(res)
        pairs.append((Problem.from_dict(d['problem']), Config(d['config']), None))
elif how == 'pairs':
    pairs = [(Problem.from_dict(p), Config(c), f) for p, c, f in json.load(open(sys.argv[3]))]
else:
    from shadertune.backends.cuda.device import DEFAULT_LIMITS
    from shadertune.backends.cuda.space import make_space
    per, rng = int(sys.argv[3]), random.Random(int(sys.argv[4]))
    # the kernel families: each template and each kernel a source may hold beside the GEMM
    families = {
        'ffma': lambda p, c: c['MMA'] == 0, 'mma.sync': lambda p, c: c['MMA'] == 3,
        'dmma': lambda p, c: c['MMA'] == 1,
        'wgmma': lambda p, c: c['MMA'] == 4 and not c.get('PS', 0),
        'wgmma pre-split + pack': lambda p, c: c.get('PS', 0) > 0,
        'K_G reduce kernel': lambda p, c: c['KG'] > 1 and not c['KR'],
        'K_G in-launch reduction': lambda p, c: c['KG'] > 1 and c['KR'] == 1,
        'batched': lambda p, c: p.batch > 1,
    }
    pool = {f: [] for f in families}
    for key in sys.argv[5].split(','):
        m, n, k, dtype, op, bn = key.split(':')[0].split('x') + key.split(':')[1:]
        p = Problem(int(m), int(n), int(k), dtype, op[0] == 'T', op[1] == 'T', batch=int(bn[1:]))
        for c in make_space(p, DEFAULT_LIMITS).configs():
            for f, test in families.items():
                if test(p, c):
                    pool[f].append((p, c))
    for f, got in pool.items():
        pairs += [(p, c, f) for p, c in rng.sample(got, min(per, len(got)))]
out = {'template_hash': codegen.template_hash(), 'digests': {}, 'pairs': []}
for p, c, f in pairs:
    try:
        src = codegen.source(p, c)
        if mode == 'exact':
            text = src
        else:
            # The kernels' code, not their text: the `// config:` comment names the knobs
            # (a knob added since lists itself at its default), and the device functions
            # before the first kernel may move (a template refactor that moves whole
            # definitions into an include) so they are compared as a set of lines; the
            # kernels from the first `extern "C" __global__` on must be the same text.
            head, sep, body = src.partition('extern "C" __global__')
            head = '\\n'.join(sorted(l for l in head.splitlines() if l.strip() and not l.startswith('// config:')))
            text = head + sep + body
        digest = hashlib.sha256(text.encode()).hexdigest()
    except Exception as e:      # a config this code cannot render: reported, never equal
        digest = 'cannot render: ' + type(e).__name__ + ': ' + str(e)[:200]
    out['digests'][p.key + ' ' + c.key] = digest
    out['pairs'].append((p.to_dict(), c.to_dict(), f))
print(json.dumps(out))
"""

# same-kernels --sample: problems whose spaces hold every kernel family (both dtypes,
# all four layouts, ragged and narrow shapes, a batch, split-K, pre-split tiles)
SAMPLE_PROBLEMS = ("300x200x256:float32:NN:b1,1000x77x1000:float32:TN:b1,100x60x700:float32:NT:b3,"
                   "4096x4096x4096:float32:TT:b1,45x37x3001:float64:NT:b1,262x198x346:float64:TT:b1,"
                   "64x48x96:float64:NN:b4")


def kernel_digests(tree, store=None, template_hash: str | None = None, *, sample=None,
                   pairs=None, exact: bool = False) -> dict:
    """{'template_hash': the tree's CUDA templates', 'digests': {problem + config: sha256
    of the source the code in `tree` renders}, 'pairs': [[problem, config, family]]},
    in a child process that imports shadertune from `tree`, for the store's CUDA
    results of `template_hash`, or a sample drawn from the tree's own spaces
    (`sample` = (configs per family, seed, problems)), or `pairs` (a JSON file of
    [problem dict, config dict, family] lists). `exact`: the digest of the whole text."""
    import subprocess
    if sample is not None:
        how = ["sample", str(sample[0]), str(sample[1]), sample[2]]
    elif pairs is not None:
        how = ["pairs", str(pathlib.Path(pairs).resolve())]
    else:
        how = ["store", str(pathlib.Path(store).resolve()), template_hash]
    r = subprocess.run([sys.executable, "-c", _DIGESTS, str(pathlib.Path(tree).resolve()), *how,
                        "exact" if exact else "kernels"], capture_output=True, text=True, cwd=str(tree))
    if r.returncode:
        raise RuntimeError(f"rendering with the code in {tree} failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


def same_kernels(a) -> int:
    """Whether today's CUDA templates render the same kernels as those of an earlier
    commit (or tree): for every (problem, config) a store holds results of under that
    tree's template hash (the condition for heldout --template-hash), or with --sample N
    for N configs of each kernel family drawn (--seed) from that tree's spaces of
    SAMPLE_PROBLEMS (or --problems), compared byte for byte with --exact."""
    import subprocess
    import tempfile
    if a.sample is None and (a.store is None or a.template_hash is None):
        print("model-quality: error: same-kernels needs a STORE and --template-hash, or --sample N",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        tree = a.tree
        if tree is None:
            tree = pathlib.Path(tmp) / "tree"
            tree.mkdir()
            arch = subprocess.run(["git", "-C", str(ROOT), "archive", a.commit, "shadertune", "shaders"],
                                  capture_output=True)
            if arch.returncode:
                print(f"model-quality: error: git archive {a.commit}: {arch.stderr.decode().strip()}",
                      file=sys.stderr)
                return 1
            subprocess.run(["tar", "-x", "-C", str(tree)], input=arch.stdout, check=True)
        try:
            if a.sample is not None:
                old = kernel_digests(tree, sample=(a.sample, a.seed, a.problems), exact=a.exact)
                listed = pathlib.Path(tmp) / "pairs.json"
                listed.write_text(json.dumps(old["pairs"]))
                new = kernel_digests(ROOT, pairs=listed, exact=a.exact)
            else:
                old = kernel_digests(tree, a.store, a.template_hash, exact=a.exact)
                new = kernel_digests(ROOT, a.store, a.template_hash, exact=a.exact)
        except RuntimeError as e:
            print(f"model-quality: error: {e}", file=sys.stderr)
            return 1
        if a.sample is None and old["template_hash"] != a.template_hash:
            print(f"model-quality: error: the code in {a.commit or a.tree} has templates "
                  f"{old['template_hash']}, not {a.template_hash}", file=sys.stderr)
            return 1
    keys = sorted(old["digests"])
    differ = [k for k in keys if old["digests"][k] != new["digests"][k]
              or old["digests"][k].startswith("cannot render")]
    same = ("byte-identical sources" if a.exact else "the kernel functions byte-identical, the device "
            "functions before them the same lines, the config comment aside")
    what = (f"{len(keys)} sampled configs ({_family_counts(old['pairs'])}; seed {a.seed}) of templates "
            f"{old['template_hash']}" if a.sample is not None else
            f"{len(keys)} stored configs of templates {a.template_hash}")
    print(f"{what}: {len(keys) - len(differ)} render the same kernels under today's templates "
          f"{new['template_hash']} ({same}), {len(differ)} do not")
    for k in differ[:20]:
        print(f"  differs: {k}: {old['digests'][k][:40]} / {new['digests'][k][:40]}")
    return 0 if keys and not differ else 1


def _family_counts(pairs) -> str:
    counts: dict = {}
    for *_, f in pairs:
        counts[f] = counts.get(f, 0) + 1
    return ", ".join(f"{f} {n}" for f, n in counts.items())


# --- replay ------------------------------------------------------------------

def replay(a) -> int:
    import shutil
    import tempfile

    from shadertune.backends.base import DeviceInfo
    from shadertune.errors import ContextError
    from shadertune.perfmodel import saved
    from shadertune.backends import load_backend
    from shadertune.selection.chain import analytical_candidates, select
    from shadertune.core.verdict import tolerance_for
    be = load_backend(a.backend)
    with Store(a.train_db) as s:
        group = store_group(s, be.name, a.template_hash)
    if group is None:
        print(f"model-quality: error: no verified {be.name} results in the training store", file=sys.stderr)
        return 1
    name, dev, th = group
    renderer, _, driver = dev.partition(" | ")
    try:                     # the device's limits where there is one, else the backend's own
        limits = dict(be.device().limits)
    except ContextError:     # (CUDA without a GPU: sm_90's)
        limits = be.limits() if hasattr(be, "limits") else {}
    # selection only, never a kernel: the training store's device and templates stand in
    be.device = lambda: DeviceInfo(name, "recorded", renderer, driver, limits)
    be.template_hash = lambda: th
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"train_db": a.train_db, "eval_db": a.eval_db, "backend": name, "device": dev,
           "template_hash": th, "targets": {}}
    with Store(a.eval_db) as ev:
        eg = store_group(ev, name, None)
        problems = ev.tuned_problems(*eg) if eg else []
        measured = {p: {r.config: r.gflops for r in ev.ranked(*eg[:2], p, eg[2])} for p in problems}
    lines = [f"replay: auto today from {a.train_db} ({dev}, templates {th}) on the problems of "
             f"{a.eval_db}; each pick's GFLOP/s measured there over the best measured there", ""]
    for target in (a.targets.split(",") if a.targets else [None]):
        with tempfile.TemporaryDirectory() as tmp:
            train = pathlib.Path(tmp) / "train.sqlite"
            with Store(a.train_db) as s:
                if not s.readonly:
                    s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            shutil.copy(a.train_db, train)      # the model is saved beside a copy, not the original
            saved.forget()
            with Store(train) as s:
                model, note = saved.model_for(be, s, target=target)
                if model is None:
                    print(f"model-quality: error: {note}", file=sys.stderr)
                    return 1
                rows = []
                for p in problems:
                    space = be.space(p)
                    tol = tolerance_for(p.dtype, None)
                    verified = [c for c in model.verified_configs(p.dtype, tol) if space.why_invalid(c) is None]
                    listed = analytical_candidates(be, p, space)
                    union = list(dict.fromkeys(verified + listed))
                    auto = select(be, p, s)
                    ms = be.predict_ms(p, union)
                    picks = {"auto": auto.config,
                             "learned": model.rank(p, union)[0][1] if union else None,
                             "analytical": (union[min(range(len(union)), key=lambda i: ms[i])]
                                            if union and ms is not None else None),
                             "verified only": model.rank(p, verified)[0][1] if verified else None,
                             "nearest": select(be, p, s, use_model=False).config,
                             "default": be.default_config(p)}
                    best = max(measured[p].values())
                    share = {k: (measured[p][c] / best if c in measured[p] else None)
                             for k, c in picks.items() if c is not None}
                    rows.append({"problem": p.key, "auto_how": auto.how, "auto_reason": auto.reason,
                                 "candidates": {"verified": len(verified), "listed": len(listed),
                                                "union": len(union)},
                                 "best_measured_gflops": best,
                                 "picks": {k: (dict(c) if c is not None else None) for k, c in picks.items()},
                                 "share": share})
        key = target or model.target
        doc["targets"][key] = {"model": model.summary(), "guard": model.guard, "rows": rows}
        cols = ["auto", "learned", "analytical", "verified only", "nearest", "default"]
        lines += [f"target {key}: {model.summary()}", "",
                  "| problem | auto (how) | " + " | ".join(cols[1:]) + " |",
                  "|---|---|" + "---:|" * (len(cols) - 1)]
        cell = lambda r, k: ("not measured" if r["share"].get(k) is None  # noqa: E731
                             else f"{100 * r['share'][k]:.1f}%")
        for r in rows:
            lines.append(f"| {r['problem']} | {cell(r, 'auto')} ({r['auto_how']}) | "
                         + " | ".join(cell(r, k) for k in cols[1:]) + " |")
        lines.append("")
        for r in rows:
            lines.append(f"- {r['problem']}: auto {r['auto_how']}: "
                         f"{Config(r['picks']['auto']).text()}; {r['auto_reason']}")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    (out / "replay.md").write_text(text + "\n")
    (out / "replay.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0


def first_use(a) -> int:
    import shutil

    import numpy as np

    import shadertune
    from shadertune.perfmodel import FirstUse
    from shadertune.backends import load_backend
    from shadertune import explain
    dev = load_backend(a.backend).device().key
    M, N, K = (Problem.parse(a.shape).M, Problem.parse(a.shape).N, Problem.parse(a.shape).K)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(a.dtype)
    B = rng.standard_normal((K, N)).astype(a.dtype)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "first-use.sqlite"
    with Store(a.train_db) as s:
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(a.train_db, db)
    how_before = explain(A, B, backend=a.backend, db=db)      # the problem as matmul sees it
    p = how_before.problem
    if how_before.how == "exact":
        print(f"model-quality: error: {p.key} is tuned in the training store", file=sys.stderr)
        return 1
    with Store(db) as s:
        before = s.count()
    spec = FirstUse(k=a.k, seconds=a.seconds)
    call = lambda **kw: shadertune.matmul(A, B, backend=a.backend, db=db, **kw)  # noqa: E731
    t0 = time.perf_counter()
    C = call(config="auto", tune=spec)
    first = time.perf_counter() - t0
    ref = A.astype(np.float64) @ B.astype(np.float64)
    err = float(np.linalg.norm(C - ref) / np.linalg.norm(ref))
    with Store(db) as s:
        timed = s.count() - before
    after = explain(A, B, backend=a.backend, db=db)
    times = {"later": [], "auto": [], "given": []}
    for _ in range(a.calls):
        for what, kw in (("later", {"config": "auto", "tune": spec}), ("auto", {"config": "auto"}),
                         ("given", {"config": after.config.to_dict()})):
            t0 = time.perf_counter()
            call(**kw)
            times[what].append(1e3 * (time.perf_counter() - t0))
    doc = {"problem": p.key, "device": dev, "k": a.k, "seconds": a.seconds, "first_call_s": first,
           "configs_timed": timed, "auto_before": how_before.to_dict(), "auto_after": after.to_dict(),
           "relative_error": err, "calls_ms": times}
    (out / "first-use.json").write_text(json.dumps(doc, indent=1) + "\n")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{p.key} on {dev}: first call {first:.2f} s (FirstUse(k={a.k}, seconds={a.seconds:g}): "
          f"{timed} configs timed; auto before: {how_before.how}, after: {after.how}, {after.reason}); "
          f"relative error {err:.1e}; median of {a.calls} later calls: {med['later']:.2f} ms with "
          f"tune, {med['auto']:.2f} ms auto without tune, {med['given']:.2f} ms with the config given")
    return 0


def import_bench_cuda(a) -> int:
    from shadertune.backends.cuda import codegen
    from shadertune.perfmodel.data import results_from_candidates
    n = 0
    with Store(a.into) as s:
        for path in a.runs:
            doc = json.loads(pathlib.Path(path).read_text())
            dev = doc["device"] if isinstance(doc["device"], str) else doc["device"]["renderer"]
            # bench-cuda's JSON names the GPU, not the driver: the run stands in for it
            for r in results_from_candidates(doc, f"{dev} | bench-cuda {pathlib.Path(path).parent.name}"):
                s.put(r, a.template_hash or codegen.template_hash())
                n += 1
    print(f"imported {n} verified trials into {a.into}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="model-quality", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("heldout")
    h.add_argument("--backend", default="gl")
    h.add_argument("--train-db", required=True, help="training store (sampled into with --sample-time)")
    h.add_argument("--out", required=True, help="folder for eval.sqlite and model-quality.md")
    h.add_argument("--heldout", help="comma-separated MxNxK[:TN] (default: skinny, odd, large per backend)")
    h.add_argument("--dtype", default="float32")
    h.add_argument("--sample-time", type=float, default=0, help="sample this many seconds first")
    h.add_argument("--sample-problems", type=int, default=40)
    h.add_argument("--sample-configs", type=int, default=16)
    h.add_argument("--min-size", type=int, default=16)
    h.add_argument("--max-size", type=int, default=256)
    h.add_argument("--tune-time", type=float, default=60, help="seconds of tuning per held-out shape")
    h.add_argument("--tune-budget", type=int, help="evaluations of tuning per held-out shape")
    h.add_argument("--repeats", type=int, default=10)
    h.add_argument("--rounds", type=int, default=3, help="interleaved re-timing rounds (default 3)")
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--template-hash", metavar="H",
                   help="train on the training store's results of templates H (an earlier template "
                        "that renders the same kernels as today's), relabelled as today's in "
                        "OUT/train-relabelled.sqlite; default: its results of today's templates")
    h.add_argument("--train-device", metavar="KEY",
                   help="with --template-hash: the device key those results were stored under "
                        "(the same GPU under another driver or CuPy version)")
    h.add_argument("--json", metavar="PATH")
    o = sub.add_parser("offline")
    o.add_argument("store")
    o.add_argument("--backend")
    o.add_argument("--learners", help="comma-separated (default all)")
    o.add_argument("--folds", type=int, default=5)
    o.add_argument("--template-hash", metavar="H", help="score the results of templates H "
                   "(default: the store's largest group)")
    o.add_argument("--targets", help="comma-separated (default: every target the backend has)")
    o.add_argument("--seeds", type=int, default=1, help="validate with seeds 0..N-1 (folds and learners)")
    o.add_argument("--json", metavar="PATH")
    k = sub.add_parser("same-kernels")
    k.add_argument("store", nargs="?", help="compare the configs of this store's results (or --sample)")
    k.add_argument("--template-hash", metavar="H", help="the stored results' templates")
    k.add_argument("--sample", type=int, metavar="N",
                   help="instead of a store: N configs of each kernel family drawn from the spaces "
                        "of the earlier tree")
    k.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    k.add_argument("--problems", default=SAMPLE_PROBLEMS,
                   help="the sample's problems, MxNxK:dtype:op:bN keys joined by ','")
    k.add_argument("--exact", action="store_true", help="compare the whole sources byte for byte")
    where = k.add_mutually_exclusive_group(required=True)
    where.add_argument("--commit", help="a commit whose templates hash to H (git archive of it)")
    where.add_argument("--tree", help="a folder holding that commit's shadertune/ and shaders/")
    r = sub.add_parser("replay")
    r.add_argument("--backend", default="cuda", help="'cuda', 'gl' or module:Class (its device need not exist)")
    r.add_argument("--train-db", required=True, help="read only: a copy is trained from")
    r.add_argument("--eval-db", required=True, help="the eval.sqlite of a heldout run")
    r.add_argument("--out", required=True, help="folder for replay.md and replay.json")
    r.add_argument("--template-hash", metavar="H", help="the training store's results of templates H "
                   "(default: its largest group)")
    r.add_argument("--targets", help="comma-separated targets to train on (default: the backend's default)")
    f = sub.add_parser("first-use")
    f.add_argument("--backend", default="gl")
    f.add_argument("--train-db", required=True, help="copied: the copy receives the first-use results")
    f.add_argument("--out", required=True)
    f.add_argument("--shape", required=True, help="MxNxK (A is M x K, B is K x N), not tuned in the training store")
    f.add_argument("--dtype", default="float32")
    f.add_argument("--k", type=int, default=8)
    f.add_argument("--seconds", type=float, default=20.0)
    f.add_argument("--calls", type=int, default=5)
    i = sub.add_parser("import-bench-cuda")
    i.add_argument("runs", nargs="+")
    i.add_argument("--into", required=True)
    i.add_argument("--template-hash", help="default: the current CUDA templates' hash")
    a = p.parse_args(argv)
    return {"heldout": heldout, "offline": offline, "replay": replay, "same-kernels": same_kernels,
            "first-use": first_use,
            "import-bench-cuda": import_bench_cuda}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
