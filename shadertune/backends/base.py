"""The Backend contract: every hook the search core, matmul() and the reports use.

Backends never see the search; strategies never see backends (they only call
evaluate(config) -> Result).  The core calls every hook below always, never
looks one up with getattr/hasattr: a backend that has nothing to say inherits
the default, which states what "nothing" means.

Required (abstract): name, device(), space(problem), default_config(problem),
build(problem, config) -> Kernel, source(problem, config), template_hash().

Attribute with a default: default_strategy = "phased", the search strategy used
when none is named.

Optional hooks, with their defaults:
- search_session()         context manager around one search (GL: a larger texture pool)
- precompile(problem, cs)  build many configs ahead, in parallel (CUDA: NVRTC in a pool)
- compile_scope            who can use what precompile built: "host" (every process of
                           the host: CUDA's cubins on its disk) or "process" (the one
                           that built it: GL's programs, on its driver's threads); a
                           cluster hands a batch's compiles out by it
- candidates(problem, n)   up to n configs worth timing first, best first (CUDA: its
                           curated, model-ranked list); default [default_config(problem)]
- predict_ms(problem, cs)  a cost model: predicted milliseconds per config, or None
                           (no model); the model-guided strategy ranks by it
- roofline(problem, config, ceilings)  the bound that applies to one config, or None
- ceiling_lines(ceilings)  device-wide bounds [(label, GFLOP/s)] a plot draws across sizes
- measure_ceilings(preset) the device's measured ceilings (the roofline's inputs)
- run_call(call, plan)     execute one checked matmul call (shadertune.matmul's seam):
                           by default on host arrays, one kernel per 2-D product
- problem_of(call)         the problem whose config run_call resolves for a checked call
                           (what explain and tune(A, B) ask about), with a note
- presets(), preset_config(name, problem)  named configs matmul(config=NAME) takes
- on_device(device_index)  an instance on that device (matmul's device_index)
- dtypes, shared_by_threads, batched  what the backend computes in; whether one
                           instance may serve several threads; whether it takes batched
                           problems (Problem.batch > 1)
- kernels_kept             how many built kernels matmul keeps (default 8)
- knob_layout              how reports arrange its knobs (KnobLayout: landscapes, tables)
- model_features           what a learned performance model derives from its configs
                           (ModelFeatures), or None: the knobs alone
- canonical_config(config) the one form of a config (a static method; default: the
                           config as given): the store keeps and merges rows by it,
                           so a config written before a knob existed and the same
                           config naming the knob are one kernel, one row
Class attributes (knob_layout, model_features, canonical_config) are read without an
instance, by the backend's registered name: a report, a saved model or the store
needs no device.
"""
from __future__ import annotations

import abc
import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..core.config import Config
from ..core.problem import Problem
from ..core.space import Space


@dataclass(frozen=True)
class DeviceInfo:
    backend: str
    vendor: str
    renderer: str           # e.g. 'llvmpipe (LLVM 15.0.6, 256 bits)' or 'NVIDIA H200'
    driver: str             # GL_VERSION string / CUDA driver version
    limits: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        """What identifies a device in the store: renderer + driver version."""
        return f"{self.renderer} | {self.driver}"

    def describe(self) -> str:
        """One line naming the device: 'renderer R (vendor V), driver D', and whether
        it is a software renderer (what a command line's header prints)."""
        soft = ", a software renderer" if (self.limits or {}).get("software_renderer") else ""
        return f"renderer {self.renderer} (vendor {self.vendor}{soft}), driver {self.driver}"

    def to_dict(self) -> dict:
        return {"backend": self.backend, "vendor": self.vendor, "renderer": self.renderer,
                "driver": self.driver, "limits": dict(self.limits)}


@dataclass(frozen=True)
class KnobLayout:
    """How reports arrange a backend's knobs (report/landscape.py, report/tables.py).

    line: the knob of the landscape's line view (GFLOP/s against it, log axis), or None;
    family: knobs whose values split the lines, panels and bars into families;
    pairs: knob pairs drawn as heat maps (rows x columns);
    hold: how a view holds the knobs it does not show: "slice" (at each family's best
    config: read off a dense, exhaustively searched space) or "best" (the best config
    with the values shown: a sparse candidate list);
    knob_names, pair_names, value_names: what a reader calls a knob, a pair, a value;
    folded: (h, w, name) triples a table shows as one entry, name=HxW;
    acting: acting(config) -> the names of the knobs that act on that config's kernel
    (the others are held at the one value its family, path or language allows, and
    change nothing): what tables and messages print of a config (backends.acting);
    None: every knob acts."""
    line: str | None = None
    family: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()
    hold: str = "best"
    knob_names: Mapping[str, str] = field(default_factory=dict, hash=False)
    pair_names: Mapping[tuple[str, str], str] = field(default_factory=dict, hash=False)
    value_names: Mapping[str, Mapping] = field(default_factory=dict, hash=False)
    folded: tuple[tuple[str, str, str], ...] = ()
    acting: Callable[[Mapping[str, Any]], Sequence[str]] | None = field(default=None, compare=False)


def log2_count(x: float) -> float:
    """log2 of a count, at least 0 (counts below 1 read as 1): the scale most model
    features are on (sizes, tiles, passes, fetches)."""
    return math.log2(max(float(x), 1.0))


@dataclass(frozen=True)
class ModelFeatures:
    """What a learned performance model (shadertune.perfmodel) derives from a backend's
    configs beyond the problem and the knobs.

    derive(problem, config, limits) -> {name: float}: quantities the kernel's speed is
    written in (tiles, waves, passes, fetches, padding); it reads only the problem, the
    config and the device limits saved with a model (never a device), gives the same
    names in the same order for every config, and raises KeyError, ValueError,
    TypeError, ZeroDivisionError or ShadertuneError for a config it cannot describe.
    baseline: the one of them that is log2 of the backend's analytical time of a
    config (any unit proportional to time), where there is one: the residual target's
    baseline (perfmodel/model.py)."""
    derive: Callable[[Problem, Config, Mapping], dict]
    baseline: str | None = None


class Kernel(abc.ABC):
    """One compiled config for one problem, holding its device resources."""

    problem: Problem
    config: Config
    compile_ms: float | None = None
    # where time() took its times: 'query' (GL timer), 'wall' (host clock around a
    # finish), 'events' (CUDA events); read by reports and the demo
    timing_source: str | None = None

    @abc.abstractmethod
    def run(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0):
        """Upload inputs, poison the output, compute, return C.

        A and B are given as stored: the problem's trans flags say how."""

    def checked_run(self, A, B, *, limit_ms: float | None = None,
                    cache=None) -> tuple[np.ndarray, float | None]:
        """run() for the evaluator: (C, the run's own device milliseconds or None).

        A kernel that can time its own checked run (GL) returns that time, and with
        `limit_ms` may abandon the run part-way by raising TooSlow; `cache` keeps
        packed operands across the kernels of one search.  The default runs and
        gives no time: the evaluator then times the kernel with time()."""
        return self.run(A, B), None

    def checked_compare(self, A, B, ref, *, cache=None) -> tuple[tuple, int, float] | None:
        """A checked run compared with its float64 reference `ref` where the output
        lies, for a kernel whose output is on a device: (the output's shape, its
        NaN/Inf elements, the sum of (C - ref)^2 over its finite elements in float64),
        so that the evaluator need not copy C back.  `cache` keeps the inputs (and
        `ref`) there across the kernels of one search.  None (the default): the
        kernel compares nothing itself; the evaluator takes checked_run's C."""
        return None

    @abc.abstractmethod
    def time(self, repeats: int = 10, warmup: int = 2) -> list[float]:
        """Milliseconds of `repeats` device-timed runs on the last inputs (warm-up excluded)."""

    @abc.abstractmethod
    def release(self) -> None:
        """Free device resources now (idempotent)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


class Backend(abc.ABC):
    name: str = ""
    # compute dtypes: matmul computes float64 where numpy's result is float64 and the
    # backend has it, else float32
    dtypes: tuple[str, ...] = ("float32",)
    # whether one instance may serve several threads at once; a GL backend cannot (its
    # context is current in one thread), so matmul makes one per thread
    shared_by_threads: bool = True
    # whether a Problem with batch > 1 (that many products in one launch) is a problem
    # this backend tunes and runs (CUDA); tune() refuses one for a backend that is not
    batched: bool = False
    # how many built kernels shadertune.matmul keeps for this backend (kernel_cache.py;
    # least recently used out): a client that walks many shapes (a blocked
    # factorisation's updates) repeats them from the cache when they fit
    kernels_kept: int = 8
    # how reports arrange the knobs (a landscape's views, a table's folded pairs)
    knob_layout: ClassVar[KnobLayout] = KnobLayout()
    # what a learned performance model derives from the configs (None: the knobs alone)
    model_features: ClassVar[ModelFeatures | None] = None

    @staticmethod
    def canonical_config(config: Mapping) -> Config:
        """`config` in the one form the store keeps it in (read without a device; a
        backend whose configs may leave out knobs completes them: GL's with_defaults).
        It must agree with the canonical form of the backend's spaces (Space.canonical)."""
        return config if isinstance(config, Config) else Config(config)

    @classmethod
    def on_device(cls, device_index: int | None) -> "Backend":
        """An instance on device `device_index` (None: the default device)."""
        return cls() if device_index is None else cls(device_index=device_index)
    # the search strategy tune() and the CLI use when none is named
    # (shadertune.search.STRATEGIES); a backend with a cost model may prefer "model"
    default_strategy: str = "phased"
    compile_scope: str = "host"

    # --- required ---------------------------------------------------------
    @abc.abstractmethod
    def device(self) -> DeviceInfo:
        """The device this backend runs on (raises ContextError when there is none)."""

    @abc.abstractmethod
    def space(self, problem: Problem) -> Space:
        """The pruned tuning space for `problem` on this device."""

    @abc.abstractmethod
    def default_config(self, problem: Problem) -> Config:
        """A safe, usually fast config for `problem` (what matmul uses untuned)."""

    @abc.abstractmethod
    def build(self, problem: Problem, config: Config) -> Kernel:
        """Compile; raises InvalidConfig or BuildError (never crashes the caller)."""

    @abc.abstractmethod
    def source(self, problem: Problem, config: Config) -> str:
        """The generated kernel source for `config`."""

    @abc.abstractmethod
    def template_hash(self) -> str:
        """Hash of the templates the kernels come from (a store key part)."""

    # --- optional hooks (defaults say what 'none' means) -------------------
    @classmethod
    def check_environment(cls) -> None:
        """Check the environment variables the backend reads, with the functions that read
        them when it runs (so a tool refuses before it touches a store what a run would
        refuse later); ValueError names the variable.  None are read by default."""

    def default_for(self, problem: Problem, given) -> Config:
        """The config a partial config (the knobs `given`) is completed from: the
        default config; a backend whose paths have different defaults picks by the
        knobs given (GL: the render-target path's where they name it)."""
        return self.default_config(problem)

    def search_session(self):
        """Context manager around one search; nothing to hold by default."""
        return contextlib.nullcontext()

    def precompile(self, problem: Problem, configs: Sequence[Config]) -> None:
        """Build `configs` ahead (e.g. in parallel) so that build() finds them ready.

        A config that cannot compile says so when it is built; by default nothing
        is built ahead."""

    def candidates(self, problem: Problem, n: int = 24) -> list[Config]:
        """Up to `n` configs a search should time first, best first; by default the
        untuned default alone."""
        return [self.default_config(problem)][:n]

    def predict_ms(self, problem: Problem, configs: Sequence[Config]) -> list[float] | None:
        """Predicted milliseconds of each config (a cost model), or None: no model."""
        return None

    def host_predictor(self):
        """A picklable function (problem, configs) -> predict_ms's answer that needs no
        device (the model over the device's limits, read here), so that ranking a whole
        space can run in another process (search/ranking.py), off the interpreter lock
        the caller's other threads need.  None: predict_ms runs here only."""
        return None

    def roofline(self, problem: Problem, config, ceilings) -> dict | None:
        """The bound that applies to `config` given measured `ceilings`:
        {'gflops', 'bound', ...}, or None where the backend has no model."""
        return None

    def ceiling_lines(self, ceilings) -> list[tuple[str, float]]:
        """Bounds that hold for every problem, e.g. the FMA peak: [(label, GFLOP/s)];
        none by default."""
        return []

    def measure_ceilings(self, preset: str = "full") -> dict:
        """Measure this device's ceilings (see shadertune.core.roofline)."""
        raise NotImplementedError(f"backend {self.name!r} measures no ceilings")

    # --- matmul's seam ------------------------------------------------------
    def express_lane(self, door: Any) -> Any:
        """matmul's express lane for repeated calls through `door` (api.Door), or
        None (the default): an object with learn() and run(), see
        shadertune/backends/cuda/express.py."""
        return None

    def run_call(self, call: Any, plan: Any) -> Any:
        """Execute one checked matmul call (shadertune.call.inputs.MatmulCall: operands as the
        caller gave them, shapes, dtypes and out already checked) and return the result
        in the caller's array kind, written into call.out when given.

        plan.config(problem) is the caller's config resolved for a problem (once per
        call) and plan.kernel(problem) its built kernel from matmul's cache; with
        adapt=True the config may move to fit (a tiling remainder).  The default brings
        the operands to the host in the problem's dtype and runs one kernel for every
        2-D product of a batch."""
        from ..call.host import run_on_host
        kernel = None

        def product(A, B, C, dest):
            nonlocal kernel
            kernel = kernel or plan.kernel(call.problem)
            dest[...] = kernel.run(A, B, C, alpha=call.alpha, beta=call.beta)
        return run_on_host(call, product)

    def problem_of(self, call) -> tuple[Problem, str | None]:
        """(the problem run_call resolves a config for, for the checked call `call`; a
        note saying how it differs from the call's own, or None).  By default the
        call's problem: one kernel per 2-D product."""
        return call.problem, None

    def presets(self) -> dict[str, str]:
        """Named configs matmul(config=NAME) takes: name -> what it is ('auto' and
        'default' are always there)."""
        return {"fast": "the default config (what matmul runs untuned)"}

    def preset_config(self, name: str, problem: Problem):
        """The knobs of preset `name` for `problem` (a Config or dict; knobs left out
        are filled from the default config)."""
        if name == "fast":
            return self.default_config(problem)
        raise KeyError(f"backend {self.name!r} has no preset {name!r}")
