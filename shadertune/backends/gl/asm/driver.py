"""The assembly kernels' driver: ARBfp / NVfp programs on the render-target path.

An assembly kernel draws the render-target path (mrt/targets.py: the same
layout, pooled textures, ping-pong framebuffers, uploads, poisoning and read-back)
with the base kernel's lifecycle (kernel.py: transfers, checked runs, row bands,
timer queries), and its program is an ARB_fragment_program or NV_gpu_program4
object instead of a GLSL one.  Only the program and the draw differ.  Assembly programs
shade only in a compatibility-profile context (platform/context.py makes one where the
driver offers it) and only where no GLSL program is in use, so a pass is the
classic fixed-function draw: glUseProgram(0), GL_FRAGMENT_PROGRAM_ARB enabled,
the program bound, glRectf over the viewport.  (A vertex-only GLSL program
beside the assembly fragment program drew one fragment on Mesa llvmpipe;
notes/gl.md.)  Programs have no uniforms: a pass's parameters go to
program.local (codegen.pass_parameters); the first pass reads a 1 x 1 zero
texture in place of the partial sums, and every pass but a last one with beta
!= 0 reads it in place of C.

A program the driver rejects (syntax, limits) raises BuildError with the
driver's message (GL_PROGRAM_ERROR_STRING_ARB) and where it stopped (line and
column from GL_PROGRAM_ERROR_POSITION_ARB), and so does one over the
driver's native limits (GL_PROGRAM_UNDER_NATIVE_LIMITS_ARB false): the
evaluator records it as compile_failed.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ....errors import BuildError
from ..fragment import row_bands
from ..kernel import BaseGLKernel
from ..mrt.targets import RenderTargets
from ..platform import glraw
from ..platform.egl_compat import is_compatibility_profile
from ..platform.uninterrupted import uninterrupted
from .codegen import ProgramCounts, pass_parameters

FRAGMENT_PROGRAM_ARB = 0x8804
PROGRAM_FORMAT_ASCII_ARB = 0x8875
PROGRAM_ERROR_POSITION_ARB = 0x864B
PROGRAM_ERROR_STRING_ARB = 0x8874
PROGRAM_UNDER_NATIVE_LIMITS_ARB = 0x88B6
# (count of a program, its native count, the limit, the native limit) per ProgramCounts field
_QUERIES = {
    "instructions": (0x88A0, 0x88A2, 0x88A1, 0x88A3),
    "alu": (0x8805, 0x8808, 0x880B, 0x880E),
    "tex": (0x8806, 0x8809, 0x880C, 0x880F),
    "indirections": (0x8807, 0x880A, 0x880D, 0x8810),
    "temporaries": (0x88A4, 0x88A6, 0x88A5, 0x88A7),
    "parameters": (0x88A8, 0x88AA, 0x88A9, 0x88AB),
}
# what NVfp programs are bounded by (NV_fragment_program4 has no separate ALU, texture
# or indirection limits)
_NVFP_LIMITS = ("instructions", "temporaries", "parameters")
_UNIT_A, _UNIT_B, _UNIT_CIN, _UNIT_P0 = 0, 1, 2, 3


def _fn(name: str):
    fn = glraw.function(name)
    if fn is None:
        raise BuildError(f"the GL driver has no {name}: assembly programs cannot run here", "")
    return fn


def _program_iv(pname: int) -> int:
    v = ctypes.c_int(-1)
    _fn("glGetProgramivARB")(FRAGMENT_PROGRAM_ARB, pname, ctypes.byref(v))
    return int(v.value)


def available_langs(ctx) -> tuple[str, ...]:
    """The assembly languages that shade in context `ctx`: a compatibility-profile
    context (NVIDIA takes assembly programs in a core one but never runs them; Mesa
    lists ARB_fragment_program in its compatibility profile only) with the extension."""
    if not is_compatibility_profile(ctx) or not glraw.usable(ctx):
        return ()
    exts = set(ctx.extensions)
    langs = []
    if "GL_ARB_fragment_program" in exts and (ctx.version_code >= 200 or "GL_ARB_draw_buffers" in exts):
        langs.append("arbfp")
    if "GL_NV_gpu_program4" in exts:
        langs.append("nvfp")
    return tuple(langs)


def assembly_limits(ctx) -> dict:
    """{lang: {count: limit}} for the assembly languages that shade in `ctx`, read from
    the driver (glGetProgramivARB of GL_FRAGMENT_PROGRAM_ARB): the smaller of each
    limit and its native limit, as ProgramCounts names them ({} where none shades)."""
    langs = available_langs(ctx)
    if not langs:
        return {}
    read = {}
    for name, (_, _, limit, native) in _QUERIES.items():
        got = [v for v in (_program_iv(limit), _program_iv(native)) if v > 0]
        if got:
            read[name] = min(got)
    glraw._clear_errors(ctx)                     # a limit the driver does not know
    return {lang: {k: v for k, v in read.items() if lang == "arbfp" or k in _NVFP_LIMITS} for lang in langs}


class AsmProgram:
    """An assembly program object; release() deletes it (ctx current)."""

    def __init__(self, ctx, lang: str, source: str):
        self.lang = lang
        ids = ctypes.c_uint(0)
        glraw._clear_errors(ctx)                 # errors left by others are not this program's
        _fn("glGenProgramsARB")(1, ctypes.byref(ids))
        self.id = int(ids.value)
        _fn("glBindProgramARB")(FRAGMENT_PROGRAM_ARB, self.id)
        text = source.encode()
        with uninterrupted():        # Ctrl-C inside the driver's compile crashed it
            _fn("glProgramStringARB")(FRAGMENT_PROGRAM_ARB, PROGRAM_FORMAT_ASCII_ARB, len(text), text)
        error = ctx.error
        pos = ctypes.c_int(-1)
        _fn("glGetIntegerv")(PROGRAM_ERROR_POSITION_ARB, ctypes.byref(pos))
        if error != "GL_NO_ERROR" or pos.value != -1:
            message = (_fn("glGetString")(PROGRAM_ERROR_STRING_ARB) or b"").decode(errors="replace").strip()
            where = ""
            if 0 <= pos.value <= len(text):
                before = text[:pos.value]
                line, column = before.count(b"\n") + 1, pos.value - before.rfind(b"\n")
                where = f" at line {line}, column {column}"
            self.release()
            glraw._clear_errors(ctx)
            raise BuildError(f"the driver rejected the {lang} program{where} ({error}): "
                             f"{message or 'no message'}", source)
        self.counts = self._counts(native=False)
        self.native_counts = self._counts(native=True)
        if not _program_iv(PROGRAM_UNDER_NATIVE_LIMITS_ARB):
            limits = {name: _program_iv(q[3]) for name, q in _QUERIES.items()}
            over = self.native_counts.over(limits) or ["(the driver names none)"]
            self.release()
            raise BuildError(f"the {lang} program is over the driver's native limits: "
                             f"{', '.join(over)}", source)

    def _counts(self, native: bool) -> ProgramCounts:
        return ProgramCounts(**{name: _program_iv(q[1] if native else q[0]) for name, q in _QUERIES.items()})

    def release(self) -> None:
        if self.id:
            _fn("glDeleteProgramsARB")(1, ctypes.byref(ctypes.c_uint(self.id)))
            self.id = 0


class AsmKernel(RenderTargets, BaseGLKernel):
    """One assembly program + the render-target path's textures of one problem shape."""

    def __init__(self, ctx, problem, config, layout, source: str, pool=None, transfers=None):
        self.lang = config["lang"]
        super().__init__(ctx, problem, config, layout, source, pool=pool, transfers=transfers)

    def _compile(self, source: str):
        if self.lang not in available_langs(self.ctx):
            raise BuildError(f"lang={self.lang}: this GL context runs no such assembly "
                             "(it needs a compatibility-profile context with the extension)", source)
        return AsmProgram(self.ctx, self.lang, source)

    def _make_pipeline(self) -> None:
        """Nothing to make: a pass draws a rectangle through the fixed-function vertex
        stage.  A 1 x 1 zero texel stands in for partial sums and C where a pass reads
        none (with a 2D texture's wrapping, any coordinate reads it)."""
        import moderngl
        self.zero = self.ctx.texture((1, 1), 4, data=np.zeros(4, np.float32).tobytes(), dtype="f4")
        self.zero.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self._resources.append(self.zero)

    def _execute(self, start: int, stop: int | None, src: int, rows) -> int:
        """Passes start..stop-1 reading partial sums from texture set `src`, over
        fragment rows `rows` (assembly programs read texture units by number,
        texture[n]: nothing to point); returns the texture set holding the result."""
        with row_bands(self.fbos, rows):
            return self._draw(start, stop, src)

    def _draw(self, start: int, stop: int | None, src: int) -> int:
        L = self.layout
        stop = L.passes if stop is None else stop
        local = _fn("glProgramLocalParameter4fARB")
        rect = _fn("glRectf")
        self.tex_a.use(_UNIT_A)
        self.tex_b.use(_UNIT_B)
        _fn("glUseProgram")(0)                 # a GLSL program in use would shade instead
        _fn("glEnable")(FRAGMENT_PROGRAM_ARB)
        _fn("glBindProgramARB")(FRAGMENT_PROGRAM_ARB, self.program.id)
        try:
            for p in range(start, stop):
                dst = 1 - src
                last = p == L.passes - 1
                for t, tex in enumerate(self.partials[src]):
                    (tex if p > 0 else self.zero).use(_UNIT_P0 + t)
                reads_c = last and self._beta != 0.0 and self.tex_c is not None
                (self.tex_c if reads_c else self.zero).use(_UNIT_CIN)
                for index, values in pass_parameters(self.lang, L, p, self._alpha, self._beta):
                    local(FRAGMENT_PROGRAM_ARB, index, *values)
                self.fbos[dst].use()
                rect(-1.0, -1.0, 1.0, 1.0)
                src = dst
        finally:
            _fn("glDisable")(FRAGMENT_PROGRAM_ARB)
        return src

