"""PerfModel: predicted GFLOP/s (and milliseconds) of configs on a problem.

One model per backend, device and template hash, trained on every verified
result of the store for that key. The target is log GFLOP/s: across problem
sizes it varies far less than the time does, and ranking the configs of one
problem by it is the same as ranking by predicted time (time = flops /
GFLOP/s). predict_ms(problem, configs) has the signature of the Backend's
cost-model hook, so a learned model can guide a search.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np

from ..config import Config
from ..problem import Problem
from . import learners
from .data import TrainingData
from .features import Featurizer

FORMAT = 5            # bump when a saved model can no longer be read as written
TARGETS = ("log_gflops", "log_ms")
DEFAULT_TARGET = "log_gflops"


def _target(data: TrainingData, target: str) -> np.ndarray:
    if target == "log_gflops":
        return np.log(data.gflops())
    if target == "log_ms":
        return np.log(np.asarray(data.ms, np.float64))
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
        self.meta = meta       # rows, problems (keys), fit_seconds, trained_at, sklearn, store_count, validation
        # dtype -> (config, its largest relative error on a problem of that dtype),
        # best-ranked first: the configs `auto` may choose from
        self.verified = {d: list(v) for d, v in (verified or {}).items()}

    # --- training -----------------------------------------------------------
    @classmethod
    def train(cls, data: TrainingData, *, limits: Mapping | None = None,
              learner: str = learners.DEFAULT, target: str = DEFAULT_TARGET,
              seed: int = 0) -> "PerfModel":
        if len(data) == 0:
            raise learners.ModelUnavailable(
                f"no verified results for {data.backend} on {data.device!r} to train on")
        sk = learners.sklearn()
        t0 = time.perf_counter()
        pairs = list(zip(data.problems, data.configs))
        feat = Featurizer(data.backend, limits).fit(pairs)
        X = feat.rows(pairs)
        y = _target(data, target)
        est = learners.make(learner, seed)
        with learners.one_thread():
            est.fit(X, y)
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
        with learners.one_thread():
            y = self.estimator.predict(X)
        if self.target == "log_gflops":
            return np.exp(y)
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
        line = (f"{self.learner} model of log GFLOP/s" if self.target == "log_gflops"
                else f"{self.learner} model of log time")
        line += (f" for {self.backend} on {self.device} (templates {self.template_hash}): "
                 f"{m['rows']} verified results of {len(m['problems'])} problems, "
                 f"fit in {m['fit_seconds']:.2f} s")
        v = m.get("validation")
        if v and v.get("problems"):
            line += (f"; held-out problems ({v['problems']}, {v['folds']}-fold): top-1 at "
                     f"{100 * v['top1']:.1f}% of the best measured, best of top 8 at "
                     f"{100 * v['top8']:.1f}%")
        return line
