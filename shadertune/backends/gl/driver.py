"""The ping-pong multi-pass driver: textures, framebuffers and timed passes.

passes = ceil(K / np); each pass adds np k-values to the partial sums.
Partial sums ping-pong between two textures per render target, so a pass
never reads the texture it writes.  The last pass applies alpha and adds
beta * C.
"""
from __future__ import annotations

import contextlib
import time as _time

import numpy as np

from ...config import Config
from ...errors import BuildError, RunError, TooSlow
from ...problem import Problem
from ...templates import read
from ..base import Kernel
from .context import make_current, state_of
from .layout import Layout
from .pool import make_object, nearest_texture
from .timing import ensure_clock, timed
from .uninterrupted import uninterrupted

_FLOAT = "f4"


def parking_framebuffer(ctx):
    """A 1x1 framebuffer that lives as long as the context, with ctx made current: its
    callers bind it to release objects of ctx next, and a thread may hold several contexts."""
    st = state_of(ctx)
    make_current(ctx)
    if st.parking is None:
        st.parking = ctx.framebuffer(color_attachments=[ctx.texture((1, 1), 4, dtype=_FLOAT)])
    return st.parking


def clear_writes_nan(ctx) -> bool:
    """Whether clearing a float framebuffer to NaN stores NaN (checked once per context):
    poisoning by a clear costs no upload."""
    st = state_of(ctx)
    ok = st.clears_nan
    if ok is None:
        tex = ctx.texture((2, 2), 4, dtype=_FLOAT)
        fbo = ctx.framebuffer(color_attachments=[tex])
        try:
            fbo.clear(*(float("nan"),) * 4)
            ok = bool(np.isnan(np.frombuffer(tex.read(), np.float32)).all())
        finally:
            parking_framebuffer(ctx).use()
            fbo.release()
            tex.release()
        st.clears_nan = ok
    return ok


def _packed(cache, key, make):
    """The bytes of make() (a packed array; no copy), kept in `cache` under `key`
    when there is a cache (which counts len() as bytes)."""
    if cache is None:
        return make()
    data = cache.get(key)
    if data is None:
        data = memoryview(np.ascontiguousarray(make())).cast("B")
        cache[key] = data
    return data


def placeholder_texture(ctx):
    """A 1x1 texture, set up like every operand texture, for a sampler the shader
    does not read (C when beta == 0); it lives as long as the context."""
    st = state_of(ctx)
    if st.placeholder is None:
        st.placeholder = nearest_texture(ctx, (1, 1))
    return st.placeholder


def output_array(out, *shape: int) -> np.ndarray:
    """`out` if it can take the result as it is (float32, C-contiguous, of `shape`,
    e.g. (M, N), writeable), else a ValueError that says what is wrong; a new array
    for None."""
    if out is None:
        return np.empty(shape, np.float32)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out must be a numpy array, got {type(out).__name__}")
    if out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise ValueError(f"out must be a writeable C-contiguous float32 array of shape {shape}, "
                         f"got {out.dtype} {out.shape}"
                         f"{'' if out.flags.c_contiguous else ', not C-contiguous'}"
                         f"{'' if out.flags.writeable else ', read-only'}")
    return out


def kernel_operands(problem: Problem, layout: Layout, A, B, C=None, beta: float = 0.0):
    """float32 op(A) (M, K), op(B) (K, N) from their stored layouts, checked against the
    layout; C (M, N) only when beta != 0 (it is not read otherwise)."""
    A = np.asarray(A, np.float32)
    B = np.asarray(B, np.float32)
    A = A.T if problem.trans_a else A
    B = B.T if problem.trans_b else B
    L = layout
    if A.shape != (L.M, L.K) or B.shape != (L.K, L.N):
        raise ValueError(f"kernel built for {L.M}x{L.K} @ {L.K}x{L.N}, got A{A.shape} @ B{B.shape}")
    if beta == 0.0:
        return A, B, None
    if C is None or np.shape(C) != (L.M, L.N):
        raise ValueError(f"beta != 0 needs C of shape {(L.M, L.N)}")
    return A, B, np.asarray(C, np.float32)


class GLKernel(Kernel):
    """One compiled program + the textures of one problem shape."""

    def __init__(self, ctx, problem: Problem, config: Config, layout: Layout, source: str,
                 pool=None, transfers=None):
        from .transfer import Transfers
        self.ctx = ctx
        self.pool = pool              # a TexturePool: textures come from it and go back to it
        # how operands go up and C comes back (the backend's; a kernel made without one
        # uses the driver's own calls and releases nothing it did not make)
        self._own_transfers = transfers is None
        self.transfers = transfers if transfers is not None else Transfers(ctx, mode="direct")
        self._textures: dict = {}     # id(tex) -> (tex, size) for the ones this kernel holds
        self._tags = {"A": None, "B": None}   # what tex_a / tex_b hold (an operand-cache tag)
        self.uploads_skipped = 0      # loads whose operand was on the GPU already
        self.tex_c = None
        self.problem = problem
        self.config = config
        self.layout = layout
        self.source = source
        self._resources: list = []
        self._loaded = False
        self._beta = 0.0
        self._alpha = 1.0
        self.timing_source = None     # 'query' (GL timer) or 'wall' (finish-to-finish)
        t0 = _time.perf_counter()
        self.program = self._compile(source)
        self._own(self.program)
        try:
            self._make_pipeline()
            self._make_textures()
            self._setup()
            self._warm_up()
            self.ctx.finish()          # compile_ms covers the driver's share of the work
        except (BuildError, RunError):
            self.release()
            raise
        except Exception as e:
            self.release()
            raise RunError(f"could not set up GL resources: {e}") from None
        self.compile_ms = (_time.perf_counter() - t0) * 1e3

    def _compile(self, source: str):
        try:
            with uninterrupted():    # Ctrl-C inside the driver's compile crashed it
                return self.ctx.program(vertex_shader=read("gl/fullscreen.vert"), fragment_shader=source)
        except Exception as e:  # moderngl raises a plain Exception with the compiler log
            raise BuildError(f"GLSL compile/link failed: {str(e).strip()[:2000]}", source) from None

    def _own(self, program) -> None:
        """The kernel releases `program` with its other resources (a kernel whose programs
        are shared keeps them apart)."""
        self._resources.append(program)

    def _make_pipeline(self) -> None:
        """What draws the program: a vertex array of no attributes (the fullscreen
        triangle's vertices come from gl_VertexID)."""
        self.vao = self.ctx.vertex_array(self.program, [])
        self._resources.append(self.vao)

    def _setup(self) -> None:
        """Point the program's samplers at their texture units."""
        for name, unit in self._units.items():
            if name in self.program:
                self.program[name].value = unit

    def _warm_up(self) -> None:
        """One pass over one fragment: a driver that compiles at the first draw
        (llvmpipe's JIT, for one) does it here, inside compile_ms, and not in the
        first run, which the evaluator times."""
        fbo = self.fbos[1]
        full = fbo.viewport
        loaded, self._loaded = self._loaded, True
        try:
            fbo.viewport = (0, 0, 1, 1)
            self.execute(0, 1)
        finally:
            self._loaded = loaded
            fbo.viewport = full

    # --- resources ------------------------------------------------------
    def _take(self, size):
        """(texture, the tag of what it holds) of this size: from the pool if any."""
        size = tuple(size)
        if self.pool is not None:
            tex, tag = self.pool.acquire(size)
        else:
            tex, tag = make_object(self.ctx, size), None
        self._textures[id(tex)] = (tex, size)
        return tex, tag

    def _give(self, tex, tag=None) -> None:
        _, size = self._textures.pop(id(tex))
        if self.pool is not None:
            self.pool.give_back(tex, size, tag)
        else:
            tex.release()

    def _make_textures(self):
        L = self.layout
        self.tex_a, self._tags["A"] = self._take(L.a_size)
        self.tex_b, self._tags["B"] = self._take(L.b_size)
        # Two texture sets (ping, pong), one texture per render target each.
        self.partials = [[self._take(L.c_size)[0] for _ in range(L.targets)] for _ in range(2)]
        self.fbos = []
        for texs in self.partials:
            fbo = self.ctx.framebuffer(color_attachments=texs)
            self._resources.append(fbo)
            self.fbos.append(fbo)
        units = {"A": 0, "B": 1, "Cin": 2}
        units.update({f"P{t}": 3 + t for t in range(L.targets)})
        self._units = units

    def release(self) -> None:
        if self._resources or self._textures:
            # moderngl re-binds the last used framebuffer when it makes the next
            # one; park on a framebuffer that outlives every kernel first.
            parking_framebuffer(self.ctx).use()
        for r in reversed(self._resources):
            try:
                r.release()
            except Exception:
                pass
        self._resources.clear()
        tags = {id(getattr(self, "tex_a", None)): self._tags["A"],
                id(getattr(self, "tex_b", None)): self._tags["B"]}
        for tex, _ in list(self._textures.values()):
            try:
                self._give(tex, tags.get(id(tex)))
            except Exception:
                pass
        self._textures.clear()
        self.tex_c = None
        if self._own_transfers:
            self.transfers.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    # --- uploads --------------------------------------------------------
    def load(self, A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *,
             alpha: float = 1.0, beta: float = 0.0, cache=None) -> None:
        """Upload op(A) (M, K), op(B) (K, N) and C (M, N, only when beta != 0).

        `cache` (a dict-like, e.g. search.operands.OperandCache) keeps packed A and B
        across kernels whose layouts pack them alike; the caller promises that A and B
        are the same, unchanged arrays at every call with that cache."""
        L = self.layout
        A, B, C = kernel_operands(self.problem, L, A, B, C, beta)

        def packed(which, key, pack):
            return lambda tex: tex.write(_packed(cache, (which,) + key, pack))

        def row_major(which, X, rows, cols):
            # X as it is into the texture's top-left corner, zeros around it
            return lambda tex: self._write_corner(tex, np.ascontiguousarray(X), rows, cols, which)
        self.tex_a = self._upload("A", self.tex_a, L.a_pack_key,
                                  row_major("A", A, L.M, L.K) if L.a_row_major else
                                  packed("A", L.a_pack_key, lambda: L.pack_a(A)), cache)
        self.tex_b = self._upload("B", self.tex_b, L.b_pack_key,
                                  row_major("B", B, L.K, L.N) if L.b_row_major else
                                  packed("B", L.b_pack_key, lambda: L.pack_b(B)), cache)
        if C is not None:
            if self.tex_c is None:
                self.tex_c, _ = self._take(L.cfull_size)
            self.tex_c.write(L.pack_c(C))
        self._alpha, self._beta = float(alpha), float(beta)
        self._loaded = True

    def _write_corner(self, tex, X: np.ndarray, rows: int, cols: int, slot: str) -> None:
        """tex <- X (rows x cols floats, 4 a texel) at texel (0, 0), the rest zero."""
        w, h = self._textures[id(tex)][1]
        cw = cols // 4
        self.transfers.write_texture(tex, X, viewport=(0, 0, cw, rows), slot=slot)
        if cw < w:
            tex.write(np.zeros((rows, w - cw, 4), np.float32), viewport=(cw, 0, w - cw, rows))
        if rows < h:
            tex.write(np.zeros((h - rows, w, 4), np.float32), viewport=(0, rows, w, h - rows))

    def _upload(self, which: str, tex, key, write, cache):
        """The object (texture or buffer) holding operand `which`: this kernel's, written
        by write(obj) (or left as it is when it already holds it), or a pooled one that
        holds it already.  `key` says what the object holds besides the inputs (their
        packing); `cache` names the inputs (see load())."""
        tag = None if cache is None else (which, cache.token) + key
        if tag is not None and self._tags[which] == tag:
            self.uploads_skipped += 1
            return tex
        if tag is not None and self.pool is not None:
            size = self._textures[id(tex)][1]
            other = self.pool.take_holding(size, tag)
            if other is not None:
                self._textures[id(other)] = (other, size)
                self._give(tex, self._tags[which])
                self._tags[which] = tag
                self.uploads_skipped += 1
                return other
        self._tags[which] = None            # a failed write leaves it unknown
        write(tex)
        self._tags[which] = tag
        return tex

    def poison(self) -> None:
        """Fill every partial-sum texture with NaN: an unwritten element cannot pass."""
        if clear_writes_nan(self.ctx):
            for fbo in self.fbos:
                fbo.clear(*(float("nan"),) * 4)
            return
        w, h = self.layout.c_size
        nan = np.full((h, w, 4), np.nan, np.float32).tobytes()
        for texs in self.partials:
            for t in texs:
                t.write(nan)

    # --- execution ------------------------------------------------------
    def _set(self, name, value):
        if name in self.program:
            self.program[name].value = value

    @contextlib.contextmanager
    def _rows(self, fbos, rows):
        """Draws into `fbos` cover fragment rows [r0, r1) of their viewports only (all
        for None): gl_FragCoord stays the window position, so a pass split into row
        bands computes what the whole pass does."""
        if rows is None:
            yield
            return
        full = [fbo.viewport for fbo in fbos]
        try:
            for fbo, (x, y, w, _) in zip(fbos, full):
                fbo.viewport = (x, y + rows[0], w, rows[1] - rows[0])
            yield
        finally:
            for fbo, vp in zip(fbos, full):
                fbo.viewport = vp

    def execute(self, start: int = 0, stop: int | None = None, src: int = 0, rows=None) -> int:
        """Run passes start..stop-1 (all by default) reading partial sums from texture
        set `src`, over fragment rows `rows` = (r0, r1) (all by default); returns the
        index of the texture set holding the result."""
        if not self._loaded:
            raise RunError("no inputs loaded: call run() or load() first")
        with self._rows(self._draw_targets(), rows):
            return self._execute(start, stop, src)

    def _draw_targets(self) -> list:
        """The framebuffers the passes draw into."""
        return self.fbos

    def _execute(self, start: int, stop: int | None, src: int) -> int:
        L = self.layout
        stop = L.passes if stop is None else stop
        self.tex_a.use(0)
        self.tex_b.use(1)
        (self.tex_c or placeholder_texture(self.ctx)).use(2)   # read only when beta != 0
        self._set("u_alpha", self._alpha)
        self._set("u_hc", L.hc)
        self._set("u_wc", L.wc)
        self._set("u_beta", self._beta)
        for p in range(start, stop):
            dst = 1 - src
            for t, tex in enumerate(self.partials[src]):
                tex.use(3 + t)
            self._set("u_k0", p * L.steps)
            self._set("u_steps", L.steps)
            self._set("u_first", p == 0)
            self._set("u_last", p == L.passes - 1)
            self.fbos[dst].use()
            self.vao.render(vertices=3)
            src = dst
        return src

    def read(self, which: int, out: np.ndarray | None = None) -> np.ndarray:
        """C from texture set `which`, into `out` when given (see output_array)."""
        L = self.layout
        out = output_array(out, L.M, L.N)
        w, h = L.c_size
        arrs = [np.empty((h, w, 4), np.float32) for _ in self.partials[which]]
        for t, arr in zip(self.partials[which], arrs):
            self.transfers.read_texture(t, arr)
        if not L.c_row_major:
            np.copyto(out, L.unpack_c(arrs))
            return out
        # 1x4: target (i, j) holds rows i*hc.. and columns 4*j*wc.. of C as they are
        for t, arr in enumerate(arrs):
            i, j = divmod(t, L.mrt_w)
            r0, c0 = i * h, 4 * j * w
            r, c = min(h, L.M - r0), min(4 * w, L.N - c0)
            if r > 0 and c > 0:
                out[r0:r0 + r, c0:c0 + c] = arr.reshape(h, 4 * w)[:r, :c]
        return out

    @property
    def passes(self) -> int:
        return self.layout.passes

    @property
    def out_shape(self) -> tuple:
        """The shape of the result run() returns."""
        return self.layout.M, self.layout.N

    def run(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0,
            out: np.ndarray | None = None) -> np.ndarray:
        """C = alpha * op(A) @ op(B) + beta * C, into `out` when given (a writeable
        C-contiguous float32 (M, N) array; it may be C itself)."""
        out = output_array(out, *self.out_shape)
        self.load(A, B, C, alpha=alpha, beta=beta)
        self.poison()
        return self._finish_run(self._guarded(self.execute), out)

    def checked_run(self, A, B, *, limit_ms: float | None = None,
                    cache=None) -> tuple[np.ndarray, float]:
        """run() for the evaluator: (C, milliseconds of its passes, timed like time()).

        With `limit_ms`, the first eighth of the work is timed on its own and the run
        abandoned (TooSlow) when it projects a total over limit_ms: a slow corner of
        the space then costs a fraction of one run.  The first eighth is the first
        eighth of the passes, or of a single pass's fragment rows (a one-pass config
        is no cheaper to abandon otherwise).  `cache` as in load()."""
        self.load(A, B, cache=cache)
        self.poison()
        ensure_clock(self.ctx)
        q = self.ctx.query(time=True)
        passes, height = self.passes, self.layout.hc
        holder = [0]                  # what execute() returns: where the sums are

        def run(start, stop, rows=None):
            src = 0 if rows is not None else holder[0]    # row bands of pass 0 all read set 0
            holder[0] = self.execute(start, stop, src, rows)

        def timed_run(*piece):
            return self._guarded(lambda: timed(self.ctx, q, lambda: run(*piece)))
        if limit_ms is None or (passes == 1 and (height < 8 or not self.bands_add_up)):
            ms, self.timing_source = timed_run(0, passes)
            return self._finish_run(holder[0]), ms
        if passes > 1:
            first = max(1, passes // 8)
            pieces, done, what = [(0, first), (first, passes)], first / passes, f"{first} of {passes} passes"
        else:
            band = height // 8
            pieces = [(0, 1, (0, band)), (0, 1, (band, height))]
            done, what = band / height, f"{band} of {height} fragment rows of its one pass"
        ms, self.timing_source = timed_run(*pieces[0])
        projected = ms / done
        if projected > limit_ms:
            raise TooSlow(f"abandoned after {what}: projected {projected:.4g} ms > limit {limit_ms:.4g} ms",
                          projected)
        rest, _ = timed_run(*pieces[1])
        return self._finish_run(holder[0]), ms + rest

    # whether a pass run as bands of rows computes what the whole pass does (see _rows)
    bands_add_up = True

    def _guarded(self, fn):
        try:
            return fn()
        except (RunError, TooSlow):
            raise
        except Exception as e:
            raise RunError(f"GL execution failed: {e}") from None

    def _finish_run(self, which: int, out: np.ndarray | None = None) -> np.ndarray:
        out = self._guarded(lambda: self.read(which, out))
        err = self.ctx.error
        if err != "GL_NO_ERROR":
            raise RunError(f"GL error after execution: {err}")
        return out

    def time(self, repeats: int = 10, warmup: int = 2) -> list[float]:
        """Milliseconds per full multiply (all passes), GL timer queries, warm-up excluded."""
        if repeats < 1:
            raise ValueError("repeats must be >= 1")
        ensure_clock(self.ctx)
        for _ in range(max(0, warmup)):
            self.execute()
        out = []
        q = self.ctx.query(time=True)
        for _ in range(repeats):
            ms, self.timing_source = timed(self.ctx, q, self.execute)
            out.append(ms)
        return out
