"""The base kernel: the lifecycle every GL kernel path shares, nobody's path.

A kernel is one compiled program and the GL objects of one problem shape.  Its
lifecycle is the same on every path: compile, make what draws or dispatches it,
take its textures and buffers (from the texture pool when there is one), point
the program at them, warm up (a driver that compiles at the first draw does it
inside compile_ms), then per run: load the operands (skipping an upload the
operand cache says is on the GPU already), poison the output (an element no pass
wrote cannot pass verification), execute the passes, read C back and check GL's
error flag; checked_run times the passes (and abandons a run whose first part
projects past a limit); release gives textures back to the pool and deletes the
rest.  A path (mrt/, image/, asm/, compute/) fills in the abstract hooks: its
program, objects, uploads, poisoning, passes and read-back.
"""
from __future__ import annotations

import abc
import time as _time

import numpy as np

from ...core.config import Config
from ...errors import BuildError, RunError, TooSlow
from ...core.problem import Problem
from ..base import Kernel
from .platform.objects import parking_framebuffer
from .platform.pool import make_object
from .platform.timing import ensure_clock, timed
from .platform.transfer import Transfers
from .platform.uninterrupted import uninterrupted
from .platform.uniforms import set_uniform


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


def kernel_operands(problem: Problem, layout, A, B, C=None, beta: float = 0.0):
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


class BaseGLKernel(Kernel):
    """One compiled program + the GL objects of one problem shape (the module
    docstring); a path's kernel implements the abstract hooks."""

    def __init__(self, ctx, problem: Problem, config: Config, layout, source: str,
                 pool=None, transfers=None):
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
        self.released = False         # release() ran: nothing may run it again (express.py asks)
        t0 = _time.perf_counter()
        self.program = self._compile(source)
        self.program_s = _time.perf_counter() - t0   # the program's compile (or its wait)
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

    @abc.abstractmethod
    def _compile(self, source: str):
        """The program of `source` (BuildError with the driver's message where it fails)."""

    def _own(self, program) -> None:
        """The kernel releases `program` with its other resources (a kernel whose programs
        are shared keeps them apart)."""
        self._resources.append(program)

    def _make_pipeline(self) -> None:
        """What draws or dispatches the program besides it (nothing by default)."""

    def _setup(self) -> None:
        """Point the program at its objects (nothing by default)."""

    @abc.abstractmethod
    def _warm_up(self) -> None:
        """Run a sliver of the work once, so that a driver that compiles at the first
        draw or dispatch does it inside compile_ms, not in the first timed run."""

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

    @abc.abstractmethod
    def _make_textures(self) -> None:
        """Take the textures and buffers of the layout (with _take) and make the rest."""

    def release(self) -> None:
        self.released = True
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
    @abc.abstractmethod
    def load(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0, cache=None) -> None:
        """Upload op(A), op(B) and C (only when beta != 0); `cache` (a dict-like, e.g.
        search.operands.OperandCache) names A and B across the kernels of one search:
        an operand already on the GPU is not uploaded again (_upload)."""

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

    @abc.abstractmethod
    def poison(self) -> None:
        """Fill the output with NaN: an element no pass writes cannot pass verification."""

    # --- execution ------------------------------------------------------
    def _set(self, name, value, program=None):
        """Set a uniform of the program (or of `program`) where it has one (a compiler
        drops the uniforms a shader does not read)."""
        prog = self.program if program is None else program
        u = prog.get(name, None)          # a dict lookup ('name in prog' walks every member)
        if u is not None:
            set_uniform(u, value)

    def execute(self, start: int = 0, stop: int | None = None, src: int = 0, rows=None) -> int:
        """Run passes start..stop-1 (all by default) reading partial sums from set `src`
        (where a path keeps two), over the rows `rows` = (r0, r1) of the work a pass
        covers (fragment rows, tile rows; all by default); returns where the result is."""
        if not self._loaded:
            raise RunError("no inputs loaded: call run() or load() first")
        with uninterrupted():        # a draw or dispatch may JIT-compile (llvmpipe's variants)
            return self._execute(start, stop, src, rows)

    @abc.abstractmethod
    def _execute(self, start: int, stop: int | None, src: int, rows) -> int:
        """execute() once the inputs are loaded."""

    @abc.abstractmethod
    def read(self, which: int, out: np.ndarray | None = None) -> np.ndarray:
        """C from result set `which` into `out` when given (see output_array)."""

    @property
    def passes(self) -> int:
        return self.layout.passes

    @property
    def out_shape(self) -> tuple:
        """The shape of the result run() returns: the problem's (a batch leading)."""
        return self.problem.out_shape

    def run(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0,
            out: np.ndarray | None = None) -> np.ndarray:
        """C = alpha * op(A) @ op(B) + beta * C, into `out` when given (a writeable
        C-contiguous float32 (M, N) array; it may be C itself)."""
        out = output_array(out, *self.out_shape)
        self.load(A, B, C, alpha=alpha, beta=beta)
        self.poison()
        return self._finish_run(self._guarded(self.execute), out)

    def run_regions(self, a, b, out, *, alpha: float = 1.0, beta: float = 0.0) -> None:
        """out <- alpha * a @ b + beta * out, all on the GPU: operands and C that live in GL
        buffers (GL arrays; platform/regions.Region).  `a` is op(A) (M x K) and `b` op(B)
        (K x N) as they are read (a transposed operand is a region with its strides
        swapped: the problem's trans flags say which the kernel reads in place); `out`
        (M x N) is also the C added where beta != 0, and must share no element with a or
        b.  A path reads the regions where its layout allows and copies them on the GPU
        where not (_load_regions); the result goes into `out` (_store_region).  Nothing is
        poisoned (the caller's out is not the kernel's to fill) and nothing waits for the
        GPU: the next command that needs the result (a read-back) does."""
        L = self.layout
        shapes = ((a.rows, a.cols), (b.rows, b.cols), (out.rows, out.cols))
        if shapes != ((L.M, L.K), (L.K, L.N), (L.M, L.N)):
            raise ValueError(f"kernel built for {L.M}x{L.K} @ {L.K}x{L.N} -> {L.M}x{L.N}, got regions "
                             f"{shapes[0]} @ {shapes[1]} -> {shapes[2]}")
        self._guarded(lambda: self._load_regions(a, b, out if beta != 0.0 else None, float(alpha), float(beta)))
        self._loaded = True
        which = self._guarded(self.execute)
        self._guarded(lambda: self._store_region(which, out))
        err = self.ctx.error
        if err != "GL_NO_ERROR":
            raise RunError(f"GL error after execution: {err}")

    def _load_regions(self, a, b, c, alpha: float, beta: float) -> None:
        """Make the regions the kernel's operands (and C, where c is given: beta != 0):
        bind them where they lie, or copy (pack) them on the GPU into the path's layout."""
        raise NotImplementedError(f"{type(self).__name__} does not run on GL arrays")

    def _store_region(self, which: int, out) -> None:
        """The result (set `which`) into region `out`, on the GPU (nothing where the
        kernel wrote it there itself)."""
        raise NotImplementedError(f"{type(self).__name__} does not run on GL arrays")

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
