"""Leave-problems-out validation of a learner on a store's verified results.

The problems are split into folds; a model trained on the other folds ranks
the measured configs of each held-out problem. Scored per problem, as a share
of the best measured GFLOP/s of that problem:
- top1: the config the model ranks first;
- top8: the best of the 8 it ranks first;
- nearest: what the nearest-shape rule would pick among the same configs: the
  one fastest on the nearest other problem (problem.shape_distance, same dtype
  and layout), among the configs measured on both (None where none is).
- cost_model (when a backend cost model is given, e.g. Backend.predict_ms):
  the config it predicts fastest, as top1 is scored.
- auto and default (when the backend's default config is given, `default`:
  Backend.default_config, and optionally its analytical list, `listed`:
  Backend.candidates): auto's pick as select makes it, the learned model's first
  among the configs auto may run without checking them (verified on a training
  problem, or in the backend's list for this problem; select._from_model), those
  measured on the held-out problem; and the default config (what auto falls back
  to), measured there, else the cost model's pick in its place. Their ratio per
  problem is what the guard (guard_of) judges.
Only measured configs can be scored, so this measures ranking, not the search
over unmeasured configs that `auto` does; scripts/model-quality times that.
"""
from __future__ import annotations

import random
import time

import numpy as np

from ..core.problem import Problem, shape_distance
from ..core.texttable import text_table
from ..core.verdict import tolerance_for
from . import learners
from .data import TrainingData
from .model import PerfModel, default_target

TOP = 8
# The guard keeps the learned model only where, on held-out problems, auto's pick
# ran at least this share of the default config's speed on every problem (timing
# noise between configs of one search) and at least the default's on average.
NOISE = 0.03


def _nearest(problem: Problem, pool: list[Problem]) -> Problem | None:
    same = [q for q in pool if (q.dtype, q.trans_a, q.trans_b) == (problem.dtype, problem.trans_a, problem.trans_b)]
    return min(same, key=lambda q: (shape_distance(q, problem), q.M, q.N, q.K), default=None)


def validate(data: TrainingData, *, learner: str = learners.DEFAULT, target: str | None = None,
             folds: int = 5, seed: int = 0, limits=None, cost_model=None, default=None,
             listed=None) -> dict:
    target = target or default_target(data.backend)
    problems = data.distinct_problems
    out = {"learner": learner, "target": target, "problems": 0, "folds": 0, "per_problem": []}
    if len(problems) < 2:
        return out
    order = list(problems)
    random.Random(seed).shuffle(order)
    k = min(folds, len(order))
    groups = [order[i::k] for i in range(k)]
    by_problem = data.by_problem()
    rows, fit_s = [], 0.0
    for held in groups:
        train = data.subset(set(problems) - set(held))
        t0 = time.perf_counter()
        model = PerfModel.train(train, limits=limits, learner=learner, target=target, seed=seed)
        fit_s += time.perf_counter() - t0
        train_problems = train.distinct_problems
        for p in held:
            measured = by_problem[p]
            cfgs = [c for c, _ in measured]
            gf = np.array([p.flops / (m * 1e6) for _, m in measured])
            best = gf.max()
            ranked = model.rank(p, cfgs)
            idx = {c: i for i, c in enumerate(cfgs)}
            picks = [idx[c] for _, c in ranked]
            q = _nearest(p, train_problems)
            near = None
            if q is not None:
                on_q = {c: m for c, m in by_problem[q]}
                both = [i for i, c in enumerate(cfgs) if c in on_q]
                if both:
                    near = float(gf[min(both, key=lambda i: on_q[cfgs[i]])] / best)
            cost = None
            if cost_model is not None:
                ms = cost_model(p, cfgs)
                if ms is not None:
                    cost = float(gf[min(range(len(cfgs)), key=lambda i: ms[i])] / best)
            row = {"problem": p.key, "configs": len(cfgs), "top1": float(gf[picks[0]] / best),
                   "top8": float(gf[picks[:TOP]].max() / best), "nearest": near,
                   "nearest_problem": q.key if q else None, "cost_model": cost}
            if default is not None:
                row.update(_auto_and_default(model, p, cfgs, idx, gf / best, cost, default, listed))
            rows.append(row)
    near = [r["nearest"] for r in rows if r["nearest"] is not None]
    both = [r for r in rows if r["nearest"] is not None]
    out.update(problems=len(rows), folds=k, per_problem=rows, fit_seconds=fit_s,
               top1=float(np.mean([r["top1"] for r in rows])),
               top8=float(np.mean([r["top8"] for r in rows])),
               top1_min=float(np.min([r["top1"] for r in rows])),
               nearest=float(np.mean(near)) if near else None,
               top1_where_nearest=float(np.mean([r["top1"] for r in both])) if both else None,
               nearest_compared=len(both),
               cost_model=(float(np.mean([r["cost_model"] for r in rows]))
                           if rows and all(r["cost_model"] is not None for r in rows) else None))
    scored = [r for r in rows if r.get("auto_vs_default") is not None]
    if default is not None:
        ratios = [r["auto_vs_default"] for r in scored]
        out.update(auto_scored=len(scored),
                   auto=float(np.mean([r["auto"] for r in scored])) if scored else None,
                   default=float(np.mean([r["default"] for r in scored])) if scored else None,
                   auto_vs_default_mean=float(np.mean(ratios)) if scored else None,
                   auto_vs_default_min=float(np.min(ratios)) if scored else None)
    return out


def _auto_and_default(model: PerfModel, p: Problem, cfgs: list, idx: dict, share: np.ndarray,
                      cost: float | None, default, listed) -> dict:
    """One held-out problem's auto pick and default config, as shares of its best
    measured (see the module docstring); None where either cannot be scored."""
    d = default(p)
    base = float(share[idx[d]]) if d in idx else cost          # the default's, else the cost model's pick
    may = set(model.verified_configs(p.dtype, tolerance_for(p.dtype))) | set(listed(p) if listed else ()) | {d}
    eligible = [c for c in cfgs if c in may]
    if not eligible or base is None or base <= 0:
        return {"auto": None, "default": base, "auto_vs_default": None, "default_measured": d in idx}
    pick = model.rank(p, eligible)[0][1]
    auto = float(share[idx[pick]])
    return {"auto": auto, "default": base, "auto_vs_default": auto / base, "default_measured": d in idx,
            "auto_config": pick.key}


def guard_of(v: dict) -> dict | None:
    """From a validate() result scored with the backend's cost model: which `auto`
    uses, 'learned' or 'analytical' (its default config). Validated with the default
    (validate's `default`): the learned model only where, on the held-out problems,
    auto's pick ran at least 1 - NOISE of the default's speed on each problem and at
    least the default's on average ('learned' and 'analytical' are then those two
    picks' mean shares of the best measured, over the problems both were scored on;
    fewer than 2 such problems validate nothing: the default). Without `default`:
    the learned model's top-1 against the analytical model's, the learned one unless
    it scored lower. None where there is no analytical score (no cost model, no
    held-out problem)."""
    if not v.get("problems") or v.get("cost_model") is None:
        return None
    g = {"learned_top8": float(v["top8"]), "problems": int(v["problems"]), "folds": int(v["folds"]),
         "learner": v["learner"], "target": v["target"]}
    if "auto_scored" not in v:
        learned, analytical = float(v["top1"]), float(v["cost_model"])
        return {**g, "learned": learned, "analytical": analytical,
                "use": "analytical" if learned < analytical else "learned"}
    n = int(v["auto_scored"])
    if n < 2:
        return {**g, "learned": float(v["top1"]), "analytical": float(v["cost_model"]), "scored": n,
                "vs_default_mean": v["auto_vs_default_mean"], "vs_default_min": v["auto_vs_default_min"],
                "use": "analytical"}
    mean, low = float(v["auto_vs_default_mean"]), float(v["auto_vs_default_min"])
    keep = mean >= 1.0 and low >= 1.0 - NOISE
    return {**g, "learned": float(v["auto"]), "analytical": float(v["default"]), "scored": n,
            "vs_default_mean": mean, "vs_default_min": low, "use": "learned" if keep else "analytical"}


def compare(data: TrainingData, names=learners.NAMES, targets=(None,), **kw) -> list[dict]:
    """validate() for each learner and target (None: the backend's default target; the
    measurement behind learners.DEFAULT and model.default_target)."""
    return [validate(data, learner=n, target=t, **kw) for n in names for t in targets]


def comparison_table(rows: list[dict]) -> str:
    """Markdown of validate() rows; rows of several seeds ('seed') get a seed column
    and, per learner and target, a mean row."""
    pct = lambda x: "-" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    seeds = any("seed" in r for r in rows)
    head = (["learner", "target"] + (["seed"] if seeds else [])
            + ["problems", "top-1", "worst top-1", "best of top 8", "top-1 where nearest scored",
               "nearest rule (problems scored)", "backend cost model", "fit s (all folds)"])
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["learner"], r["target"]), []).append(r)
    body = []
    for (learner, target), rs in groups.items():
        if seeds and len(rs) > 1:
            mean = lambda k: (sum(r[k] for r in rs) / len(rs)  # noqa: E731
                              if all(r.get(k) is not None for r in rs) else None)
            rs = rs + [{"learner": learner, "target": target, "seed": "mean", "problems": rs[0]["problems"],
                        **{k: mean(k) for k in ("top1", "top1_min", "top8", "top1_where_nearest",
                                                "nearest", "cost_model", "fit_seconds")},
                        "nearest_compared": rs[0].get("nearest_compared", 0)}]
        for r in rs:
            body.append([r["learner"], r["target"]] + ([r.get("seed", "")] if seeds else [])
                        + [r["problems"], pct(r.get("top1")), pct(r.get("top1_min")), pct(r.get("top8")),
                           pct(r.get("top1_where_nearest")),
                           f"{pct(r.get('nearest'))} ({r.get('nearest_compared', 0)})",
                           pct(r.get("cost_model")), f"{(r.get('fit_seconds') or 0):.2f}"])
    return text_table(head, body, "ll" + "r" * (len(head) - 2))
