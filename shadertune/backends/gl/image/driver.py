"""The image-path driver: operands in their own row-major memory, C written by imageStore.

passes = ceil(KA / steps); each pass adds np k-values times alpha to C.  The
fragment that owns a C texel reads it and writes it back (read-modify-write)
in every pass after the first, so one image holds C throughout, and C's image
is C's row-major memory: one read-back per call, straight into the caller's
array.  GL orders nothing between one draw's imageStore and the next draw's
imageLoad by itself: a shader-image-access barrier follows every pass, and
all barriers follow the last one (read-back, clears and the next call's
uploads then see the stores).  The first pass starts from beta * Cin (C's
input, a texture of its own) or zero, so a kernel can run any number of times
on one load.
"""
from __future__ import annotations

import numpy as np

from ....core.config import Config
from ....core.problem import Problem
from ..fragment import compile_program, fullscreen_pipeline, row_bands, unroll_factor
from ..kernel import BaseGLKernel, kernel_operands, output_array
from ..platform.objects import clear_writes_nan, parking_framebuffer, placeholder_texture
from ..platform.transfer import GpuPacking, Transfers
from .layout import ImageLayout

# texture units and buffer / image bindings the image template's uniforms point at
_UNIT_A, _UNIT_B, _UNIT_CIN = 0, 1, 2
_BIND_A, _BIND_B = 0, 1
_IMAGE_C, _IMAGE_PREV = 0, 1


class ImageKernel(BaseGLKernel):
    """One compiled image-path program + the objects of one problem shape."""

    def __init__(self, ctx, problem: Problem, config: Config, layout: ImageLayout, source: str,
                 pool=None, transfers: Transfers | None = None, carry: str = "rmw"):
        self.carry = carry
        self.a_src = config.get("a_src", "texture")
        self.b_src = config.get("b_src", "texture")
        self.packing = None
        super().__init__(ctx, problem, config, layout, source, pool=pool, transfers=transfers)

    def _compile(self, source: str):
        return compile_program(self.ctx, source)

    def _make_pipeline(self) -> None:
        self.vao = fullscreen_pipeline(self.ctx, self.program)
        self._resources.append(self.vao)

    # --- resources ------------------------------------------------------
    def _make_textures(self):
        L = self.layout
        self.packing = GpuPacking(self.ctx, self.transfers)
        self.tex_a, self._tags["A"] = self._take((L.a_bytes,) if self.a_src == "ssbo" else L.a_size)
        self.tex_b, self._tags["B"] = self._take((L.b_bytes,) if self.b_src == "ssbo" else L.b_size)
        self.images = [self._take(L.c_size)[0] for _ in range(1 if self.carry == "rmw" else 2)]
        self.fbo = self.ctx.empty_framebuffer(L.viewport)
        self._resources.append(self.fbo)
        # only to clear C to NaN (poison); never drawn into
        self.clear_fbos = [self.ctx.framebuffer(color_attachments=[img]) for img in self.images]
        self._resources.extend(self.clear_fbos)

    def _setup(self) -> None:
        names = {"A": _UNIT_A, "B": _UNIT_B, "Cin": _UNIT_CIN, "C": _IMAGE_C, "Cprev": _IMAGE_PREV}
        for name, unit in names.items():
            if name in self.program:
                self.program[name].value = unit
        for name, binding in (("ABuf", _BIND_A), ("BBuf", _BIND_B)):
            if name in self.program:
                self.program[name].binding = binding

    def _warm_up(self) -> None:
        full = self.fbo.viewport
        loaded, self._loaded = self._loaded, True
        try:
            self.fbo.viewport = (0, 0, 1, 1)
            self.execute(0, 1)
        finally:
            self._loaded = loaded
            self.fbo.viewport = full

    def release(self) -> None:
        if self.packing is not None:
            # the packing programs are this context's: make it current first (a thread
            # may hold several contexts, and GL deletes names in whichever is current)
            parking_framebuffer(self.ctx).use()
            self.packing.release()
            self.packing = None
        super().release()

    # --- uploads --------------------------------------------------------
    def load(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, cache=None) -> None:
        """Upload op(A) (M, K), op(B) (K, N) and C (M, N, only when beta != 0) as they
        are (row-major float32; packed on the GPU where rows end mid-texel).

        `cache` (e.g. search.operands.OperandCache) names A and B: objects that hold
        them already (tagged with its token) are taken from the pool, not written."""
        L = self.layout
        A, B, C = kernel_operands(self.problem, L, A, B, C, beta)
        A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
        self.tex_a = self._upload("A", self.tex_a, ("image", self.a_src, L.M, L.K),
                                  lambda obj: self._write_a(obj, A), cache)
        self.tex_b = self._upload("B", self.tex_b, ("image", self.b_src, L.K, L.N),
                                  lambda obj: self._write_b(obj, B), cache)
        if C is not None:
            if self.tex_c is None:
                self.tex_c, _ = self._take(L.c_size)
            C = np.ascontiguousarray(C)
            if L.bc_packed_on_gpu:
                self.packing.write_texture(self.tex_c, C, slot="C")
            else:
                self.transfers.write_texture(self.tex_c, C, slot="C")
        self._alpha, self._beta = float(alpha), float(beta)
        self._loaded = True

    def _write_a(self, obj, A: np.ndarray) -> None:
        L = self.layout
        if self.a_src == "ssbo":
            if L.a_packed_on_gpu:
                self.packing.write_buffer(obj, A, L.M, slot="A")
            else:
                self.transfers.write_buffer(obj, A, slot="A")
        elif L.a_packed_on_gpu:
            self.packing.write_texture(obj, A, slot="A")
        else:
            self.transfers.write_texture(obj, A, slot="A")

    def _write_b(self, obj, B: np.ndarray) -> None:
        """B's K rows, then zero rows up to 4 * KA (a whole A texel always meets four)."""
        L = self.layout
        pad = 4 * L.KA - L.K
        if L.bc_packed_on_gpu:
            if self.b_src == "ssbo":
                self.packing.write_buffer(obj, B, 4 * L.KA, slot="B")
            else:
                self.packing.write_texture(obj, B, slot="B")
            return
        zeros = np.zeros((pad, L.N), np.float32)
        if self.b_src == "ssbo":
            self.transfers.write_buffer(obj, B, slot="B")
            if pad:
                obj.write(zeros, offset=B.nbytes)
        else:
            self.transfers.write_texture(obj, B, viewport=(0, 0, L.NB, L.K), slot="B")
            if pad:
                obj.write(zeros, viewport=(0, L.K, L.NB, pad))

    def poison(self) -> None:
        """Fill C's image(s) with NaN: an element no pass wrote cannot pass."""
        self.ctx.memory_barrier()        # earlier passes' stores land before the clear
        if clear_writes_nan(self.ctx):
            for fbo in self.clear_fbos:
                fbo.clear(*(float("nan"),) * 4)
            parking_framebuffer(self.ctx).use()
            return
        w, h = self.layout.c_size
        nan = np.full((h, w, 4), np.nan, np.float32)
        for img in self.images:
            img.write(nan)

    # --- execution ------------------------------------------------------
    def _bind_operands(self) -> None:
        for obj, src, unit, binding in ((self.tex_a, self.a_src, _UNIT_A, _BIND_A),
                                        (self.tex_b, self.b_src, _UNIT_B, _BIND_B)):
            if src == "ssbo":
                obj.bind_to_storage_buffer(binding)
            else:
                obj.use(unit)
        (self.tex_c or placeholder_texture(self.ctx)).use(_UNIT_CIN)   # read only when beta != 0

    def _execute(self, start: int, stop: int | None, src: int, rows) -> int:
        """Passes start..stop-1 over fragment rows `rows`; `src` is the image holding the
        sums so far (ping-pong; always 0 for read-modify-write).  Returns the image that
        holds the result."""
        with row_bands([self.fbo], rows):
            return self._draw(start, stop, src)

    def _draw(self, start: int, stop: int | None, src: int) -> int:
        L = self.layout
        stop = L.passes if stop is None else stop
        self._bind_operands()
        self._set("u_alpha", self._alpha)
        self._set("u_beta", self._beta)
        u = self._unroll_n()
        import moderngl
        self.fbo.use()
        for p in range(start, stop):
            steps = L.pass_steps(p)
            if self.carry == "rmw":
                self.images[0].bind_to_image(_IMAGE_C, read=True, write=True)
                dst = 0
            else:
                dst = 1 - src
                self.images[src].bind_to_image(_IMAGE_PREV, read=True, write=False)
                self.images[dst].bind_to_image(_IMAGE_C, read=False, write=True)
            self._set("u_k0", p * L.steps)
            self._set("u_steps", steps)
            self._set("u_full", steps // u * u)
            self._set("u_first", p == 0)
            self.vao.render(vertices=3)
            # the next pass reads what this one stored
            self.ctx.memory_barrier(moderngl.SHADER_IMAGE_ACCESS_BARRIER_BIT)
            src = dst
        self.ctx.memory_barrier()        # read-back, clears, uploads see every store
        return src

    def _unroll_n(self) -> int:
        return unroll_factor(self.config.get("unroll", 1), self.layout.steps)

    def read(self, which: int, out: np.ndarray | None = None) -> np.ndarray:
        """C from image `which` into `out` (see output_array): one read-back."""
        L = self.layout
        out = output_array(out, L.M, L.N)
        if L.bc_packed_on_gpu:
            self.packing.read_texture(self.images[which], out)
        else:
            self.transfers.read_texture(self.images[which], out)
        return out
