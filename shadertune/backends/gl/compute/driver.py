"""The compute family's driver: operands in storage buffers as the caller stored them.

A, B and C are buffers holding the caller's row-major floats byte for byte (a
batch: the products one after another), so an upload is one copy of the
caller's array and the read-back lands in the caller's `out`.  A config with
a_src / b_src = 'texture' reads the same buffer through a buffer texture (the
texture units' path), so every source of one shape shares one upload.

Each pass is one dispatch over the tile grid (x: tiles of N, y: tiles of M, z:
products x splits) that adds its k-range into C: the first pass starts from
beta * C (C holds the caller's C when beta != 0), later passes from what the
previous one stored; a storage barrier separates them.  With ks > 1 the splits
write partial tiles into a workspace and a reduce dispatch adds them into C.
A checked run may time the first tile rows of a one-pass config on their own
(racing, kernel.BaseGLKernel.checked_run): the dispatch then covers a band of tile
rows (u_ty0), and bands add up to the whole pass where nothing is reduced
(ks = 1).

Programs: the shape is a uniform, so the kernels of every shape whose config
renders the same source share one compiled program, kept with the context
(a client that multiplies many shapes, a blocked factorisation, compiles each
kind of kernel once); at most PROGRAMS_KEPT are kept, and a kernel past that
compiles and releases its own.
"""
from __future__ import annotations

import numpy as np

from ....core.config import Config
from ....errors import BuildError, RunError
from ....core.problem import Problem
from ..kernel import BaseGLKernel, output_array
from ..platform import glraw
from ..platform.context import state_of
from ..platform.transfer import Transfers
from ..platform.uninterrupted import uninterrupted
from .codegen import reduce_groups, reduce_uniforms
from .layout import ComputeLayout

# storage-buffer bindings and texture units the templates name (a buffer texture of
# A or B takes the unit of its buffer's binding)
_BIND_A, _BIND_B, _BIND_C, _BIND_W = 0, 1, 2, 3
_UNIT_A, _UNIT_B = _BIND_A, _BIND_B
PROGRAMS_KEPT = 256


class ComputeKernel(BaseGLKernel):
    """One compiled compute program (and its reduce program, with splits) + the
    buffers of one problem shape."""

    def __init__(self, ctx, problem: Problem, config: Config, layout: ComputeLayout, source: str,
                 reduce_source: str | None = None, pool=None, transfers: Transfers | None = None):
        self.reduce_source = reduce_source
        self.reducer = None
        self.a_src = config.get("a_src", "ssbo")
        self.b_src = config.get("b_src", "ssbo")
        self._views: dict[str, int] = {}      # operand -> buffer texture name (texture sources)
        self._strides = (0, 0)
        self._own_programs: list = []        # programs not kept with the context
        self._gpu_fill = None                 # whether poison() fills C on the GPU (first use)
        super().__init__(ctx, problem, config, layout, source, pool=pool, transfers=transfers)

    # --- programs -------------------------------------------------------------
    def _compile(self, source: str):
        """The context's program of `source`: compiled once, kept for every kernel that
        renders it (one the context cannot keep any more is this kernel's own)."""
        kept = state_of(self.ctx).programs
        program = kept.get(source)
        if program is not None:
            return program
        try:
            with uninterrupted():    # Ctrl-C inside the driver's compile crashed it
                program = self.ctx.compute_shader(source)
        except Exception as e:  # moderngl raises a plain Exception with the compiler log
            raise BuildError(f"GLSL compute compile/link failed: {str(e).strip()[:2000]}", source) from None
        if len(kept) < PROGRAMS_KEPT:
            kept[source] = program
        else:
            self._own_programs.append(program)
        return program

    def _own(self, program) -> None:
        """Programs are the context's or in _own_programs (_compile): nothing to add."""

    def _make_pipeline(self) -> None:
        if self.layout.ks > 1:
            self.reducer = self._compile(self.reduce_source)

    # --- resources ------------------------------------------------------------
    def _make_textures(self):
        L = self.layout
        self.tex_a, self._tags["A"] = self._take((4 * L.a_floats,))
        self.tex_b, self._tags["B"] = self._take((4 * L.b_floats,))
        self.c_buf, _ = self._take((4 * L.c_floats,))
        self.w_buf = self._take((4 * L.workspace_floats,))[0] if L.ks > 1 else None
        self.fbos = []                 # nothing is drawn
        self._remake_views()

    def _remake_views(self) -> None:
        """Buffer textures over the operand buffers of the texture-source operands (made
        again when an operand moves to a pooled buffer that holds it already)."""
        self._drop_views()
        for name, src, buf in (("A", self.a_src, self.tex_a), ("B", self.b_src, self.tex_b)):
            if src == "texture":
                view = glraw.buffer_texture(self.ctx, buf.glo, self.layout.vec)
                if view is None:
                    raise RunError("the driver could not make a buffer texture over an operand")
                self._views[name] = view

    def _drop_views(self) -> None:
        for view in self._views.values():
            glraw.delete_texture(view)
        self._views.clear()

    def _warm_up(self) -> None:
        """One pass over one tile row: a driver that compiles at the first dispatch does
        it here, inside compile_ms (the buffers hold anything: nothing is read back)."""
        loaded, self._loaded = self._loaded, True
        try:
            self.execute(0, 1, rows=(0, 1))
        finally:
            self._loaded = loaded

    def release(self) -> None:
        self._drop_views()
        for program in self._own_programs:
            program.release()
        self._own_programs.clear()
        super().release()

    # --- uploads ----------------------------------------------------------------
    def load(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, cache=None) -> None:
        """Upload A and B as stored (problem.stored_shapes; with a batch, a single
        2-D matrix stands for every product) and C (out_shape, only when beta != 0)."""
        L, p = self.layout, self.problem
        A = np.ascontiguousarray(A, np.float32)
        B = np.ascontiguousarray(B, np.float32)
        (a2, b2), strides = p.stored_shapes, []
        for name, X, core, per in (("A", A, a2[-2:], L.M * L.K), ("B", B, b2[-2:], L.K * L.N)):
            if X.shape == core:
                strides.append(0)          # one matrix for every product
            elif X.shape == (p.batch,) + core and p.batch > 1:
                strides.append(per // L.vec)
            else:
                raise ValueError(f"kernel built for {name} stored as {((p.batch,) if p.batch > 1 else ()) + core}, "
                                 f"got {X.shape}")
        self._strides = tuple(strides)
        moved = [self.tex_a, self.tex_b]
        self.tex_a = self._upload("A", self.tex_a, ("buffer", A.shape),
                                  lambda obj: self.transfers.write_buffer(obj, A, slot="A"), cache)
        self.tex_b = self._upload("B", self.tex_b, ("buffer", B.shape),
                                  lambda obj: self.transfers.write_buffer(obj, B, slot="B"), cache)
        if [self.tex_a, self.tex_b] != moved:
            self._remake_views()
        if beta != 0.0:
            if C is None or np.shape(C)[-2:] != (L.M, L.N) or np.size(C) != L.c_floats:
                raise ValueError(f"beta != 0 needs C of shape {self.out_shape}")
            self.transfers.write_buffer(self.c_buf, np.ascontiguousarray(C, np.float32), slot="C")
        self._alpha, self._beta = float(alpha), float(beta)
        self._loaded = True

    def poison(self) -> None:
        """Fill C with NaN on the GPU: an element no invocation wrote cannot pass.  Only
        without beta: with beta != 0, C holds the caller's C, which the first pass reads."""
        if self._beta != 0.0:
            return
        if self._gpu_fill is None:
            self._gpu_fill = glraw.usable(self.ctx)
        if not (self._gpu_fill and glraw.fill_buffer(self.ctx, self.c_buf.glo, np.nan)):
            self.c_buf.write(np.full(self.layout.c_floats, np.nan, np.float32))

    # --- execution ----------------------------------------------------------------
    @property
    def bands_add_up(self) -> bool:
        return self.layout.ks == 1

    def _execute(self, start: int, stop: int | None, src: int, rows) -> int:
        """Passes start..stop-1 over tile rows `rows` = (r0, r1) (all by default); C
        holds the result (returns 0, the one place it lives)."""
        import moderngl
        L = self.layout
        stop = L.passes if stop is None else stop
        r0, r1 = rows if rows is not None else (0, L.tiles_m)
        for buf, binding in ((self.tex_a, _BIND_A), (self.tex_b, _BIND_B), (self.c_buf, _BIND_C),
                             (self.w_buf, _BIND_W)):
            if buf is not None:
                buf.bind_to_storage_buffer(binding)
        for name, unit in (("A", _UNIT_A), ("B", _UNIT_B)):
            if name in self._views:
                glraw.bind_texture_unit(unit, self._views[name])
        self._set("u_alpha", self._alpha)
        self._set("u_beta", self._beta)
        self._set("u_sa", self._strides[0])
        self._set("u_sb", self._strides[1])
        self._set("u_ty0", r0)
        for name, value in (("M", L.M), ("N", L.N), ("K", L.K), ("u_ksplit", L.ksplit)):
            self._set(name, value)
        for p in range(start, stop):
            k0, k1 = L.pass_range(p)
            self._set("u_k0", k0)
            self._set("u_kend", k1)
            self._set("u_first", p == 0)
            self.program.run(L.tiles_n, r1 - r0, L.batch * L.ks)
            self.ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)
            if self.reducer is not None:
                for name, value in (("u_alpha", self._alpha), ("u_beta", self._beta), ("u_first", p == 0),
                                    *reduce_uniforms(L).items()):
                    self._set(name, value, self.reducer)
                self.reducer.run(*reduce_groups(L), 1)
                self.ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)
        self.ctx.memory_barrier()       # read-back, clears and the next uploads see every store
        return 0

    def read(self, which: int, out: np.ndarray | None = None) -> np.ndarray:
        """C into `out` (a writeable C-contiguous float32 array of out_shape): one read-back."""
        out = output_array(out, *self.out_shape)
        self.transfers.read_buffer(self.c_buf, out)
        return out
