"""The hand-written assembly baseline: NV_gpu_program5 through PyOpenGL.

Jiang found part of the gap to GPUbench's expert code in the high-level
language; this runs the expert 4x4 RGBA + 4-MRT algorithm written directly in
NVIDIA's assembly (shaders/gl/handtuned/expert_4x4_mrt.nvfp) through the same
textures, passes and timing as every other kernel.  Contexts without
GL_NV_gpu_program5 (Mesa llvmpipe) report that and skip.
"""
from __future__ import annotations

import os

import numpy as np

from ...config import Config
from ...errors import BuildError, InvalidConfig, RunError
from ...problem import Problem
from ...templates import read
from .driver import GLKernel
from .layout import Layout

FRAGMENT = "gl/handtuned/expert_4x4_mrt.nvfp"


def _gl():
    """PyOpenGL bound to the current EGL context (imported lazily: it reads its platform once)."""
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    from OpenGL import GL
    from OpenGL.GL.ARB import fragment_program as fp
    from OpenGL.GL.ARB import vertex_program as vp
    from OpenGL.GL.NV import gpu_program4 as nv4
    return GL, vp, fp, nv4


_PROBED: dict = {}


def supported(backend) -> tuple[bool, str]:
    """Whether the assembly baseline runs here, with a note why not.

    Exposing GL_NV_gpu_program5 is not enough: NVIDIA's core-profile EGL context
    accepts the program but does not shade with it (every output stays unwritten,
    seen on an H200, driver 580), so a tiny product is computed and checked first."""
    lim = backend.device().limits
    if not lim.get("nv_gpu_program5"):
        return False, ("assembly baseline skipped: this context does not expose GL_NV_gpu_program5 "
                       "(Mesa llvmpipe does not; NVIDIA drivers do)")
    key = id(backend)
    if key not in _PROBED:
        _PROBED[key] = _probe(backend)
    return _PROBED[key]


def _probe(backend) -> tuple[bool, str]:
    p = Problem(8, 8, 8)
    A = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
    try:
        with AssemblyKernel(backend.ctx, p, Config(baseline="probe"),
                            Layout.plan(8, 8, 8, mc="1x4", mrt_h=4, mrt_w=1, np=8, ka=4, kb=1),
                            read(FRAGMENT)) as k:
            out = k.run(A, A)
    except Exception as e:
        return False, f"assembly baseline skipped: the probe failed: {str(e).splitlines()[0][:300]}"
    if not np.isfinite(out).all():
        return False, ("assembly baseline skipped: GL_NV_gpu_program5 is exposed and the program is "
                       "accepted, but this context does not run assembly fragment programs (outputs "
                       "stay unwritten; NVIDIA core-profile EGL contexts behave so)")
    if not np.allclose(out, A.astype(np.float64) @ A, rtol=1e-5, atol=1e-5):
        return False, "assembly baseline skipped: the probe computed a wrong product"
    return True, "GL_NV_gpu_program5 runs"


class AssemblyKernel(GLKernel):
    """GLKernel whose fragment stage is an NV_gpu_program5 program."""

    def _compile(self, source: str):
        # A GLSL program with a vertex shader only: with no GLSL fragment shader in use,
        # the enabled assembly fragment program shades the fragments (GL 2.0+ rule).
        return self.ctx.program(vertex_shader=read("gl/fullscreen.vert"))

    def _setup(self) -> None:
        GL, vp, fp, nv4 = _gl()
        L = self.layout
        self._zeros = [self._tex(L.c_size, np.zeros(L.c_size[::-1] + (4,), np.float32).tobytes())
                       for _ in range(L.targets)]
        self._zero_c = self._tex(L.cfull_size, np.zeros(L.cfull_size[::-1] + (4,), np.float32).tobytes())
        text = read(FRAGMENT).encode()
        target = fp.GL_FRAGMENT_PROGRAM_ARB
        pid = int(vp.glGenProgramsARB(1))
        self._progs = [(target, pid)]
        vp.glBindProgramARB(target, pid)
        try:
            vp.glProgramStringARB(target, vp.GL_PROGRAM_FORMAT_ASCII_ARB, len(text), text)
            failed = GL.glGetError() != GL.GL_NO_ERROR
        except GL.GLError:          # PyOpenGL's own error check
            failed = True
        if failed:
            pos = GL.glGetIntegerv(vp.GL_PROGRAM_ERROR_POSITION_ARB)
            msg = GL.glGetString(vp.GL_PROGRAM_ERROR_STRING_ARB)
            msg = msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)
            line = text[:max(int(pos), 0)].count(b"\n") + 1
            self.release()
            raise BuildError(f"{FRAGMENT}: the driver rejected the assembly at line {line}: {msg}",
                             text.decode())

    def release(self) -> None:
        if getattr(self, "_progs", None):
            try:
                _, vp, _, _ = _gl()
                for _, pid in self._progs:
                    vp.glDeleteProgramsARB(1, [pid])
            except Exception:
                pass
            self._progs = []
        super().release()

    def execute(self) -> int:
        if not self._loaded:
            raise RunError("no inputs loaded: call run() or load() first")
        GL, vp, fp, nv4 = _gl()
        L = self.layout
        target, pid = self._progs[0]
        self.tex_a.use(0)
        self.tex_b.use(1)
        GL.glEnable(target)
        vp.glBindProgramARB(target, pid)
        src = 0
        try:
            for p in range(L.passes):
                dst = 1 - src
                last = p == L.passes - 1
                for t in range(L.targets):
                    (self._zeros[t] if p == 0 else self.partials[src][t]).use(3 + t)
                (self.tex_c if last and self._beta != 0.0 else self._zero_c).use(2)
                nv4.glProgramLocalParameterI4iNV(target, 0, p * L.steps, L.steps, L.hc, 0)
                vp.glProgramLocalParameter4fARB(target, 1, self._alpha if last else 1.0,
                                                self._beta if last else 0.0, 0.0, 0.0)
                self.fbos[dst].use()
                self.vao.render(vertices=3)
                src = dst
        finally:
            GL.glDisable(target)
        return src


def build(backend, problem: Problem, np: int | None = None) -> AssemblyKernel:
    ok, note = supported(backend)
    if not ok:
        raise InvalidConfig(note)
    np_ = np if np is not None else -(-problem.K // 4) * 4
    layout = Layout.plan(problem.M, problem.N, problem.K, mc="1x4", mrt_h=4, mrt_w=1, np=np_, ka=4, kb=1)
    limit = backend.device().limits.get("max_texture_size", 4096)
    if layout.largest_texture() > limit:
        raise InvalidConfig(f"assembly baseline: a texture of {layout.largest_texture()} texels "
                            f"exceeds the device's max texture size {limit}")
    cfg = Config(baseline="expert-4x4-mrt-asm", np=layout.np, mc="1x4", mrt_h=4, mrt_w=1)
    return AssemblyKernel(backend.ctx, problem, cfg, layout, read(FRAGMENT))
