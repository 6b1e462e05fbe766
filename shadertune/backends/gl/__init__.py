"""GL backend: Brook-style fragment-shader matmul on headless EGL (or GLFW)."""
from __future__ import annotations

import contextlib

from ...config import Config
from ...errors import InvalidConfig
from ...problem import Problem
from ..base import Backend, DeviceInfo
from .asm_codegen import ASM_LANGS, asm_source, lang_of
from .asm_driver import AsmKernel
from .codegen import fragment_source, is_compute, is_image, plan_layout, templates_hash
from .compute_codegen import compute_source, reduce_source
from .compute_driver import ComputeKernel
from .compute_layout import ComputeLayout
from .driver import GLKernel
from .features import GL_MODEL_FEATURES
from .image_driver import ImageKernel
from .knob_layout import GL_KNOB_LAYOUT
from .pool import default_pool_bytes
from .timing import clock_of

# GPU work queued while a search compiles a kernel (timing.py, "The clock"): about a
# compile's time, so that neither the clock falls nor the next run waits long.
COMPILE_HEAT_S = 0.2
from .compute_space import compute_candidates
from .space import default_config, default_for, gl_space, with_defaults


class GLBackend(Backend):
    name = "gl"
    shared_by_threads = False     # its context is current in one thread (context.py)
    batched = True                # stacked products: one dispatch of the compute family
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
        self._searching = False       # inside search_session: compiles are heated over

    @classmethod
    def check_environment(cls) -> None:
        """$SHADERTUNE_GL_TRANSFER and $SHADERTUNE_GL_POOL_MB, read as a run reads them."""
        from .transfer import transfer_mode
        transfer_mode()              # the context's default when unset
        default_pool_bytes()

    @property
    def pool(self):
        """Textures kept between this backend's kernels (backends/gl/pool.py): at most
        256 MB of GPU memory ($SHADERTUNE_GL_POOL_MB) stay held, 2 GB during a
        search; `pool.clear()` gives them back."""
        if self._pool is None:
            from .pool import TexturePool
            self._pool = TexturePool(self.ctx)
        return self._pool

    @property
    def transfers(self):
        """How operands reach the GPU and C comes back (backends/gl/transfer.py):
        staging buffers kept for this backend's kernels."""
        if self._transfers is None:
            from .transfer import Transfers
            self._transfers = Transfers(self.ctx)
        return self._transfers

    @property
    def ctx(self):
        """The context, made in (and serving only) the thread of first use, and made
        current there (a thread may hold several; ContextError from another thread or a
        forked child)."""
        from .context import get_context, make_current
        if self._ctx is None:
            self._ctx = get_context(self.device_index, self.context_kind)
        make_current(self._ctx)
        return self._ctx

    @contextlib.contextmanager
    def search_session(self):
        """A search builds hundreds of kernels of one shape: the texture pool may hold
        2 GB meanwhile (operands stay on the GPU across layouts), all given back after,
        with the transfers' staging memory."""
        pool = self.pool
        before = pool.max_bytes
        pool.max_bytes = max(before, default_pool_bytes(searching=True))
        self._searching = True
        try:
            yield
        finally:
            self._searching = False
            pool.max_bytes = before
            pool.clear()
            if self._transfers is not None:
                self._transfers.release()

    def device(self) -> DeviceInfo:
        if self._device is None:
            from .device import device_info
            self._device = device_info(self.ctx)
        return self._device

    def _check_problem(self, problem: Problem) -> None:
        if problem.dtype != "float32":
            raise InvalidConfig(f"the GL backend computes in float32 only, got {problem.dtype}")
        if min(problem.M, problem.N, problem.K) < 1:
            raise InvalidConfig(f"GL kernels need M, N, K >= 1, got {problem.key}")

    def space(self, problem: Problem):
        self._check_problem(problem)
        return gl_space(problem, self.device().limits)

    def default_config(self, problem: Problem) -> Config:
        return default_config(problem, self.space(problem))

    def default_for(self, problem: Problem, given) -> Config:
        """The default a partial config is completed from (its path's: space.default_for)."""
        return default_for(problem, self.space(problem), given)

    def source(self, problem: Problem, config: Config) -> str:
        config = with_defaults(config)
        self._check_problem(problem)
        if is_compute(config):
            return compute_source(_compute_layout(problem, config), config)
        layout = plan_layout(problem.M, problem.N, problem.K, config)
        if lang_of(config) in ASM_LANGS:
            return asm_source(layout, config)
        return fragment_source(layout, config)

    def build(self, problem: Problem, config: Config) -> GLKernel:
        """The kernel of `config` (a config without the image-path or compute knobs is
        an MRT one)."""
        config = with_defaults(config)
        self._check_problem(problem)
        why = self.space(problem).why_invalid(config)
        if why:
            raise InvalidConfig(f"config not in the GL space for {problem.key}: {why}")
        if self._searching:
            keeper = clock_of(self.ctx)
            if keeper is not None:    # the compile's gap must not let the GPU's clock fall
                keeper.heat_while(COMPILE_HEAT_S)
        if is_compute(config):
            layout = _compute_layout(problem, config)
            return ComputeKernel(self.ctx, problem, config, layout, compute_source(layout, config),
                                 reduce_source(layout) if layout.ks > 1 else None,
                                 pool=self.pool, transfers=self.transfers)
        layout = plan_layout(problem.M, problem.N, problem.K, config)
        if lang_of(config) in ASM_LANGS:
            return AsmKernel(self.ctx, problem, config, layout, asm_source(layout, config), pool=self.pool,
                             transfers=self.transfers)
        src = fragment_source(layout, config)
        if is_image(config):
            return ImageKernel(self.ctx, problem, config, layout, src, pool=self.pool,
                               transfers=self.transfers)
        return GLKernel(self.ctx, problem, config, layout, src, pool=self.pool, transfers=self.transfers)

    def template_hash(self) -> str:
        return templates_hash()

    def roofline(self, problem: Problem, config, ceilings) -> dict | None:
        """The bound of one config: a fragment config's fetch or ALU bound, a compute
        config's FMA peak or operand traffic (roofline.py)."""
        from .roofline import compute_roofline, gl_config_roofline
        if is_compute(config):
            return compute_roofline(problem, config, ceilings)
        return gl_config_roofline(with_defaults(config), ceilings, problem.K)

    def predict_ms(self, problem: Problem, configs):
        """The analytical cost model of both families (compute_model.py)."""
        from .compute_model import predict_ms
        return predict_ms(problem, configs, self.device().limits)

    def candidates(self, problem: Problem, n: int = 24) -> list[Config]:
        """The default first, then the compute family's default shapes (where the device
        has it) ranked by the cost model: the configs a search times first."""
        space = self.space(problem)
        first = [default_config(problem, space)]
        if "compute" in space.parts:
            more = compute_candidates(problem, space)
            ms = self.predict_ms(problem, more)
            first += [c for _, c in sorted(zip(ms, more), key=lambda t: t[0]) if c not in first]
        return first[:n]

    def ceiling_lines(self, ceilings) -> list[tuple[str, float]]:
        from .roofline import gl_ceiling_lines
        return gl_ceiling_lines(ceilings)

    def measure_ceilings(self, preset: str = "full") -> dict:
        from .microbench import measure_gl
        return measure_gl(self.ctx, preset=preset)

    def run_call(self, call, plan):
        """Host arrays in float32, tiled under the texture limit (calls.py)."""
        from .calls import run_call
        return run_call(self, call, plan)

    def problem_of(self, call):
        """The main tile of a product larger than the texture limit (calls.py)."""
        from .calls import problem_of
        return problem_of(self, call)

    def presets(self) -> dict[str, str]:
        from .calls import PRESETS
        return dict(PRESETS)

    def preset_config(self, name: str, problem: Problem):
        from .calls import preset_config
        return super().preset_config(name, problem) if name == "fast" else preset_config(name, problem)


def _compute_layout(problem: Problem, config) -> ComputeLayout:
    try:
        return ComputeLayout.plan(problem, config)
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


__all__ = ["GLBackend", "GLKernel", "ImageKernel", "ComputeKernel", "AsmKernel"]
