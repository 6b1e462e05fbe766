"""The hand-written assembly baseline: ARB_fragment_program through PyOpenGL.

Jiang found part of the gap to GPUbench's expert code in the high-level
language.  This runs the expert 4x4 RGBA + 4-MRT algorithm written as an
ARBfp1.0 program (shaders/gl/handtuned/expert_4x4_mrt.arbfp.j2) with the same
texture layout, multi-pass ping-pong and timing as every other kernel.

Assembly programs need a compatibility-profile context (NVIDIA accepts them in
moderngl's core-profile context but never shades with them), and moderngl
cannot attach to one made outside glcontext, so this driver makes its own
surfaceless compatibility-profile EGL context with PyOpenGL and speaks GL
directly.  It makes that context current only inside its own calls and puts
back whatever context was current before, so moderngl's contexts are
untouched.  Contexts without ARB_fragment_program report that and skip.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import time as _time

import numpy as np

from ...config import Config
from ...errors import BuildError, ContextError, InvalidConfig, RunError
from ...problem import Problem
from ...templates import render
from ..base import Kernel
from .driver import kernel_operands
from .layout import Layout
from .timing import timed

TEMPLATE = "gl/handtuned/expert_4x4_mrt.arbfp.j2"
TARGETS = 4


def _gl():
    # PyOpenGL picks its platform once, at first import: EGL, as our contexts are.
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    from OpenGL import EGL, GL
    return EGL, GL


class CompatContext:
    """A surfaceless compatibility-profile EGL context on EGL device `device_index`."""

    def __init__(self, device_index: int | None = None):
        EGL, GL = _gl()
        from OpenGL.EGL.EXT.device_base import egl_get_devices
        from OpenGL.EGL.EXT.platform_base import eglGetPlatformDisplayEXT
        from OpenGL.EGL.EXT.platform_device import EGL_PLATFORM_DEVICE_EXT
        idx = device_index or 0
        devices = egl_get_devices()
        if not devices or idx >= len(devices):
            raise ContextError(f"EGL device {idx} not found ({len(devices or [])} devices)")
        self.dpy = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[idx], None)
        major, minor = EGL.EGLint(), EGL.EGLint()
        if not EGL.eglInitialize(self.dpy, ctypes.pointer(major), ctypes.pointer(minor)):
            raise ContextError("eglInitialize failed on the EGL device display")
        attribs = (EGL.EGLint * 5)(EGL.EGL_SURFACE_TYPE, EGL.EGL_PBUFFER_BIT,
                                   EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT, EGL.EGL_NONE)
        cfg, n = EGL.EGLConfig(), EGL.EGLint()
        if not EGL.eglChooseConfig(self.dpy, attribs, ctypes.pointer(cfg), 1, ctypes.pointer(n)) or n.value < 1:
            raise ContextError("no EGL config renders desktop OpenGL on this device")
        EGL.eglBindAPI(EGL.EGL_OPENGL_API)
        cattr = (EGL.EGLint * 3)(EGL.EGL_CONTEXT_OPENGL_PROFILE_MASK,
                                 EGL.EGL_CONTEXT_OPENGL_COMPATIBILITY_PROFILE_BIT, EGL.EGL_NONE)
        self.ctx = EGL.eglCreateContext(self.dpy, cfg, EGL.EGL_NO_CONTEXT, cattr)
        if not self.ctx:
            raise ContextError("eglCreateContext refused a compatibility-profile context")
        with self.current():
            self.renderer = GL.glGetString(GL.GL_RENDERER).decode()
            self.extensions = set(GL.glGetString(GL.GL_EXTENSIONS).decode().split())

    @contextlib.contextmanager
    def current(self):
        """Make this context current; afterwards put back the one that was."""
        EGL, _ = _gl()
        prev = (EGL.eglGetCurrentDisplay(), EGL.eglGetCurrentSurface(EGL.EGL_DRAW),
                EGL.eglGetCurrentSurface(EGL.EGL_READ), EGL.eglGetCurrentContext())
        if not EGL.eglMakeCurrent(self.dpy, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, self.ctx):
            raise ContextError("eglMakeCurrent (surfaceless) failed for the compatibility context")
        try:
            yield
        finally:
            if prev[3]:
                EGL.eglMakeCurrent(*prev)
            else:
                EGL.eglMakeCurrent(self.dpy, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)

    def finish(self):           # for timing.timed()
        _gl()[1].glFinish()


_CONTEXTS: dict = {}


def compat_context(device_index: int | None = None) -> CompatContext:
    key = device_index or 0
    if key not in _CONTEXTS:
        _CONTEXTS[key] = CompatContext(device_index)
    return _CONTEXTS[key]


def supported(backend) -> tuple[bool, str]:
    """Whether the assembly baseline can run here, with a note why not."""
    try:
        cc = compat_context(getattr(backend, "device_index", None))
    except Exception as e:
        return False, f"assembly baseline skipped: no compatibility-profile EGL context: {e}"
    missing = {"GL_ARB_fragment_program", "GL_ARB_texture_rectangle"} - cc.extensions
    if missing:
        return False, f"assembly baseline skipped: {cc.renderer} lacks {sorted(missing)}"
    return True, f"ARB_fragment_program on {cc.renderer}"


class _Query:
    """A GL_TIME_ELAPSED query in the shape timing.timed() expects."""

    def __init__(self):
        _, GL = _gl()
        self.id = int(np.ravel(GL.glGenQueries(1))[0])

    def __enter__(self):
        _gl()[1].glBeginQuery(_gl()[1].GL_TIME_ELAPSED, self.id)

    def __exit__(self, *exc):
        _gl()[1].glEndQuery(_gl()[1].GL_TIME_ELAPSED)

    @property
    def elapsed(self) -> int:
        _, GL = _gl()
        # 32-bit read (PyOpenGL's ui64v wrapper is broken); past 4.29 s timed() uses wall time
        return int(np.ravel(GL.glGetQueryObjectuiv(self.id, GL.GL_QUERY_RESULT))[0])


class AssemblyKernel(Kernel):
    """The ARBfp1.0 expert kernel for one problem shape (same Kernel protocol as GLKernel)."""

    def __init__(self, cc: CompatContext, problem: Problem, layout: Layout):
        self.cc, self.problem, self.layout = cc, problem, layout
        self.config = Config(baseline="expert-4x4-mrt-asm", np=layout.np, mc="1x4", mrt_h=4, mrt_w=1)
        self.source = render(TEMPLATE, steps=layout.steps)
        self._tex, self._fbo, self._prog = [], [], None
        self._loaded, self._alpha, self._beta = False, 1.0, 0.0
        self.timing_source = None
        t0 = _time.perf_counter()
        with cc.current():
            try:
                self._build()
            except BuildError:
                self._free()
                raise
            except Exception as e:
                self._free()
                raise RunError(f"could not set up the assembly kernel: {str(e)[:500]}") from None
        self.compile_ms = (_time.perf_counter() - t0) * 1e3

    # --- resources ------------------------------------------------------
    def _texture(self, size, data=None):
        _, GL = _gl()
        tid = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_RECTANGLE, tid)
        GL.glTexParameteri(GL.GL_TEXTURE_RECTANGLE, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
        GL.glTexParameteri(GL.GL_TEXTURE_RECTANGLE, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
        w, h = size
        data = np.zeros((h, w, 4), np.float32) if data is None else data
        GL.glTexImage2D(GL.GL_TEXTURE_RECTANGLE, 0, GL.GL_RGBA32F, w, h, 0, GL.GL_RGBA, GL.GL_FLOAT, data)
        self._tex.append(tid)
        return tid

    def _build(self):
        _, GL = _gl()
        L = self.layout
        self.tex_a, self.tex_b = self._texture(L.a_size), self._texture(L.b_size)
        self.tex_c, self.zero_c = self._texture(L.cfull_size), self._texture(L.cfull_size)
        self.zeros = [self._texture(L.c_size) for _ in range(TARGETS)]
        self.partials = [[self._texture(L.c_size) for _ in range(TARGETS)] for _ in range(2)]
        for texs in self.partials:
            fbo = int(GL.glGenFramebuffers(1))
            self._fbo.append(fbo)
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
            for t, tid in enumerate(texs):
                GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0 + t,
                                          GL.GL_TEXTURE_RECTANGLE, tid, 0)
            GL.glDrawBuffers(TARGETS, [GL.GL_COLOR_ATTACHMENT0 + t for t in range(TARGETS)])
            status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
            if status != GL.GL_FRAMEBUFFER_COMPLETE:
                raise RunError(f"float render targets incomplete (status {status:#x})")
        from OpenGL.GL.ARB import fragment_program as fp
        from OpenGL.GL.ARB import vertex_program as vp
        self._prog = int(vp.glGenProgramsARB(1))
        vp.glBindProgramARB(fp.GL_FRAGMENT_PROGRAM_ARB, self._prog)
        text = self.source.encode()
        try:
            vp.glProgramStringARB(fp.GL_FRAGMENT_PROGRAM_ARB, vp.GL_PROGRAM_FORMAT_ASCII_ARB, len(text), text)
            failed = GL.glGetError() != GL.GL_NO_ERROR
        except GL.GLError:
            failed = True
        if failed:
            pos = int(GL.glGetIntegerv(vp.GL_PROGRAM_ERROR_POSITION_ARB))
            msg = GL.glGetString(vp.GL_PROGRAM_ERROR_STRING_ARB)
            msg = msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)
            line = text[:max(pos, 0)].count(b"\n") + 1
            raise BuildError(f"{TEMPLATE}: the driver rejected the program at line {line}: {msg}",
                             self.source)

    def _free(self):
        _, GL = _gl()
        try:
            if self._fbo:
                GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
                GL.glDeleteFramebuffers(len(self._fbo), self._fbo)
            if self._tex:
                GL.glDeleteTextures(self._tex)
            if self._prog:
                from OpenGL.GL.ARB import vertex_program as vp
                vp.glDeleteProgramsARB(1, [self._prog])
        except Exception:
            pass
        self._tex, self._fbo, self._prog = [], [], None

    def release(self) -> None:
        if self._tex or self._fbo or self._prog:
            with self.cc.current():
                self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    # --- running --------------------------------------------------------
    def _upload(self, tid, size, arr):
        _, GL = _gl()
        GL.glBindTexture(GL.GL_TEXTURE_RECTANGLE, tid)
        GL.glTexSubImage2D(GL.GL_TEXTURE_RECTANGLE, 0, 0, 0, size[0], size[1], GL.GL_RGBA, GL.GL_FLOAT,
                           np.ascontiguousarray(arr, np.float32))

    def _execute(self) -> int:
        _, GL = _gl()
        from OpenGL.GL.ARB import fragment_program as fp
        from OpenGL.GL.ARB import vertex_program as vp
        L = self.layout
        GL.glViewport(0, 0, *L.c_size)
        GL.glEnable(fp.GL_FRAGMENT_PROGRAM_ARB)
        vp.glBindProgramARB(fp.GL_FRAGMENT_PROGRAM_ARB, self._prog)
        vp.glProgramLocalParameter4fARB(fp.GL_FRAGMENT_PROGRAM_ARB, 1, 0.0, float(L.hc), 0.0, 0.0)

        def bind(unit, tid):
            GL.glActiveTexture(GL.GL_TEXTURE0 + unit)
            GL.glBindTexture(GL.GL_TEXTURE_RECTANGLE, tid)
        bind(0, self.tex_a)
        bind(1, self.tex_b)
        src = 0
        for p in range(L.passes):
            dst, last = 1 - src, p == L.passes - 1
            for t in range(TARGETS):
                bind(3 + t, self.zeros[t] if p == 0 else self.partials[src][t])
            bind(2, self.tex_c if last and self._beta != 0.0 else self.zero_c)
            k0 = p * L.steps
            vp.glProgramLocalParameter4fARB(fp.GL_FRAGMENT_PROGRAM_ARB, 0, k0 + 0.5, 4 * k0 + 0.5,
                                            self._alpha if last else 1.0, self._beta if last else 0.0)
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self._fbo[dst])
            GL.glRectf(-1.0, -1.0, 1.0, 1.0)
            src = dst
        GL.glDisable(fp.GL_FRAGMENT_PROGRAM_ARB)
        return src

    def run(self, A, B, C=None, *, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
        L = self.layout
        A, B, C = kernel_operands(self.problem, L, A, B, C, beta)
        self._alpha, self._beta = float(alpha), float(beta)
        _, GL = _gl()
        with self.cc.current():
            self._upload(self.tex_a, L.a_size, L.pack_a(A))
            self._upload(self.tex_b, L.b_size, L.pack_b(B))
            if C is not None:
                self._upload(self.tex_c, L.cfull_size, L.pack_c(C))
            nan = np.full(L.c_size[::-1] + (4,), np.nan, np.float32)
            for texs in self.partials:                  # poison: unwritten elements show
                for tid in texs:
                    self._upload(tid, L.c_size, nan)
            self._loaded = True
            which = self._execute()
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self._fbo[which])
            w, h = L.c_size
            outs = []
            for t in range(TARGETS):
                GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0 + t)
                raw = GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_FLOAT)
                outs.append(np.frombuffer(raw, np.float32).reshape(h, w, 4))
            err = GL.glGetError()
            if err != GL.GL_NO_ERROR:
                raise RunError(f"GL error {err:#x} while running the assembly program")
        return L.unpack_c(outs)

    def time(self, repeats: int = 10, warmup: int = 2) -> list[float]:
        if not self._loaded:
            raise RunError("no inputs loaded: call run() first")
        with self.cc.current():
            for _ in range(max(0, warmup)):
                self._execute()
            q = _Query()
            out = []
            for _ in range(repeats):
                ms, self.timing_source = timed(self.cc, q, self._execute)
                out.append(ms)
        return out


def build(backend, problem: Problem, np: int | None = None) -> AssemblyKernel:
    ok, note = supported(backend)
    if not ok:
        raise InvalidConfig(note)
    np_ = np if np is not None else min(-(-problem.K // 4) * 4, 256)
    layout = Layout.plan(problem.M, problem.N, problem.K, mc="1x4", mrt_h=4, mrt_w=1, np=np_, ka=4, kb=1)
    limit = backend.device().limits.get("max_texture_size", 4096)
    if layout.largest_texture() > limit:
        raise InvalidConfig(f"assembly baseline: a texture of {layout.largest_texture()} texels "
                            f"exceeds the device's max texture size {limit}")
    return AssemblyKernel(compat_context(getattr(backend, "device_index", None)), problem, layout)
