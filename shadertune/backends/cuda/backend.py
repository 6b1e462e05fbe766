"""CUDABackend: the Backend protocol over the CUDA GEMM template."""
from __future__ import annotations

import contextlib

import numpy as np

from ...core.config import Config
from ...errors import ContextError, InvalidConfig
from ...core.problem import Problem
from ..base import Backend, DeviceInfo
from . import baseline, codegen, device
from .features import CUDA_MODEL_FEATURES
from .knob_layout import CUDA_KNOB_LAYOUT
from .space import make_space
from .tuning import candidates, listing


# Problems whose default config by device time (the model's pick before any call
# cost: tuning.listing) the cost model puts under this many milliseconds are timed as
# calls (CUDAKernel.time, mode 'call'): a call's host cost (its launches, ~5-15 us on
# the H100/H200 hosts) is a share of it that can change which config runs fastest
# through matmul, and a search ranks by what matmul costs. Their candidate list, and
# so the untuned pick, is ranked by what a call costs (tuning.call_cycles).
CALL_TIMED_MS = 0.3
# The candidate list a search asks for (SearchOptions.top): space() makes it with the
# start point it takes from it.
LISTED = 24


class CUDABackend(Backend):
    name = "cuda"
    dtypes = ("float32", "float64")
    batched = True        # a stack of products is one strided-batched launch
    # the cost model ranks the space (tuning.model_cycles): search.model uses it
    default_strategy = "model"
    knob_layout = CUDA_KNOB_LAYOUT
    model_features = CUDA_MODEL_FEATURES

    def __init__(self, device_id: int = 0):
        self.device_id = device_id
        self._spaces: dict[Problem, object] = {}
        self._lists: dict[tuple, list] = {}    # (problem, n) -> candidates(problem, n)
        self._call_timed: dict[Problem, bool] = {}
        self._sessions = 0      # search_session()s open: precompile starts compiles and returns
        self._device_info: DeviceInfo | None = None

    # --- device ------------------------------------------------------------
    def limits(self) -> dict:
        """The GPU's limits, or the sm_90 defaults without a GPU (codegen, nvcc tests)."""
        return device.limits(self.device_id)

    def arch(self) -> str:
        return self.limits()["arch"]

    def device(self) -> DeviceInfo:
        """The GPU, read once: config='auto' asks for its key on every call."""
        if self._device_info is None:
            cupy = device.import_cupy()
            if not device.has_gpu():
                raise ContextError("no CUDA GPU is visible (cupy.cuda.runtime.getDeviceCount() == 0)")
            lim = self.limits()
            rt, drv = cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.runtime.driverGetVersion()
            ver = lambda v: f"{v // 1000}.{v % 1000 // 10}"  # noqa: E731
            self._device_info = DeviceInfo(
                backend=self.name, vendor="NVIDIA", renderer=lim["name"],
                driver=f"CUDA driver {ver(drv)}, runtime {ver(rt)}, CuPy {cupy.__version__}", limits=lim)
        return self._device_info

    # --- space / codegen ---------------------------------------------------
    def space(self, problem: Problem):
        sp = self._spaces.get(problem)      # (one hash of the problem: matmul asks every call)
        if sp is not None:
            return sp
        if problem not in self._spaces:
            sp = make_space(problem, self.limits())
            # The searches start from the candidate list's first pick (the
            # model's, default_config): never from a walk of the knob product
            # for the first valid point, which can take a whole budget.  The
            # list a search times first is kept with it: ranking the kernels'
            # lists is most of its cost, and any length leads with that pick.
            got = listing(problem, sp, self.limits(), LISTED, CALL_TIMED_MS)
            listed = self._lists[(problem, LISTED)] = got.configs
            if listed:
                sp.phases = sp.phases.starting_at(listed[0])
                self._call_timed[problem] = got.calls
            self._spaces[problem] = sp
        return self._spaces[problem]

    def candidates(self, problem: Problem, n: int = 24) -> list[Config]:
        """The curated, model-ranked list (tuning.candidates): what a search times first.
        Kept per problem (~1 s to rank; a model's validation asks for every stored problem's)."""
        got = self._lists.get((problem, n))
        if got is None:
            got = self._lists[(problem, n)] = candidates(problem, self.space(problem), self.limits(), n,
                                                         CALL_TIMED_MS)
        return list(got)

    def default_config(self, problem: Problem) -> Config:
        start = self.space(problem).phases.start   # candidates(problem)[0], set by space()
        if start is not None:
            return start
        for cfg in self.space(problem):   # tiny or odd shapes: any valid point
            return cfg
        raise InvalidConfig(f"no valid CUDA config for {problem.key}")

    def source(self, problem: Problem, config) -> str:
        config = config if isinstance(config, Config) else Config(config)
        why = self.space(problem).why_invalid(config)
        if why:
            raise InvalidConfig(f"{config.key}: {why}")
        return codegen.source(problem, config)

    def template_hash(self) -> str:
        return codegen.template_hash()

    # --- build / run -------------------------------------------------------
    def build(self, problem: Problem, config):
        from .driver import CUDAKernel
        config = config if isinstance(config, Config) else Config(config)
        src = self.source(problem, config)     # raises InvalidConfig
        k = CUDAKernel(problem, config, src, self.arch(), self.limits())
        k.call_timed = self.call_timed(problem)
        return k

    def call_timed(self, problem: Problem) -> bool:
        """Whether a search times `problem`'s kernels as calls (events around each
        call, a sync after it: CUDAKernel.time's 'call' mode) rather than their
        device time held behind a spin kernel: where the cost model puts the
        default config by device time under CALL_TIMED_MS, so that host time can
        change the ranking (tuning.listing decides it with the candidate list,
        before the list is ranked by the call's cost). One rule per problem, from
        the model alone: every config of a search is timed the same way, in every
        run."""
        t = self._call_timed.get(problem)
        if t is None:
            self.space(problem)                 # the candidate list decides it
            t = self._call_timed.get(problem)
        if t is None:     # no candidate list (tiny or odd shapes): the default's model time
            t = self._call_timed[problem] = self.predict_ms(problem, [self.default_config(problem)])[0] < CALL_TIMED_MS
        return t

    def precompile(self, problem: Problem, configs) -> None:
        """Compile `configs` ahead. In a search (search_session): the first (a search's
        first batch leads with default_config) here and now, the rest started in
        processes, so that the first evaluation waits for its own compile alone and
        later builds for theirs (compiler.compile_ahead); outside a search, all of
        them in parallel before returning."""
        if not self._sessions:
            self.precompile_many([(problem, c) for c in configs])
            return
        from .compiler import compile_ahead, compile_cubin
        srcs = [codegen.source(problem, c) for c in configs]
        if not srcs:
            return
        compile_ahead(srcs[1:], self.arch())
        try:
            compile_cubin(srcs[0], self.arch())
        except Exception:         # noqa: BLE001 (its build() reports it, as the evaluator records)
            pass

    @contextlib.contextmanager
    def search_session(self):
        """Around one search: compiles started ahead (precompile) that it did not
        reach are cancelled when it ends."""
        self._sessions += 1
        try:
            yield
        finally:
            self._sessions -= 1
            if not self._sessions:
                from .compiler import stop_ahead
                stop_ahead()

    def predict_ms(self, problem: Problem, configs) -> list[float]:
        """The analytical model of tuning.py (cycles at the model's clock), in ms: device
        time, for every problem. call_timed decides by it, and the model strategy ranks
        a space by it after the candidate list it starts from, which for a problem timed
        as calls is ranked by the call's cost (tuning.call_cycles) already."""
        from .tuning import model_ms
        return model_ms(problem, configs, self.limits())

    def host_predictor(self):
        import functools
        from .tuning import model_ms
        return functools.partial(model_ms, limits=self.limits())

    def roofline(self, problem: Problem, config, ceilings) -> dict | None:
        """min(FMA peak, DRAM bandwidth x the problem's intensity)."""
        from .roofline import cuda_problem_roofline
        return cuda_problem_roofline(problem, ceilings)

    def ceiling_lines(self, ceilings) -> list[tuple[str, float]]:
        from .roofline import cuda_ceiling_lines
        return cuda_ceiling_lines(ceilings)

    def measure_ceilings(self, preset: str = "full") -> dict:
        from .microbench import measure_cuda
        return measure_cuda(preset=preset)

    def precompile_many(self, problem_configs, workers: int | None = None) -> list:
        """Compile many (problem, config) pairs into the cache in parallel."""
        from .compiler import compile_many
        srcs = [codegen.source(p, c) for p, c in problem_configs]
        return compile_many(srcs, self.arch(), workers)

    def cublas_time(self, problem: Problem, repeats: int = 20, operands=None,
                    hold_stream: bool = True) -> list[float]:
        return baseline.cublas_time(problem, repeats, operands_=operands, hold_stream=hold_stream)

    # --- matmul's seam --------------------------------------------------------
    @classmethod
    def on_device(cls, device_index: int | None) -> "CUDABackend":
        return cls(device_id=device_index or 0)

    def run_call(self, call, plan):
        """On this backend's device (api.py)."""
        from .api import run_call
        return run_call(self, call, plan)

    def problem_of(self, call):
        """The launch's problem: trans flags from the layouts, a stack as one batch (call.py)."""
        from .call import prepare
        return prepare(call).problem or call.problem, None

    def express_lane(self, door):
        """Repeated calls on device arrays skip the front door's analysis (express.py)."""
        from .express import Express
        return Express(door)

    def presets(self) -> dict[str, str]:
        from .api import PRESETS
        return dict(PRESETS)

    def preset_config(self, name: str, problem: Problem):
        from .api import preset_config
        return preset_config(self, name, problem)
