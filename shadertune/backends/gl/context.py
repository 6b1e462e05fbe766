"""GL contexts: headless EGL (default) or a hidden GLFW window, created lazily.

EGL picks Mesa llvmpipe where there is no GPU and the NVIDIA driver where
there is one; `device_index` chooses among EGL devices.  Failures become one
ContextError that says what is missing and how to fix it.
"""
from __future__ import annotations

import atexit
import ctypes.util
import glob
import os

from ...errors import ContextError

_CONTEXTS: dict = {}
_GLFW_WINDOWS: list = []

_MESA_HINT = ("on Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 "
              "(Mesa llvmpipe renders without a GPU)")
_NVIDIA_VENDOR = "/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json"


def _diagnose_egl() -> list[str]:
    """What is visibly missing for EGL, as human-readable lines."""
    problems = []
    if ctypes.util.find_library("EGL") is None:
        problems.append(f"libEGL.so.1 was not found; {_MESA_HINT}")
    if ctypes.util.find_library("GL") is None:
        problems.append(f"libGL.so.1 was not found; {_MESA_HINT}")
    vendor_dirs = ["/usr/share/glvnd/egl_vendor.d", "/etc/glvnd/egl_vendor.d"]
    env_vendor = os.environ.get("__EGL_VENDOR_LIBRARY_FILENAMES")
    if env_vendor:
        missing = [f for f in env_vendor.split(":") if f and not os.path.exists(f)]
        if missing:
            problems.append(f"__EGL_VENDOR_LIBRARY_FILENAMES names missing files: {missing}")
    elif not any(glob.glob(os.path.join(d, "*.json")) for d in vendor_dirs):
        hint = (f"; for the NVIDIA driver export __EGL_VENDOR_LIBRARY_FILENAMES={_NVIDIA_VENDOR}"
                if os.path.exists(_NVIDIA_VENDOR) else f"; {_MESA_HINT}")
        problems.append("no EGL vendor file (glvnd egl_vendor.d/*.json) was found" + hint)
    return problems


def create_egl_context(device_index: int | None = None, require: int | None = None):
    """A new standalone moderngl context on EGL device `device_index` (default: the first)."""
    import moderngl
    problems = _diagnose_egl()
    if problems and any("not found" in p for p in problems):
        raise ContextError("cannot create a headless EGL GL context: " + "; ".join(problems))
    if device_index is not None and (not isinstance(device_index, int) or device_index < 0):
        raise ValueError(f"device_index must be a non-negative int, got {device_index!r}")
    try:
        kw = {"device_index": device_index} if device_index is not None else {}
        if require is None:
            # Ask for 4.5 (some drivers hand out exactly the version asked for), else 3.3.
            try:
                ctx = moderngl.create_context(standalone=True, backend="egl", require=450, **kw)
            except Exception:
                ctx = moderngl.create_context(standalone=True, backend="egl", require=330, **kw)
        else:
            ctx = moderngl.create_context(standalone=True, backend="egl", require=require, **kw)
    except Exception as e:  # glcontext raises bare Exceptions with C-level text
        detail = str(e).strip() or type(e).__name__
        extra = ("; " + "; ".join(problems)) if problems else ""
        where = f" (device_index={device_index})" if device_index is not None else ""
        raise ContextError(
            f"cannot create a headless EGL GL context{where}: {detail}{extra}. "
            f"Without a GPU install Mesa ({_MESA_HINT}); with an NVIDIA GPU make sure the "
            f"driver's EGL vendor file is visible (export __EGL_VENDOR_LIBRARY_FILENAMES="
            f"{_NVIDIA_VENDOR}); choose another GPU with device_index") from None
    return ctx


def create_glfw_context(require: int = 330):
    """A moderngl context on a hidden GLFW window (desktops, or Xvfb)."""
    import moderngl
    try:
        import glfw
    except Exception as e:
        raise ContextError(f"the GLFW backend needs the 'glfw' package and libglfw: {e}") from None
    if not glfw.init():
        desc = glfw.get_error()[1] if hasattr(glfw, "get_error") else None
        raise ContextError(
            "cannot initialise GLFW (no display?): "
            f"{desc.decode() if isinstance(desc, bytes) else desc or 'glfw.init() failed'}. "
            "Set DISPLAY (e.g. run under Xvfb) or use the default headless backend='egl'")
    glfw.window_hint(glfw.VISIBLE, glfw.FALSE)
    glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, require // 100)
    glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, (require // 10) % 10)
    glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
    glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, glfw.TRUE)
    win = glfw.create_window(16, 16, "shadertune", None, None)
    if not win:
        raise ContextError("GLFW could not create a hidden OpenGL "
                           f"{require // 100}.{(require // 10) % 10} core window; use backend='egl'")
    glfw.make_context_current(win)
    _GLFW_WINDOWS.append(win)
    return moderngl.create_context(require=require)


def get_context(device_index: int | None = None, kind: str = "egl"):
    """The process-wide cached context for (kind, device_index)."""
    if kind not in ("egl", "glfw"):
        raise ValueError(f"GL context kind must be 'egl' or 'glfw', got {kind!r}")
    key = (kind, device_index)
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = create_egl_context(device_index) if kind == "egl" else create_glfw_context()
        _CONTEXTS[key] = ctx
        from .timing import software_renderer
        # read the renderer now, while no work is in flight: the errors its probes
        # leave are cleared, which later would swallow a kernel's own GL error
        software_renderer(ctx)
    return ctx


def release_all() -> None:
    """Release every cached context (and GLFW windows)."""
    for ctx in list(_CONTEXTS.values()):
        try:
            ctx.release()
        except Exception:
            pass
    _CONTEXTS.clear()
    from .driver import _PARKING
    _PARKING.clear()
    if _GLFW_WINDOWS:
        import glfw
        for w in _GLFW_WINDOWS:
            glfw.destroy_window(w)
        _GLFW_WINDOWS.clear()
        glfw.terminate()


atexit.register(release_all)
