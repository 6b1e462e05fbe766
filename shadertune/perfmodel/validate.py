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
Only measured configs can be scored, so this measures ranking, not the search
over unmeasured configs that `auto` does; scripts/model-quality times that.
"""
from __future__ import annotations

import random
import time

import numpy as np

from ..problem import Problem, shape_distance
from . import learners
from .data import TrainingData
from .model import PerfModel, default_target

TOP = 8


def _nearest(problem: Problem, pool: list[Problem]) -> Problem | None:
    same = [q for q in pool if (q.dtype, q.trans_a, q.trans_b) == (problem.dtype, problem.trans_a, problem.trans_b)]
    return min(same, key=lambda q: (shape_distance(q, problem), q.M, q.N, q.K), default=None)


def validate(data: TrainingData, *, learner: str = learners.DEFAULT, target: str | None = None,
             folds: int = 5, seed: int = 0, limits=None, cost_model=None) -> dict:
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
            rows.append({"problem": p.key, "configs": len(cfgs), "top1": float(gf[picks[0]] / best),
                         "top8": float(gf[picks[:TOP]].max() / best), "nearest": near,
                         "nearest_problem": q.key if q else None, "cost_model": cost})
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
    return out


def guard_of(v: dict) -> dict | None:
    """From a validate() result scored with the backend's cost model: the learned
    model's top-1 and the analytical model's on the same held-out problems, and which
    `auto` uses ('learned', or 'analytical' where the learned model scored lower);
    None where there is no analytical score (no cost model, no held-out problem)."""
    if not v.get("problems") or v.get("cost_model") is None:
        return None
    learned, analytical = float(v["top1"]), float(v["cost_model"])
    return {"learned": learned, "analytical": analytical, "learned_top8": float(v["top8"]),
            "problems": int(v["problems"]), "folds": int(v["folds"]), "learner": v["learner"],
            "target": v["target"], "use": "analytical" if learned < analytical else "learned"}


def compare(data: TrainingData, names=learners.NAMES, targets=(None,), **kw) -> list[dict]:
    """validate() for each learner and target (None: the backend's default target; the
    measurement behind learners.DEFAULT and model.default_target)."""
    return [validate(data, learner=n, target=t, **kw) for n in names for t in targets]
