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
write partial tiles into a workspace and a reduce dispatch adds them into C, or
(kred = 1) add them into C with float atomics after C is set to beta * C (a fill
with zeros, or a scale dispatch).
A checked run may time the first tile rows of a one-pass config on their own
(racing, kernel.BaseGLKernel.checked_run): the dispatch then covers a band of tile
rows (u_ty0), and bands add up to the whole pass where nothing is reduced
(ks = 1).

GL arrays (run_regions): an operand or C that lives in a GL buffer is read (and
C written) where it lies, its first vector and row stride in uniforms (u_a0,
u_lda, ...), where its offset and leading dimension are whole vectors of the
config's loads (and, for a buffer-texture source, the buffer fits a buffer
texture); anything else is copied on the GPU into the kernel's own buffer first
(and C back out after).

Programs: the shape is a uniform, so the kernels of every shape whose config
renders the same source share one compiled program, kept with the context
(a client that multiplies many shapes, a blocked factorisation, compiles each
kind of kernel once); at most PROGRAMS_KEPT are kept, and a kernel past that
compiles and releases its own.
"""
from __future__ import annotations

import numpy as np

from ....core.config import Config
from ....errors import BuildError, RunError, TooSlow
from ....core.problem import Problem
from ..kernel import BaseGLKernel, output_array
from ..platform import compile_ahead, glraw, regions
from ..platform.context import state_of
from ..platform.transfer import Transfers
from ..platform.uniforms import set_uniform, set_uniforms
from ..platform.uninterrupted import hold_sigint, restore_sigmask, uninterrupted
from .codegen import reduce_groups, reduce_uniforms, scale_groups, scale_source, scale_uniforms
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
        self.scaler = None                    # C = beta * C before atomic splits (kred = 1)
        self.a_src = config.get("a_src", "ssbo")
        self.b_src = config.get("b_src", "ssbo")
        self._views: dict[str, int] = {}      # operand -> buffer texture name (texture sources)
        self._strides = (0, 0)
        self._own_programs: list = []        # programs not kept with the context
        self._gpu_fill = None                 # whether poison() fills C on the GPU (first use)
        # where A, B and C are read and written: name -> (buffer, first vector, vectors
        # between stored rows); None: the kernel's own buffers (host operands, load())
        self._places: dict | None = None
        self._region_views: dict[str, int] = {}   # buffer textures over GL arrays' buffers
        self._region_bufs: dict = {}              # the buffer each of those views (launcher)
        self._max_texels: int | None = None
        super().__init__(ctx, problem, config, layout, source, pool=pool, transfers=transfers)

    # --- programs -------------------------------------------------------------
    def _compile(self, source: str):
        """The context's program of `source`: compiled once, kept for every kernel that
        renders it (one the context cannot keep any more is this kernel's own); taken
        from the driver's threads where a search announced it (compile_ahead.py)."""
        kept = state_of(self.ctx).programs
        program = kept.get(source)
        if program is not None:
            return program
        program = compile_ahead.take(self.ctx, source)
        if program is None:
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
        if self.layout.reduces:
            self.reducer = self._compile(self.reduce_source)
        if self.layout.kred:
            self.scaler = self._compile(scale_source(self.layout))

    # --- resources ------------------------------------------------------------
    def _make_textures(self):
        L = self.layout
        self.tex_a, self._tags["A"] = self._take((4 * L.a_floats,))
        self.tex_b, self._tags["B"] = self._take((4 * L.b_floats,))
        self.c_buf, _ = self._take((4 * L.c_floats,))
        self.w_buf = self._take((4 * L.workspace_floats,))[0] if L.reduces else None
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
        self._drop_region_views()
        for program in self._own_programs:
            program.release()
        self._own_programs.clear()
        super().release()

    # --- uploads ----------------------------------------------------------------
    def load(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, cache=None) -> None:
        """Upload A and B as stored (problem.stored_shapes; with a batch, a single
        2-D matrix stands for every product) and C (out_shape, only when beta != 0)."""
        L, p = self.layout, self.problem
        self._places = None
        self._drop_region_views()
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

    # --- GL arrays --------------------------------------------------------------------
    def run_regions(self, a, b, out, *, alpha: float = 1.0, beta: float = 0.0) -> None:
        """See BaseGLKernel.run_regions: A and B are read where they lie, and C written,
        where the config's vector loads and stores fit their offsets and leading
        dimensions; else they go through the kernel's own buffers (copied on the GPU)."""
        self._out_region = out
        super().run_regions(a, b, out, alpha=alpha, beta=beta)

    def _load_regions(self, a, b, c, alpha: float, beta: float) -> None:
        L = self.layout
        self._drop_region_views()
        places = {}
        for name, reg, trans, own, src in (("A", a, L.trans_a, self.tex_a, self.a_src),
                                           ("B", b, L.trans_b, self.tex_b, self.b_src)):
            stored = reg.T if trans else reg          # rows of contiguous floats, as the kernel reads
            place = self._in_place(stored, L.vec, src == "texture")
            if place is None:
                regions.copy(self.ctx, stored, regions.contiguous_region(own, stored.rows, stored.cols))
                place = (own, 0, stored.cols // L.vec)
            elif src == "texture":
                view = glraw.buffer_texture(self.ctx, place[0].glo, L.vec)
                if view is None:
                    raise RunError("the driver could not make a buffer texture over a GL array")
                self._region_views[name] = view
                self._region_bufs[name] = place[0]
            places[name] = place
            self._tags[name] = None                   # the own buffer's contents are unknown now
        # atomic splits (kred = 1) scale and add into the kernel's own C, whole: a region
        # of a GL array is filled from it afterwards (_store_region)
        place = None if L.kred else self._in_place(self._out_region, L.c_vec, False)
        if place is None:
            if c is not None:                         # beta != 0: C's values into the own C first
                regions.copy(self.ctx, c, regions.contiguous_region(self.c_buf, L.M, L.N))
            place = (self.c_buf, 0, L.N // L.c_vec)
        places["C"] = place
        self._places = places
        self._alpha, self._beta = alpha, beta

    def _store_region(self, which: int, out) -> None:
        """C into the region where the kernel wrote its own C (nothing where it wrote the
        region itself)."""
        if self._places["C"][0] is self.c_buf and out.buffer is not self.c_buf:
            regions.copy(self.ctx, regions.contiguous_region(self.c_buf, self.layout.M, self.layout.N), out)

    def _in_place(self, stored, vec: int, texture: bool):
        """(buffer, first vector, row stride in vectors) of a region the kernel can read or
        write where it lies (row-major, offset and leading dimension whole vectors), else
        None."""
        where = _vectors_of(stored, vec)
        if where is None or (texture and not self._texture_shows(stored.buffer, vec)):
            return None
        return (stored.buffer,) + where

    def _texture_shows(self, buffer, vec: int) -> bool:
        """Whether a buffer texture of `vec`-float texels shows all of `buffer`."""
        if self._max_texels is None:
            self._max_texels = glraw.get_integer(self.ctx, glraw.MAX_TEXTURE_BUFFER_SIZE) or 0
        return buffer.size // (4 * vec) <= self._max_texels

    def _drop_region_views(self) -> None:
        for view in self._region_views.values():
            glraw.delete_texture(view)
        self._region_views.clear()
        self._region_bufs.clear()

    # --- a repeated call on GL arrays (matmul's express lane) ----------------------------
    def launcher(self, a, b, c):
        """run_regions(a, b, c, ...) again, on regions of the same geometry as these (shape,
        offset, strides) in other buffers: a callable go(a_buf, b_buf, c_buf, alpha, beta)
        that runs the same program with the same uniforms, bindings and barriers as
        run_regions would, checks GL's error flag (RunError) and flushes; it answers False,
        having done nothing, where a buffer texture cannot show a buffer given (the regular
        path would copy that operand).  None where run_regions would copy anything for this
        geometry (an operand or C that is not read or written in place, atomic splits)."""
        L = self.layout
        if L.kred or (a.rows, a.cols, b.rows, b.cols, c.rows, c.cols) != (L.M, L.K, L.K, L.N, L.M, L.N):
            return None
        where = (_vectors_of(a.T if L.trans_a else a, L.vec), _vectors_of(b.T if L.trans_b else b, L.vec),
                 _vectors_of(c, L.c_vec))
        if None in where:
            return None
        (a0, lda), (b0, ldb), (c0, ldc) = where
        import moderngl
        ssbo = moderngl.SHADER_STORAGE_BARRIER_BIT
        ctx, prog, reducer, w_buf, vec = self.ctx, self.program, self.reducer, self.w_buf, L.vec
        barrier = ctx.memory_barrier
        flush = glraw.function("glFlush")
        textures = tuple((name, unit) for name, unit, src in (("A", _UNIT_A, self.a_src), ("B", _UNIT_B, self.b_src))
                         if src == "texture")
        sa, sb = self._strides

        def uniforms(program, pairs):
            found = [(program.get(name, None), value) for name, value in pairs]
            return [(u, v) for u, v in found if u is not None]

        fixed = uniforms(prog, (("u_a0", a0), ("u_lda", lda), ("u_b0", b0), ("u_ldb", ldb), ("u_c0", c0),
                                ("u_ldc", ldc), ("u_sa", sa), ("u_sb", sb), ("u_ty0", 0), ("M", L.M),
                                ("N", L.N), ("K", L.K), ("u_ksplit", L.ksplit)))
        u_alpha, u_beta = (prog.get(name, None) for name in ("u_alpha", "u_beta"))
        groups = (L.tiles_n, L.tiles_m, L.batch * L.ks)
        passes = []
        for p in range(L.passes):
            k0, k1 = L.pass_range(p)
            reduce_step = None
            if reducer is not None:
                shape = {**reduce_uniforms(L), "u_c0": c0, "u_ldc": ldc}
                reduce_step = (uniforms(reducer, (("u_first", p == 0), *shape.items())),
                               [reducer.get(name, None) for name in ("u_alpha", "u_beta")])
            passes.append((uniforms(prog, (("u_k0", k0), ("u_kend", k1), ("u_first", p == 0))), reduce_step))
        reduce_grid = reduce_groups(L) + (1,) if reducer is not None else None
        views, view_bufs = self._region_views, self._region_bufs

        def view_over(name: str, buf) -> int:
            """The buffer texture over `buf` (kept while the operand stays in that buffer)."""
            view = views.get(name)
            if view is not None and view_bufs.get(name) is buf:
                return view
            if view is not None:
                glraw.delete_texture(view)
                del views[name]
            view_bufs.pop(name, None)
            view = glraw.buffer_texture(ctx, buf.glo, vec)
            if view is None:
                raise RunError("the driver could not make a buffer texture over a GL array")
            views[name], view_bufs[name] = view, buf
            return view

        def go(a_buf, b_buf, c_buf, alpha: float, beta: float) -> bool:
            for name, _ in textures:         # a view kept over this very buffer showed all of it
                buf = a_buf if name == "A" else b_buf
                if view_bufs.get(name) is not buf and not self._texture_shows(buf, vec):
                    return False
            # the kernel's state as run_regions leaves it (what a later execute() runs on)
            self._places = {"A": (a_buf, a0, lda), "B": (b_buf, b0, ldb), "C": (c_buf, c0, ldc)}
            self._alpha, self._beta = alpha, beta
            old = hold_sigint()        # a dispatch may JIT-compile (uninterrupted.py)
            try:
                try:
                    a_buf.bind_to_storage_buffer(_BIND_A)
                    b_buf.bind_to_storage_buffer(_BIND_B)
                    c_buf.bind_to_storage_buffer(_BIND_C)
                    if w_buf is not None:
                        w_buf.bind_to_storage_buffer(_BIND_W)
                    for name, unit in textures:
                        glraw.bind_texture_unit(unit, view_over(name, a_buf if name == "A" else b_buf))
                    set_uniforms(fixed)
                    if u_alpha is not None:
                        set_uniform(u_alpha, alpha)
                    if u_beta is not None:
                        set_uniform(u_beta, beta)
                    for pass_uniforms, reduce_step in passes:
                        set_uniforms(pass_uniforms)
                        prog.run(*groups)
                        barrier(ssbo)
                        if reduce_step is not None:
                            r_alpha, r_beta = reduce_step[1]
                            set_uniforms(reduce_step[0])
                            if r_alpha is not None:
                                set_uniform(r_alpha, alpha)
                            if r_beta is not None:
                                set_uniform(r_beta, beta)
                            reducer.run(*reduce_grid)
                            barrier(ssbo)
                    barrier()          # read-back, clears and the next uploads see every store
                except (RunError, TooSlow):
                    raise
                except Exception as e:
                    raise RunError(f"GL execution failed: {e}") from None
                err = ctx.error
            finally:
                restore_sigmask(old)
            if err != "GL_NO_ERROR":
                raise RunError(f"GL error after execution: {err}")
            if flush is not None:
                flush()                # the GPU starts now, while the caller goes on
            return True
        return go

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
        places = self._places or self._own_places()
        for name, binding in (("A", _BIND_A), ("B", _BIND_B), ("C", _BIND_C)):
            places[name][0].bind_to_storage_buffer(binding)
        if self.w_buf is not None:
            self.w_buf.bind_to_storage_buffer(_BIND_W)
        views = self._region_views if self._places is not None else self._views
        for name, unit in (("A", _UNIT_A), ("B", _UNIT_B)):
            view = views.get(name, self._views.get(name))
            if view is not None:
                glraw.bind_texture_unit(unit, view)
        (_, a0, lda), (_, b0, ldb), (_, c0, ldc) = places["A"], places["B"], places["C"]
        for name, value in (("u_a0", a0), ("u_lda", lda), ("u_b0", b0), ("u_ldb", ldb),
                            ("u_c0", c0), ("u_ldc", ldc)):
            self._set(name, value)
        self._set("u_alpha", self._alpha)
        self._set("u_beta", self._beta)
        self._set("u_sa", self._strides[0])
        self._set("u_sb", self._strides[1])
        self._set("u_ty0", r0)
        for name, value in (("M", L.M), ("N", L.N), ("K", L.K), ("u_ksplit", L.ksplit)):
            self._set(name, value)
        for p in range(start, stop):
            k0, k1 = L.pass_range(p)
            if p == 0 and self.scaler is not None:
                self._beta_c()
            self._set("u_k0", k0)
            self._set("u_kend", k1)
            self._set("u_first", p == 0)
            self.program.run(L.tiles_n, r1 - r0, L.batch * L.ks)
            self.ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)
            if self.reducer is not None:
                for name, value in (("u_alpha", self._alpha), ("u_beta", self._beta), ("u_first", p == 0),
                                    *reduce_uniforms(L).items(), ("u_c0", c0), ("u_ldc", ldc)):
                    self._set(name, value, self.reducer)
                self.reducer.run(*reduce_groups(L), 1)
                self.ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)
        self.ctx.memory_barrier()       # read-back, clears and the next uploads see every store
        return 0

    def _own_places(self) -> dict:
        """The kernel's own buffers as places (see _places): the stored rows' natural strides."""
        L = self.layout
        return {"A": (self.tex_a, 0, L.a_contiguous // L.vec), "B": (self.tex_b, 0, L.b_contiguous // L.vec),
                "C": (self.c_buf, 0, L.N // L.c_vec)}

    def _beta_c(self) -> None:
        """C = beta * C before splits add into it with atomics (kred = 1): zeros written on
        the GPU where beta is 0 (C may hold NaN poison), else a scale dispatch."""
        import moderngl
        if self._beta == 0.0:
            if self._gpu_fill is None:
                self._gpu_fill = glraw.usable(self.ctx)
            if not (self._gpu_fill and glraw.fill_buffer(self.ctx, self.c_buf.glo, 0.0)):
                self.c_buf.write(np.zeros(self.layout.c_floats, np.float32))
            return
        for name, value in (("u_beta", self._beta), *scale_uniforms(self.layout).items()):
            self._set(name, value, self.scaler)
        self.scaler.run(*scale_groups(self.layout), 1)
        self.ctx.memory_barrier(moderngl.SHADER_STORAGE_BARRIER_BIT)

    def read(self, which: int, out: np.ndarray | None = None) -> np.ndarray:
        """C into `out` (a writeable C-contiguous float32 array of out_shape): one read-back."""
        out = output_array(out, *self.out_shape)
        self.transfers.read_buffer(self.c_buf, out)
        return out


def _vectors_of(stored, vec: int):
    """(first vector, row stride in vectors) of a region stored row-major with its offset
    and leading dimension whole vectors of `vec` floats (a kernel reads or writes it where
    it lies), else None."""
    lay = stored.layout()
    if lay is None or lay[0] != "N" or stored.offset % vec or lay[1] % vec:
        return None
    return stored.offset // vec, lay[1] // vec
