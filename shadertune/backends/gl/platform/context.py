"""GL contexts: headless EGL (default) or a hidden GLFW window, one per thread.

EGL picks Mesa llvmpipe where there is no GPU and the NVIDIA driver where
there is one; `device_index` chooses among EGL devices.  Failures become one
ContextError that says what is missing and how to fix it.

Profile: on a software renderer an EGL context is a compatibility-profile one where
the driver gives one of GL 4.5 (egl_compat.py; a GPU keeps the core profile unless
SHADERTUNE_GL_PROFILE=compat asks: see PROFILES), so that assembly kernels (lang=arbfp, nvfp) run
in the same context, with the same textures, framebuffers, transfers and
timing, as the GLSL ones; else core profile ($SHADERTUNE_GL_PROFILE=core asks
for core; notes/gl.md has the measurements behind the choice).

Threads: a GL context is current in at most one thread, and EGL refuses to make
it current in a second thread while the first holds it (the GL calls of that
thread then go nowhere).  So get_context() gives every thread its own context,
made at the thread's first GL call and current there for the thread's life;
objects made in one context (kernels, textures) are not seen by another.  A
thread's contexts are released in that thread when it ends.

Processes: the driver's threads do not survive fork().  A forked child that
draws with a context its parent made, or with a new one, hangs, so
get_context() in a child forked after this process made a context raises
ContextError instead (docs/threads.md).

Each context carries one ContextState (state_of), the small GL objects and
facts the driver keeps per context.
"""
from __future__ import annotations

import atexit
import ctypes.util
import glob
import os
import threading

from ....core.optional import optional_import
from ....errors import ContextError
from .egl_compat import create_compat_context
from .uninterrupted import uninterrupted

_MESA_HINT = ("on Debian/Ubuntu: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 "
              "(Mesa llvmpipe renders without a GPU)")
_NVIDIA_VENDOR = "/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json"
_STATE_ATTR = "_shadertune_state"


class ContextState:
    """What shadertune keeps for one GL context, for as long as the context lives.

    parking      a 1x1 framebuffer bound before another framebuffer is released
                 (moderngl re-binds the last used one when it makes the next)
    clears_nan   whether clearing a float framebuffer to NaN stores NaN (None: not yet checked)
    placeholder  a 1x1 texture for samplers a shader does not read
    software     whether the context renders on the CPU (None: not yet read)
    owner        (pid, thread id) the context is current in, for contexts
                 get_context() made; None for contexts made elsewhere (their
                 maker keeps them current)
    clock        the context's ClockKeeper (timing.py), made when timing first needs it
    programs     compiled compute programs by source, shared by the kernels of every
                 shape that renders the same source (compute_driver.py) and by the
                 GPU copies of GL arrays (regions.py, which also keys its own by
                 template name and parameters)
    closed       True once the context is released (its thread ended): the GL arrays
                 made in it hold nothing any more (arrays.py)
    compiling    compute programs the driver compiles ahead, by source (compile_ahead.py)
    parallel_compile  whether the context compiles ahead on the driver's threads (None:
                 not yet asked; compile_ahead.wanted)
    """

    __slots__ = ("owner", "parking", "clears_nan", "placeholder", "software", "clock", "programs",
                 "closed", "compiling", "parallel_compile")

    def __init__(self, owner: tuple[int, int] | None = None):
        self.owner = owner
        self.parking = None
        self.clears_nan = None
        self.placeholder = None
        self.software = None
        self.clock = None
        self.programs = {}
        self.closed = False
        self.compiling = {}
        self.parallel_compile = None

    def check(self) -> None:
        """Raise ContextError unless the calling thread may use the context: GL calls
        from another thread or a forked child would be lost or would hang."""
        if self.owner is None:
            return
        pid, tid = self.owner
        if pid != os.getpid():
            raise ContextError(_forked_message(pid))
        if tid != threading.get_ident():
            raise ContextError(
                f"this GL context is current in another thread (id {tid}): a GL context serves "
                "one thread; make a GLBackend in this thread (shadertune.matmul gives every "
                "thread its own context)")


_SOFTWARE = ("llvmpipe", "softpipe", "swrast", "swiftshader", "lavapipe")


def is_software_renderer(renderer: str) -> bool:
    return any(s in str(renderer).lower() for s in _SOFTWARE)


def software_renderer(ctx) -> bool:
    """Whether ctx renders on the CPU (llvmpipe and kin); read once per context."""
    st = state_of(ctx)
    v = st.software
    if v is None:
        renderer = getattr(ctx, "renderer", None)      # the assembly path's own context
        if renderer is None:
            renderer = ctx.info.get("GL_RENDERER", "")
            for _ in range(8):   # ctx.info probes queries a driver may reject: clear their errors
                if ctx.error == "GL_NO_ERROR":
                    break
        v = st.software = is_software_renderer(renderer)
    return v


def state_of(ctx) -> ContextState:
    """The ContextState of `ctx` (made at first use), after checking that the calling
    thread may use ctx."""
    st = getattr(ctx, _STATE_ATTR, None)
    if st is None:
        st = ContextState()
        setattr(ctx, _STATE_ATTR, st)
    st.check()
    return st


# --- fork ------------------------------------------------------------------
_egl_pid: int | None = None      # the process that made this process's first context
_glfw_used = False               # glfw.init() succeeded here: terminate it at exit


def _forked_message(parent_pid: int) -> str:
    return (f"GL cannot be used in this process (pid {os.getpid()}): it was forked from pid "
            f"{parent_pid} after that process had made a GL context, and the GL driver does "
            "not survive fork() (a draw would hang). Start worker processes with "
            "multiprocessing's 'spawn' or 'forkserver' method, or fork them before the first "
            "GL call")


def check_not_forked() -> None:
    """ContextError in a process forked after an ancestor made a GL context."""
    if _egl_pid is not None and _egl_pid != os.getpid():
        raise ContextError(_forked_message(_egl_pid))


# --- creation ----------------------------------------------------------------
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


def check_device_index(device_index) -> None:
    if device_index is not None and (isinstance(device_index, bool) or not isinstance(device_index, int)
                                     or device_index < 0):
        raise ValueError(f"device_index must be a non-negative int, got {device_index!r}")


def default_device_index() -> int | None:
    """The EGL device a context takes where the caller names none: $SHADERTUNE_GL_DEVICE
    (read at each call, as the profile is), else None (EGL's first device).  On a machine
    with several GPUs it points a whole process (a test run, a benchmark) at one GPU."""
    text = os.environ.get("SHADERTUNE_GL_DEVICE", "").strip()
    if not text:
        return None
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise ContextError(f"SHADERTUNE_GL_DEVICE must be a non-negative integer (an EGL device "
                           f"index), got {text!r}")
    return index


def create_egl_context(device_index: int | None = None, require: int | None = None):
    """A new standalone moderngl context on EGL device `device_index` (default:
    $SHADERTUNE_GL_DEVICE, else the first), current in the calling thread: compatibility
    profile where the driver gives it at the version asked for (gl_profile), else core
    profile."""
    import moderngl
    check_not_forked()
    problems = _diagnose_egl()
    if problems and any("not found" in p for p in problems):
        raise ContextError("cannot create a headless EGL GL context: " + "; ".join(problems))
    check_device_index(device_index)
    if device_index is None:
        device_index = default_device_index()
    _note_gl_use()
    ctx = _compat_context(device_index, require)
    if ctx is not None:
        _became_current(ctx)
        return ctx
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
        _local.current = None       # a failed attempt may have changed what is current
        detail = str(e).strip() or type(e).__name__
        extra = ("; " + "; ".join(problems)) if problems else ""
        where = f" (device_index={device_index})" if device_index is not None else ""
        raise ContextError(
            f"cannot create a headless EGL GL context{where}: {detail}{extra}. "
            f"Without a GPU install Mesa ({_MESA_HINT}); with an NVIDIA GPU make sure the "
            f"driver's EGL vendor file is visible (export __EGL_VENDOR_LIBRARY_FILENAMES="
            f"{_NVIDIA_VENDOR}); choose another GPU with device_index") from None
    _became_current(ctx)
    return ctx


# Which profile create_egl_context asks for (SHADERTUNE_GL_PROFILE): 'compat' takes a
# compatibility-profile context where the driver gives one of the version asked for (GL
# 4.5 unless `require` says otherwise), else a core one; 'core' always core; 'auto' (the
# default) compat on a software renderer and core on a GPU.  A GPU keeps the core profile
# that every GPU measurement so far ran in until the compatibility profile has been
# measured there (notes/gl.md, "assembly beside GLSL"): with 'compat' on NVIDIA's driver
# the assembly kernels run too.
PROFILES = ("auto", "compat", "core")


def gl_profile() -> str:
    """The profile asked for: $SHADERTUNE_GL_PROFILE, 'auto' by default."""
    profile = os.environ.get("SHADERTUNE_GL_PROFILE", "auto").strip().lower() or "auto"
    if profile not in PROFILES:
        raise ContextError(f"SHADERTUNE_GL_PROFILE must be one of {list(PROFILES)}, got {profile!r}")
    return profile


def _compat_context(device_index: int | None, require: int | None):
    """A compatibility-profile context (egl_compat.py), the one kind of context in which
    assembly programs shade, or None where the profile asked for is core or EGL gives
    none of the version needed (the core-profile path then makes the context, and says
    what went wrong if it cannot either)."""
    profile = gl_profile()
    if profile == "core":
        return None
    try:
        ctx = create_compat_context(device_index, require or 450)
    except OSError:
        _local.current = None       # a failed attempt may have changed what is current
        return None
    if profile == "auto" and not is_software_renderer(ctx.info.get("GL_RENDERER", "")):
        ctx.release()               # a GPU: the core profile (see PROFILES)
        _local.current = None
        return None
    return ctx


def create_glfw_context(require: int = 330):
    """A moderngl context on a hidden GLFW window (desktops, or Xvfb), current in the
    calling thread."""
    global _glfw_used
    import moderngl
    check_not_forked()
    # glfw is the optional extra of this fallback only (EGL, the default, needs moderngl
    # alone); without it (or its library) one ContextError says how to get it
    glfw = optional_import("glfw", "context='glfw' needs the glfw package: pip install "
                           "'shadertune[glfw]', or use the default headless context='egl'",
                           error=ContextError, catch=Exception)
    if not glfw.init():
        desc = glfw.get_error()[1] if hasattr(glfw, "get_error") else None
        raise ContextError(
            "cannot initialise GLFW (no display?): "
            f"{desc.decode() if isinstance(desc, bytes) else desc or 'glfw.init() failed'}. "
            "Set DISPLAY (e.g. run under Xvfb) or use the default headless backend='egl'")
    _note_gl_use()
    _glfw_used = True
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
    ctx = moderngl.create_context(require=require)
    ctx._shadertune_glfw_window = win
    _became_current(ctx)
    return ctx


def _note_gl_use() -> None:
    global _egl_pid
    if _egl_pid is None:
        _egl_pid = os.getpid()


# --- the per-thread registry ---------------------------------------------------
class _ThreadContexts(dict):
    """One thread's contexts by (kind, device_index).  CPython drops a thread's
    thread-local values in that thread as it ends, so __del__ releases the contexts
    where they are current; in a forked child (another pid) it leaves them alone."""

    def __init__(self):
        super().__init__()
        self.pid = os.getpid()
        self.thread = threading.get_ident()

    def release(self) -> None:
        if os.getpid() != self.pid or threading.get_ident() != self.thread:
            return
        for ctx in list(self.values()):
            _release_context(ctx)
        if self:
            _release_egl_thread()
        self.clear()

    def __del__(self):
        try:
            self.release()
        except Exception:   # interpreter shutdown: modules may be gone already
            pass


_local = threading.local()


def _thread_contexts() -> _ThreadContexts:
    contexts = getattr(_local, "contexts", None)
    if contexts is None or contexts.pid != os.getpid():
        contexts = _local.contexts = _ThreadContexts()
    return contexts


def get_context(device_index: int | None = None, kind: str = "egl"):
    """The calling thread's context for (kind, device_index), made on first use."""
    if kind not in ("egl", "glfw"):
        raise ValueError(f"GL context kind must be 'egl' or 'glfw', got {kind!r}")
    check_not_forked()
    check_device_index(device_index)
    contexts = _thread_contexts()
    key = (kind, device_index)
    ctx = contexts.get(key)
    if ctx is None:
        # with Ctrl-C held back: the threads the driver starts now (llvmpipe's rasterizer
        # and compiler queues) inherit a mask that blocks SIGINT, so the signal never
        # lands inside driver code on one of them (uninterrupted.py)
        with uninterrupted():
            ctx = create_egl_context(device_index) if kind == "egl" else create_glfw_context()
        setattr(ctx, _STATE_ATTR, ContextState(owner=(os.getpid(), threading.get_ident())))
        contexts[key] = ctx
        # read the renderer now, while no work is in flight: the errors its probes
        # leave are cleared, which later would swallow a kernel's own GL error
        software_renderer(ctx)
    return ctx


def make_current(ctx) -> None:
    """Make ctx (one of this thread's) current here, unless shadertune left it current:
    a thread may hold several contexts (device indices), and GL calls go to whichever
    is current.  (moderngl's `with ctx:` is no help: on exit glcontext leaves no
    context current at all.)"""
    state_of(ctx)
    if getattr(_local, "current", None) is not ctx:
        ctx.__enter__()
        _local.current = ctx


def _became_current(ctx) -> None:
    """Record that ctx was just made current in this thread (creating a context does)."""
    _local.current = ctx


def context_closed(ctx) -> bool:
    """Whether ctx has been released (from any thread: no GL call is made)."""
    st = getattr(ctx, _STATE_ATTR, None)
    return st is not None and st.closed


def _release_context(ctx) -> None:
    st = getattr(ctx, _STATE_ATTR, None)
    if st is not None:
        st.closed = True
    try:
        ctx.release()
    except Exception:
        pass
    win = getattr(ctx, "_shadertune_glfw_window", None)
    if win is not None:
        import glfw
        glfw.destroy_window(win)


def _release_egl_thread() -> None:
    """eglReleaseThread: EGL keeps per-thread state, and the context last current in a
    thread, until the thread says it is done (2.3 MB per thread on llvmpipe otherwise)."""
    try:
        egl = ctypes.CDLL(os.environ.get("GLCONTEXT_LINUX_LIBEGL", "libEGL.so.1"))
        egl.eglReleaseThread()
    except Exception:
        pass


def release_all() -> None:
    """Release the calling thread's contexts (other threads' go when those threads end)."""
    contexts = getattr(_local, "contexts", None)
    if contexts is not None:
        contexts.release()


def _at_exit() -> None:
    release_all()
    if _glfw_used and _egl_pid == os.getpid():
        try:
            import glfw
            glfw.terminate()
        except Exception:
            pass


atexit.register(_at_exit)
