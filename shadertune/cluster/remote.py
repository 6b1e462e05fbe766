"""RemoteBackend: a device group's backend as the coordinator's tune() sees it.

The device, templates and default strategy come with the group (its workers
reported them as they joined); everything else that needs the backend itself
(space, default config, candidates, cost model, sources) is asked of one of the
group's workers.  Kernels are built and run on the workers only, through
ClusterEvaluator; matmul's run_call is not forwarded (a cluster tunes, it does
not serve matmul calls).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..backends.base import Backend
from ..config import Config
from ..errors import ShadertuneError
from ..problem import Problem

if TYPE_CHECKING:
    from .coordinator import DeviceGroup


class RemoteBackend(Backend):
    def __init__(self, group: "DeviceGroup"):
        self.group = group
        self.name = group.backend_name
        self.default_strategy = group.default_strategy
        self._spaces: dict = {}

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
        return self.group.call("predict_ms", problem, [Config(c) for c in configs])

    def source(self, problem: Problem, config) -> str:
        return self.group.call("source", problem, Config(config))

    def precompile(self, problem: Problem, configs: Sequence[Config]) -> None:
        self.group.call("precompile", problem, [Config(c) for c in configs])

    def build(self, problem: Problem, config):
        raise ShadertuneError("a cluster's kernels are built and run on its workers: evaluate "
                              "through shadertune.cluster.ClusterEvaluator")
