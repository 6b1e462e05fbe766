"""A moderngl context on a surfaceless compatibility-profile EGL context.

glcontext (moderngl's context maker) asks EGL for core-profile contexts only,
and assembly programs (ARB_fragment_program, NV_gpu_program4/5) need the
compatibility profile: Mesa lists ARB_fragment_program only there, and
NVIDIA's driver accepts an assembly program in a core context but never
shades with it.  moderngl takes any object with load_opengl_function,
__enter__, __exit__ and release as its context (mgl.create_context(context=...)),
so CompatLoader makes the EGL context itself, with ctypes, the way glcontext
makes its own (EGL_EXT_platform_device display, a pbuffer-capable config, no
surface) but with the compatibility profile bit, and moderngl runs on it
unchanged.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections import deque

EGL_NONE = 0x3038
EGL_SURFACE_TYPE, EGL_PBUFFER_BIT = 0x3033, 0x0001
EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT = 0x3040, 0x0008
EGL_OPENGL_API = 0x30A2
EGL_CONTEXT_MAJOR_VERSION, EGL_CONTEXT_MINOR_VERSION = 0x3098, 0x30FB
EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_COMPATIBILITY_PROFILE_BIT = 0x30FD, 0x0002
EGL_PLATFORM_DEVICE_EXT = 0x313F
_MAX_DEVICES = 32

# GL_CONTEXT_PROFILE_MASK's compatibility bit (what ctx.info reports)
GL_CONTEXT_COMPATIBILITY_PROFILE_BIT = 0x2


class _Egl:
    """The few EGL entry points used here, from the library glcontext would load."""

    def __init__(self):
        name = os.environ.get("GLCONTEXT_LINUX_LIBEGL") or ctypes.util.find_library("EGL")
        if not name:
            raise OSError("libEGL not found")
        lib = ctypes.CDLL(name)
        vp, i = ctypes.c_void_p, ctypes.c_int
        self.get_proc = _typed(lib.eglGetProcAddress, vp, [ctypes.c_char_p])
        self.initialize = _typed(lib.eglInitialize, ctypes.c_uint, [vp, vp, vp])
        self.choose_config = _typed(lib.eglChooseConfig, ctypes.c_uint, [vp, vp, vp, i, vp])
        self.bind_api = _typed(lib.eglBindAPI, ctypes.c_uint, [ctypes.c_uint])
        self.create_context = _typed(lib.eglCreateContext, vp, [vp, vp, vp, vp])
        self.destroy_context = _typed(lib.eglDestroyContext, ctypes.c_uint, [vp, vp])
        self.make_current = _typed(lib.eglMakeCurrent, ctypes.c_uint, [vp, vp, vp, vp])
        self.current_context = _typed(lib.eglGetCurrentContext, vp, [])
        query = self.get_proc(b"eglQueryDevicesEXT")
        display = self.get_proc(b"eglGetPlatformDisplayEXT")
        if not query or not display:
            raise OSError("EGL lacks EGL_EXT_device_enumeration / EGL_EXT_platform_device")
        self.query_devices = ctypes.CFUNCTYPE(ctypes.c_uint, i, ctypes.POINTER(vp), ctypes.POINTER(i))(query)
        self.platform_display = ctypes.CFUNCTYPE(vp, ctypes.c_uint, vp, ctypes.POINTER(i))(display)


def _typed(fn, restype, argtypes):
    fn.restype, fn.argtypes = restype, argtypes
    return fn


class CompatLoader:
    """A compatibility-profile GL context of version >= `version` (e.g. 450) on EGL
    device `device_index`, in moderngl's loader protocol.  Raises OSError where EGL
    does not make one (the caller then makes a core-profile context instead)."""

    def __init__(self, device_index: int | None, version: int):
        egl = self.egl = _Egl()
        devices = (ctypes.c_void_p * _MAX_DEVICES)()
        n = ctypes.c_int(0)
        if not egl.query_devices(_MAX_DEVICES, devices, ctypes.byref(n)) or n.value < 1:
            raise OSError("no EGL device")
        idx = device_index or 0
        if idx >= n.value:
            raise OSError(f"EGL device {idx} not found ({n.value} devices)")
        self.dpy = egl.platform_display(EGL_PLATFORM_DEVICE_EXT, devices[idx], None)
        if not self.dpy or not egl.initialize(self.dpy, None, None):
            raise OSError("eglInitialize failed on the device display")
        attrs = (ctypes.c_int * 5)(EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
                                   EGL_NONE)
        cfg, count = ctypes.c_void_p(), ctypes.c_int(0)
        if not egl.choose_config(self.dpy, attrs, ctypes.byref(cfg), 1, ctypes.byref(count)) or count.value < 1:
            raise OSError("no EGL config renders desktop OpenGL")
        if not egl.bind_api(EGL_OPENGL_API):
            raise OSError("eglBindAPI(EGL_OPENGL_API) failed")
        cattrs = (ctypes.c_int * 7)(EGL_CONTEXT_MAJOR_VERSION, version // 100,
                                    EGL_CONTEXT_MINOR_VERSION, (version // 10) % 10,
                                    EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_COMPATIBILITY_PROFILE_BIT,
                                    EGL_NONE)
        self.ctx = egl.create_context(self.dpy, cfg, None, cattrs)
        if not self.ctx:
            raise OSError("EGL made no compatibility-profile context of "
                          f"GL {version // 100}.{(version // 10) % 10}")
        self.__enter__()

    def load_opengl_function(self, name: str) -> int:
        return self.egl.get_proc(name.encode()) or 0

    def __enter__(self):
        if not self.egl.make_current(self.dpy, None, None, self.ctx):
            raise OSError("eglMakeCurrent (surfaceless) failed for the compatibility-profile context")

    def __exit__(self, *exc):
        pass            # as glcontext's: the context stays current until another is made so

    def release(self) -> None:
        if self.ctx:
            if self.egl.current_context() == self.ctx:
                self.egl.make_current(self.dpy, None, None, None)
            self.egl.destroy_context(self.dpy, self.ctx)
            self.ctx = None


def create_compat_context(device_index: int | None, version: int = 450):
    """A standalone moderngl context on a compatibility-profile EGL context of GL
    >= `version`, current in the calling thread; OSError where EGL offers none."""
    import moderngl
    from moderngl import mgl
    loader = CompatLoader(device_index, version)
    try:
        ctx = moderngl.Context.__new__(moderngl.Context)
        ctx.mglo, ctx.version_code = mgl.create_context(context=loader)
    except Exception as e:
        loader.release()
        raise OSError(f"moderngl could not attach to the compatibility-profile context: {e}") from None
    # what moderngl.create_context(standalone=True) sets on a new context
    ctx._info, ctx._extensions, ctx.extra, ctx._gc_mode = None, None, None, None
    ctx._objects, ctx._screen, ctx.fbo = deque(), None, None
    if ctx.version_code < version:
        ctx.release()
        raise OSError(f"the compatibility-profile context is GL {ctx.version_code}, not {version}")
    return ctx


def is_compatibility_profile(ctx) -> bool:
    """Whether moderngl context `ctx` runs the compatibility profile (where assembly
    programs shade)."""
    try:
        return bool(int(ctx.info.get("GL_CONTEXT_PROFILE_MASK", 0)) & GL_CONTEXT_COMPATIBILITY_PROFILE_BIT)
    except (TypeError, ValueError):
        return False
