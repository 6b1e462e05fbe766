"""GL backend: Brook-style fragment-shader matmul on headless EGL (or GLFW)."""
from __future__ import annotations

import collections
import contextlib

from ...core.config import Config
from ...errors import InvalidConfig
from ...core.problem import Problem
from ..base import Backend, DeviceInfo
from . import calls
from .features import GL_MODEL_FEATURES
from .kernel import BaseGLKernel
from .knob_layout import GL_KNOB_LAYOUT
from .microbench import measure_gl
from .paths import PATHS, path_limits, path_of, predict_ms, templates_hash
from .platform.arrays import ArrayHome
from .platform import compile_ahead
from .platform.context import default_device_index, get_context, gl_profile, make_current
from .platform.device import device_info
from .platform.pool import TexturePool, default_pool_bytes
from .platform.timing import clock_of
from .platform.transfer import Transfers, transfer_mode
from .roofline import gl_ceiling_lines, gl_config_roofline
from .space import default_config, default_for, gl_space, with_defaults

# Spaces a backend keeps (per problem: a call that repeats a shape, or a factorisation
# that walks a few dozen, asks for them again; a space is made in milliseconds, and a
# kept one also keeps what it ranked and memoised)
SPACES_KEPT = 64

# GPU work queued while a search compiles a kernel (platform/timing.py, "The clock"):
# about a compile's time, so that neither the clock falls nor the next run waits long:
# the last compile of the same family's, with a margin, at most COMPILE_HEAT_S (a
# fragment program compiles in far less; a build waited for all of the heater's work).
COMPILE_HEAT_S = 0.2
COMPILE_HEAT_MARGIN = 1.25


def compile_heat_s(last_s: float | None) -> float:
    """Seconds of heater work to queue before a compile whose family's last one took
    `last_s` seconds (None: none measured yet)."""
    if last_s is None:
        return COMPILE_HEAT_S
    return min(COMPILE_HEAT_S, COMPILE_HEAT_MARGIN * max(0.0, last_s))


class GLBackend(Backend):
    name = "gl"
    compile_scope = "process"       # programs live in the context that compiled them
    shared_by_threads = False     # its context is current in one thread (context.py)
    batched = True                # stacked products: one dispatch of the compute family
    # a blocked factorisation on GL arrays walks about three shapes a block step (notes/gl-arrays.md)
    kernels_kept = 32
    knob_layout = GL_KNOB_LAYOUT
    model_features = GL_MODEL_FEATURES
    canonical_config = staticmethod(with_defaults)     # every GL knob named (space.py)

    def __init__(self, device_index: int | None = None, context: str = "egl", ctx=None):
        self.device_index = device_index
        self.context_kind = context
        self._ctx = ctx
        self._device: DeviceInfo | None = None
        self._pool = None
        self._transfers = None
        self._arrays = None
        self._spaces: dict = {}       # problem -> its GLSpace (SPACES_KEPT; the device's limits are fixed)
        self._searching = False       # inside search_session: compiles are heated over
        self._compile_s: dict[str, float] = {}   # family -> its last build's compile seconds
        # sources of configs a search announced (precompile, from any thread), started on
        # the driver's threads by the next build in the context's thread
        self._announced: collections.deque = collections.deque()

    @classmethod
    def check_environment(cls) -> None:
        """$SHADERTUNE_GL_TRANSFER, $SHADERTUNE_GL_POOL_MB, $SHADERTUNE_GL_DEVICE,
        $SHADERTUNE_GL_PROFILE and $SHADERTUNE_GL_COMPILE_AHEAD, read as a run reads them."""
        transfer_mode()              # the context's default when unset
        default_pool_bytes()
        default_device_index()
        gl_profile()
        compile_ahead.ahead_setting()

    @property
    def pool(self):
        """Textures kept between this backend's kernels (platform/pool.py): at most
        256 MB of GPU memory ($SHADERTUNE_GL_POOL_MB) stay held, 2 GB during a
        search; `pool.clear()` gives them back."""
        if self._pool is None:
            self._pool = TexturePool(self.ctx)
        return self._pool

    @property
    def transfers(self):
        """How operands reach the GPU and C comes back (platform/transfer.py):
        staging buffers kept for this backend's kernels."""
        if self._transfers is None:
            self._transfers = Transfers(self.ctx)
        return self._transfers

    @property
    def arrays(self) -> ArrayHome:
        """Where this backend's GL arrays live (platform/arrays.py; shadertune.gl makes them):
        its context, in its thread, with buffers from its texture pool."""
        if self._arrays is None:
            self._arrays = ArrayHome(self)
        return self._arrays

    @property
    def ctx(self):
        """The context, made in (and serving only) the thread of first use, and made
        current there (a thread may hold several; ContextError from another thread or a
        forked child)."""
        if self._ctx is None:
            self._ctx = get_context(self.device_index, self.context_kind)
        make_current(self._ctx)
        return self._ctx

    @contextlib.contextmanager
    def search_session(self):
        """A search builds hundreds of kernels of one shape: the texture pool may hold
        2 GB meanwhile (operands stay on the GPU across layouts), all given back after,
        with the transfers' staging memory."""
        compile_ahead.ahead_setting()     # a bad value refused before anything is timed
        pool = self.pool
        before = pool.max_bytes
        pool.max_bytes = max(before, default_pool_bytes(searching=True))
        self._searching = True
        try:
            yield
        finally:
            self._searching = False
            self._announced.clear()
            compile_ahead.drop(self.ctx)      # compiles for configs the search did not reach
            pool.max_bytes = before
            pool.clear()
            if self._transfers is not None:
                self._transfers.release()

    def precompile(self, problem: Problem, configs) -> None:
        """The configs of paths that compile ahead (the compute family), queued for the
        driver's threads: the next build, in the context's thread, starts them all
        (platform/compile_ahead.py), on a GPU or as $SHADERTUNE_GL_COMPILE_AHEAD says.
        Touches no GL object: a cluster's worker calls it beside its GPU thread."""
        sources = []
        for config in configs:
            if not path_of(with_defaults(config)).ahead:
                continue
            try:
                sources.append(self.source(problem, config))
            except Exception:             # noqa: BLE001 - an invalid config says so when built
                continue
        self._announced.extend(sources)

    def _start_announced(self) -> None:
        """Start the compiles precompile queued (in the context's thread)."""
        if not self._announced:
            return
        sources = []
        while self._announced:
            sources.append(self._announced.popleft())
        if compile_ahead.wanted(self.ctx):
            compile_ahead.start(self.ctx, sources)

    def device(self) -> DeviceInfo:
        if self._device is None:
            self._device = device_info(self.ctx, path_limits())
        return self._device

    def _check_problem(self, problem: Problem) -> None:
        if problem.dtype != "float32":
            raise InvalidConfig(f"the GL backend computes in float32 only, got {problem.dtype}")
        if min(problem.M, problem.N, problem.K) < 1:
            raise InvalidConfig(f"GL kernels need M, N, K >= 1, got {problem.key}")

    def space(self, problem: Problem):
        """The GL space of `problem` on this device (kept: a space depends on the problem
        and the device's limits alone, and nothing changes one once made but its phase
        plan, which the search sets on a narrowed copy)."""
        self._check_problem(problem)
        space = self._spaces.get(problem)
        if space is None:
            if len(self._spaces) >= SPACES_KEPT:
                self._spaces.pop(next(iter(self._spaces)))
            space = self._spaces[problem] = gl_space(problem, self.device().limits)
        return space

    def default_config(self, problem: Problem) -> Config:
        return default_config(problem, self.space(problem))

    def default_for(self, problem: Problem, given) -> Config:
        """The default a partial config is completed from (its path's: space.default_for)."""
        return default_for(problem, self.space(problem), given)

    def source(self, problem: Problem, config: Config) -> str:
        """The program of `config` as its path renders it (paths.path_of)."""
        config = with_defaults(config)
        self._check_problem(problem)
        path = path_of(config)
        return path.source(path.plan(problem, config), config)

    def build(self, problem: Problem, config: Config) -> BaseGLKernel:
        """The kernel of `config`, built by its path (a config without the image-path or
        compute knobs is an MRT one)."""
        config = with_defaults(config)
        self._check_problem(problem)
        why = self.space(problem).why_invalid(config)
        if why:
            raise InvalidConfig(f"config not in the GL space for {problem.key}: {why}")
        path = path_of(config)
        layout = path.plan(problem, config)
        source = path.source(layout, config)
        self._start_announced()
        compiles = self._searching and not (path.ahead and compile_ahead.ready(self.ctx, source))
        if compiles:
            keeper = clock_of(self.ctx)
            if keeper is not None:    # the compile's gap must not let the GPU's clock fall
                # (a program at hand loads in a millisecond: heating over it made the build
                # wait for the heater's work instead)
                keeper.heat_while(compile_heat_s(self._compile_s.get(path.family)))
        kernel = path.build(self.ctx, problem, config, layout, source,
                            pool=self.pool, transfers=self.transfers)
        if compiles:
            self._compile_s[path.family] = kernel.program_s
        return kernel

    def template_hash(self) -> str:
        return templates_hash()

    def roofline(self, problem: Problem, config, ceilings) -> dict | None:
        """The bound of one config, its path's (roofline.py): a fragment config's fetch,
        ALU or storage-buffer bound, a compute config's FMA peak or operand traffic."""
        return gl_config_roofline(with_defaults(config), ceilings, problem)

    def predict_ms(self, problem: Problem, configs):
        """The analytical cost model of every path (cost.py, compute/model.py)."""
        return predict_ms(problem, configs, self.device().limits)

    def host_predictor(self):
        import functools
        return functools.partial(predict_ms, limits=dict(self.device().limits))

    def candidates(self, problem: Problem, n: int = 24) -> list[Config]:
        """The default first, then the default shapes of the families of their own (the
        compute family's, where the device has it) ranked by the cost model: the configs
        a search times first."""
        space = self.space(problem)
        first = [default_config(problem, space)]
        for path in PATHS:
            if path.candidates is not None and path.family in space.parts:
                more = path.candidates(problem, space)
                ms = self.predict_ms(problem, more)
                first += [c for _, c in sorted(zip(ms, more), key=lambda t: t[0]) if c not in first]
        return first[:n]

    def ceiling_lines(self, ceilings) -> list[tuple[str, float]]:
        return gl_ceiling_lines(ceilings)

    def measure_ceilings(self, preset: str = "full") -> dict:
        return measure_gl(self.ctx, preset=preset)

    def express_lane(self, door):
        """matmul's lane for repeated calls on GL arrays (express.py)."""
        from .express import Express
        return Express(door)

    def run_call(self, call, plan):
        """Host arrays in float32, tiled under the texture limit; GL arrays on the GPU,
        read where they lie (calls.py, array_calls.py)."""
        return calls.run_call(self, call, plan)

    def problem_of(self, call):
        """The main tile of a product larger than the texture limit (calls.py)."""
        return calls.problem_of(self, call)

    def presets(self) -> dict[str, str]:
        return dict(calls.PRESETS)

    def preset_config(self, name: str, problem: Problem):
        return super().preset_config(name, problem) if name == "fast" else calls.preset_config(name, problem)


__all__ = ["GLBackend"]
