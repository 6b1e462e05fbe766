"""PerfModel: predicted GFLOP/s (and milliseconds) of configs on a problem.

One model per backend, device and template hash, trained on every verified
result of the store for that key. The target is log GFLOP/s: across problem
sizes it varies far less than the time does, and ranking the configs of one
problem by it is the same as ranking by predicted time (time = flops /
GFLOP/s). Other targets (TARGETS): log time, and the residual, log GFLOP/s
minus the log GFLOP/s of the backend's analytical model (a derived feature,
ModelFeatures.baseline; CUDA's model cycles), so that the trees correct the cost
model rather than replace it. predict_ms(problem, configs) has the signature
of the Backend's cost-model hook, so a learned model can guide a search.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np

from ..core.config import Config
from ..core.problem import Problem
from . import learners
from .data import TrainingData
from .estimator_arrays import Estimator
from .features import Featurizer

FORMAT = 8            # bump when a saved model can no longer be read as written (6: the guard;
                      # 7: the guard validated against the default config on held-out problems;
                      # 8: the estimator as arrays, saved as data: estimator_arrays.py)
TARGETS = ("log_gflops", "log_ms", "residual")
# the target where the backend has no analytical model among its derived features;
# where it has one (CUDA), the residual (default_target; measured in notes/perfmodel.md)
DEFAULT_TARGET = "log_gflops"


def default_target(backend_name: str) -> str:
    """The residual where the backend's derived features include its analytical model
    (leave-problems-out on four H200 CUDA stores: 96.5% top-1 on average against
    95.5% for log GFLOP/s, and the best worst case), else log GFLOP/s."""
    return "residual" if "residual" in targets_for(backend_name) else DEFAULT_TARGET


def targets_for(backend_name: str) -> tuple[str, ...]:
    """The targets a model of this backend can learn (the residual needs an analytical
    model among its derived features)."""
    from .features import baseline_of
    return tuple(t for t in TARGETS if t != "residual" or baseline_of(backend_name) is not None)


def _target(data: TrainingData, target: str, feat: Featurizer, X: np.ndarray) -> np.ndarray:
    if target == "log_gflops":
        return np.log(data.gflops())
    if target == "log_ms":
        return np.log(np.asarray(data.ms, np.float64))
    if target == "residual":
        base = feat.baseline_log_gflops(X)
        if base is None:
            raise ValueError(f"the residual target needs an analytical model among the "
                             f"{data.backend} backend's derived features (ModelFeatures.baseline); "
                             f"it has none")
        return np.log(data.gflops()) - base
    raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")


class PerfModel:
    def __init__(self, *, backend: str, device: str, template_hash: str, limits: Mapping,
                 learner: str, target: str, featurizer: Featurizer, estimator, meta: dict,
                 verified: Mapping[str, Sequence[tuple[Config, float]]] | None = None):
        self.backend = backend
        self.device = device
        self.template_hash = template_hash
        self.limits = dict(limits)
        self.learner = learner
        self.target = target
        self.featurizer = featurizer
        self.estimator = estimator
        # rows, problems (keys), fit_seconds, trained_at, sklearn, store_count, validation, guard
        self.meta = meta
        # dtype -> (config, its largest relative error on a problem of that dtype),
        # best-ranked first: the configs `auto` may choose from
        self.verified = {d: list(v) for d, v in (verified or {}).items()}

    # --- training -----------------------------------------------------------
    @classmethod
    def train(cls, data: TrainingData, *, limits: Mapping | None = None,
              learner: str = learners.DEFAULT, target: str | None = None,
              seed: int = 0) -> "PerfModel":
        """Fit on `data`; target None: default_target of its backend."""
        target = target or default_target(data.backend)
        if len(data) == 0:
            raise learners.ModelUnavailable(
                f"no verified results for {data.backend} on {data.device!r} to train on")
        sk = learners.sklearn()
        t0 = time.perf_counter()
        pairs = list(zip(data.problems, data.configs))
        feat = Featurizer(data.backend, limits).fit(pairs)
        X = feat.rows(pairs)
        y = _target(data, target, feat, X)
        fitted = learners.make(learner, seed)
        with learners.one_thread():
            fitted.fit(X, y)
        # predictions come from the fitted arrays, here as after a reload (saved.py)
        est = Estimator.of(fitted, X.shape[1])
        # per dtype, every config verified on some problem of it, best-ranked first
        # (each problem's fastest, then each one's second, ...), with its largest
        # error: what `auto` may choose from
        ranks: dict = {}
        worst: dict = {}
        for p, c, ms, err in zip(data.problems, data.configs, data.ms, data.errors):
            worst[p.dtype, c] = max(worst.get((p.dtype, c), 0.0), err)
        for p, results in data.by_problem().items():
            for i, (c, _) in enumerate(sorted(results, key=lambda t: t[1])):
                ranks[p.dtype, c] = min(ranks.get((p.dtype, c), i), i)
        verified: dict = {}
        for d, c in sorted(ranks, key=lambda dc: (ranks[dc], dc[1].key)):
            verified.setdefault(d, []).append((c, worst[d, c]))
        meta = {"format": FORMAT, "rows": len(data),
                "problems": sorted(p.key for p in data.distinct_problems),
                "dtypes": sorted({p.dtype for p in data.problems}),
                "fit_seconds": time.perf_counter() - t0, "trained_at": time.time(),
                "sklearn": sk.__version__, "seed": seed}
        return cls(backend=data.backend, device=data.device, template_hash=data.template_hash,
                   limits=limits or {}, learner=learner, target=target, featurizer=feat,
                   estimator=est, meta=meta, verified=verified)

    def trained_on(self, dtype: str) -> bool:
        """Whether problems of `dtype` were in the training data: a model predicts no
        other element type (another dtype is another regime: other kernels, rates)."""
        return dtype in self.meta["dtypes"]

    @property
    def guard(self) -> dict | None:
        """The learned model's leave-problems-out score against the backend's analytical
        model's on the store it was trained from (validate.guard_of: 'learned' and
        'analytical' top-1, 'problems', 'folds', 'use'), set when it was trained
        (saved.model_for); None where the backend has no analytical model."""
        return self.meta.get("guard")

    def prefers_analytical(self) -> bool:
        """Whether the learned model's picks validated below the backend's default config
        on its store's held-out problems (validate.guard_of): then `auto` takes the default
        config, and a search and first use rank by the analytical model."""
        g = self.meta.get("guard")
        return bool(g) and g.get("use") == "analytical"

    def verified_configs(self, dtype: str, tolerance: float | None = None) -> list[Config]:
        """Configs verified on some problem of `dtype`, best-ranked first; with a
        tolerance, only those whose errors on every such problem were within it."""
        return [c for c, err in self.verified.get(dtype, ())
                if tolerance is None or err <= tolerance]

    # --- prediction ---------------------------------------------------------
    def predict_gflops(self, problem: Problem, configs: Sequence[Mapping]) -> np.ndarray:
        if not configs:
            return np.empty(0)
        X = self.featurizer.transform(problem, configs)
        y = self.estimator.predict(X)
        if self.target == "log_gflops":
            return np.exp(y)
        if self.target == "residual":
            return np.exp(y + self.featurizer.baseline_log_gflops(X))
        return problem.flops / (np.exp(y) * 1e6)

    def predict_ms(self, problem: Problem, configs: Sequence[Mapping]) -> list[float]:
        """Predicted milliseconds per config (the Backend.predict_ms signature)."""
        g = self.predict_gflops(problem, configs)
        return [problem.flops / (x * 1e6) if x > 0 else math.inf for x in g]

    def rank(self, problem: Problem, configs: Sequence[Mapping]) -> list[tuple[float, Config]]:
        """(predicted GFLOP/s, config), best first; ties keep the given order."""
        cfgs = [c if isinstance(c, Config) else Config(c) for c in configs]
        g = self.predict_gflops(problem, cfgs)
        order = sorted(range(len(cfgs)), key=lambda i: -g[i])
        return [(float(g[i]), cfgs[i]) for i in order]

    # --- description --------------------------------------------------------
    @property
    def problems(self) -> list[str]:
        return list(self.meta.get("problems", []))

    def summary(self) -> str:
        m = self.meta
        line = f"{self.learner} model of " + {
            "log_gflops": "log GFLOP/s", "log_ms": "log time",
            "residual": "log GFLOP/s over the analytical model's"}.get(self.target, self.target)
        line += (f" for {self.backend} on {self.device} (templates {self.template_hash}): "
                 f"{m['rows']} verified results of {len(m['problems'])} problems, "
                 f"fit in {m['fit_seconds']:.2f} s")
        v = m.get("validation")
        if v and v.get("problems"):
            line += (f"; held-out problems ({v['problems']}, {v['folds']}-fold): top-1 at "
                     f"{100 * v['top1']:.1f}% of the best measured, best of top 8 at "
                     f"{100 * v['top8']:.1f}%")
            if v.get("cost_model") is not None:
                line += f", the backend's analytical model's top-1 at {100 * v['cost_model']:.1f}%"
            if v.get("auto_scored"):
                line += (f"; auto's pick against the default config on {v['auto_scored']} of them: "
                         f"{v['auto_vs_default_mean']:.3f}x on average, {v['auto_vs_default_min']:.3f}x "
                         f"at least")
        if self.prefers_analytical():
            line += (" (not reliably at least the default config on held-out problems: auto takes the "
                     "default config)")
        return line
