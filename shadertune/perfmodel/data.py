"""What a model learns from: the verified results of one backend, device and
template hash in a store (every problem, every config), read through the
Store's public queries, so a result the store does not call correct (under
the default tolerance of its dtype, what matmul uses) never reaches a model."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.config import Config
from ..core.problem import Problem


@dataclass
class TrainingData:
    backend: str
    device: str
    template_hash: str
    problems: list[Problem] = field(default_factory=list)   # one per row
    configs: list[Config] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)            # measured median
    errors: list[float] = field(default_factory=list)        # relative error against float64

    def __len__(self) -> int:
        return len(self.ms)

    @property
    def distinct_problems(self) -> list[Problem]:
        return sorted(set(self.problems))

    def gflops(self) -> np.ndarray:
        return np.array([p.flops / (m * 1e6) for p, m in zip(self.problems, self.ms)])

    def subset(self, keep) -> "TrainingData":
        """The rows whose problem is in `keep`."""
        keep = set(keep)
        idx = [i for i, p in enumerate(self.problems) if p in keep]
        return TrainingData(self.backend, self.device, self.template_hash,
                            [self.problems[i] for i in idx], [self.configs[i] for i in idx],
                            [self.ms[i] for i in idx], [self.errors[i] for i in idx])

    def by_problem(self) -> dict[Problem, list[tuple[Config, float]]]:
        out: dict[Problem, list] = {}
        for p, c, m in zip(self.problems, self.configs, self.ms):
            out.setdefault(p, []).append((c, m))
        return out


def training_data(store, backend: str, device: str, template_hash: str) -> TrainingData:
    """Every verified, timed result for (backend, device, template hash) in `store`.

    Problems with M, N or K = 0 are left out: they do no work to time."""
    data = TrainingData(backend, device, template_hash)
    for p in store.tuned_problems(backend, device, template_hash):
        if min(p.M, p.N, p.K) < 1:
            continue
        for r in store.ranked(backend, device, p, template_hash):
            if r.median_ms is None or not r.median_ms > 0:
                continue
            data.problems.append(p)
            data.configs.append(r.config)
            data.ms.append(float(r.median_ms))
            data.errors.append(float(r.error))
    return data


def results_from_candidates(doc: dict, device: str) -> list:
    """The verified candidates a candidate-list run timed (the rows' 'trials' of the
    JSON scripts/bench-cuda writes) as Results of the file's backend on `device`: real
    measurements for a model."""
    from ..core.result import OK, Result
    backend = doc["device"]["backend"]
    out = []
    for row in doc["rows"]:
        p = Problem.from_dict(row["problem"])
        for t in row["trials"]:
            if t.get("status") == OK and t.get("median_ms"):
                out.append(Result(backend, device, p, t["config"], OK, times_ms=[float(t["median_ms"])],
                                  error=t.get("error"), message="from a candidate-list run"))
    return out
