"""RemoteBackend: a device group's backend as the coordinator's tune() sees it.

The device, templates and default strategy come with the group (its workers
reported them as they joined); everything else that needs the backend itself
(space, default config, candidates, cost model, sources) is asked of one of the
group's workers.  Kernels are built and run on the workers only, through
ClusterEvaluator; matmul's run_call is not forwarded (a cluster tunes, it does
not serve matmul calls).

A long list of configs for the cost model (the model strategy ranks a whole
space: 200,000 CUDA configs are 16 MB pickled) goes as their indices in the
problem's enumerated space, which the worker enumerates too (worker.configs_at):
4 bytes a config, and nothing but a range for the whole space in order.  A short
list (a climb's neighbours, asked between two steps while the GPUs wait) is
predicted here with the workers' host predictor (Backend.host_predictor: the same
model over the same device limits), without a round trip to a worker.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..backends.base import Backend
from ..core.config import Config
from ..errors import ShadertuneError
from ..core.problem import Problem

if TYPE_CHECKING:
    from .coordinator import DeviceGroup

# a list of configs at least this long travels as indices into the enumerated space
BY_INDEX_FROM = 1000


_UNASKED = object()          # RemoteBackend.host_predictor before its one call
_NOT_HERE = object()         # RemoteBackend._predict_here: no answer in this process

class RemoteBackend(Backend):
    def __init__(self, group: "DeviceGroup"):
        self.group = group
        self.name = group.backend_name
        self.default_strategy = group.default_strategy
        self._spaces: dict = {}
        self._positions: dict = {}           # problem -> ({config: index}, configs)
        self._host_predictor = _UNASKED
        self._predict_local = True           # False once the host predictor fails here

    def device(self):
        return self.group.device

    def template_hash(self) -> str:
        return self.group.template_hash

    def space(self, problem: Problem):
        # kept: the enumeration caches its valid configs on the Space object
        if problem not in self._spaces:
            self._spaces[problem] = self.group.call("space", problem)
        return self._spaces[problem]

    def default_config(self, problem: Problem) -> Config:
        return self.group.call("default_config", problem)

    def candidates(self, problem: Problem, n: int = 24) -> list[Config]:
        return self.group.call("candidates", problem, n)

    def predict_ms(self, problem: Problem, configs: Sequence[Config]) -> list[float] | None:
        configs = [c if isinstance(c, Config) else Config(c) for c in configs]
        if len(configs) < BY_INDEX_FROM:
            # a few configs (a climb's neighbours, between two of its steps while the GPUs
            # wait): the workers' own model run here, no way out to a worker and back
            pred = self._predict_here(problem, configs)
            if pred is not _NOT_HERE:
                return pred
        where = self.indices(problem, configs) if len(configs) >= BY_INDEX_FROM else None
        if where is None:
            return self.group.call("predict_ms", problem, configs)
        pred = self.group.call("predict_at", problem, where, host=True)   # beside the GPU
        return None if pred is None else [float(p) for p in pred]

    def _predict_here(self, problem: Problem, configs: list[Config]):
        """The host predictor's answer in this process, or _NOT_HERE where there is none
        (the backend's model needs its device) or it fails here (a module this host
        lacks): then, and for the rest of the search, predict_ms asks a worker."""
        if self._predict_local is False:
            return _NOT_HERE
        try:
            predictor = self.host_predictor()
            if predictor is None:
                self._predict_local = False
                return _NOT_HERE
            pred = predictor(problem, configs)
            return None if pred is None else [float(p) for p in pred]
        except ShadertuneError:
            raise
        except Exception:           # noqa: BLE001 (the workers' answer stands in)
            self._predict_local = False
            return _NOT_HERE

    def host_predictor(self):
        """The workers' host predictor (Backend.host_predictor), asked once: the search
        ranks its space in a child process of the coordinator with it, so neither the
        coordinator's interpreter nor a worker's holds the lock for it."""
        if self._host_predictor is _UNASKED:
            self._host_predictor = self.group.call("host_predictor", None)
        return self._host_predictor

    def indices(self, problem: Problem, configs: Sequence[Config]):
        """(size of the enumerated space, the configs' indices in it, three (index, key)
        samples the worker checks its own enumeration with), or None when a config is
        not in the space."""
        if problem not in self._positions:
            every = self.space(problem).configs()
            self._positions[problem] = ({c: i for i, c in enumerate(every)}, every)
        position, every = self._positions[problem]
        try:
            idx = np.fromiter((position[c] for c in configs), dtype=np.int64, count=len(configs))
        except KeyError:
            return None
        if not len(idx):
            return None
        whole = len(idx) == len(every) and bool(np.all(idx == np.arange(len(every))))
        samples = [(int(i), every[int(i)].key) for i in (idx[0], idx[len(idx) // 2], idx[-1])]
        return len(every), (range(len(every)) if whole else idx.astype(np.uint32)), samples

    def source(self, problem: Problem, config) -> str:
        return self.group.call("source", problem, Config(config))

    def precompile(self, problem: Problem, configs: Sequence[Config]) -> None:
        self.group.call("precompile", problem, [Config(c) for c in configs])

    def build(self, problem: Problem, config):
        raise ShadertuneError("a cluster's kernels are built and run on its workers: evaluate "
                              "through shadertune.cluster.ClusterEvaluator")
