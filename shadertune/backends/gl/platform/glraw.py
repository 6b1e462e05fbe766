"""The few GL entry points moderngl does not wrap, called through ctypes.

moderngl's `ctx.info` lacks the image-unit limits, and it has no buffer storage
(persistently mapped buffers).  Entry points come from eglGetProcAddress on the
context current in this thread (glvnd hands out dispatch stubs that reach the
current context, EGL or GLX alike).  Everything here answers None, rather than
raising, where the driver lacks what is asked for: callers then fall back to
moderngl's own calls or leave a feature out.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

# GL enums (glcorearb.h)
MAX_IMAGE_UNITS = 0x8F38
MAX_COMBINED_SHADER_OUTPUT_RESOURCES = 0x8F39
MAX_FRAGMENT_IMAGE_UNIFORMS = 0x90CE
MAX_FRAGMENT_SHADER_STORAGE_BLOCKS = 0x90DA
MAX_SHADER_STORAGE_BUFFER_BINDINGS = 0x90DD
MAX_SHADER_STORAGE_BLOCK_SIZE = 0x90DE
MAX_COMPUTE_SHARED_MEMORY_SIZE = 0x8262
MAX_COMPUTE_WORK_GROUP_INVOCATIONS = 0x90EB
MAX_TEXTURE_BUFFER_SIZE = 0x8C2B
SUBGROUP_SIZE_KHR = 0x9532

TEXTURE_BUFFER = 0x8C2A
R32F, RG32F, RGBA32F = 0x822E, 0x8230, 0x8814

MAP_READ_BIT = 0x0001
MAP_WRITE_BIT = 0x0002
MAP_PERSISTENT_BIT = 0x0040
MAP_COHERENT_BIT = 0x0080
CLIENT_STORAGE_BIT = 0x0200

SYNC_GPU_COMMANDS_COMPLETE = 0x9117
SYNC_FLUSH_COMMANDS_BIT = 0x00000001
TIMEOUT_EXPIRED = 0x911B
WAIT_FAILED = 0x911D

_SIGNATURES = {
    "glGetInteger64v": (None, [ctypes.c_uint, ctypes.POINTER(ctypes.c_int64)]),
    "glCreateBuffers": (None, [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]),
    "glNamedBufferStorage": (None, [ctypes.c_uint, ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_uint]),
    "glMapNamedBufferRange": (ctypes.c_void_p, [ctypes.c_uint, ctypes.c_ssize_t, ctypes.c_ssize_t,
                                                ctypes.c_uint]),
    "glUnmapNamedBuffer": (ctypes.c_ubyte, [ctypes.c_uint]),
    "glDeleteBuffers": (None, [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]),
    "glFenceSync": (ctypes.c_void_p, [ctypes.c_uint, ctypes.c_uint]),
    "glClientWaitSync": (ctypes.c_uint, [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint64]),
    "glDeleteSync": (None, [ctypes.c_void_p]),
    "glFlush": (None, []),
    "glClearNamedBufferData": (None, [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                                      ctypes.c_void_p]),
    "glCreateTextures": (None, [ctypes.c_uint, ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]),
    "glTextureBuffer": (None, [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint]),
    "glBindTextureUnit": (None, [ctypes.c_uint, ctypes.c_uint]),
    "glDeleteTextures": (None, [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]),
    "glIsBuffer": (ctypes.c_ubyte, [ctypes.c_uint]),
    "glIsTexture": (ctypes.c_ubyte, [ctypes.c_uint]),
    # assembly programs (ARB_fragment_program, NV_gpu_program4) and the fixed-function
    # draw they shade (compatibility profile: asm_driver.py)
    "glGenProgramsARB": (None, [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]),
    "glDeleteProgramsARB": (None, [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]),
    "glBindProgramARB": (None, [ctypes.c_uint, ctypes.c_uint]),
    "glProgramStringARB": (None, [ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_char_p]),
    "glProgramLocalParameter4fARB": (None, [ctypes.c_uint, ctypes.c_uint] + [ctypes.c_float] * 4),
    "glGetProgramivARB": (None, [ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_int)]),
    "glGetIntegerv": (None, [ctypes.c_uint, ctypes.POINTER(ctypes.c_int)]),
    "glGetString": (ctypes.c_char_p, [ctypes.c_uint]),
    "glEnable": (None, [ctypes.c_uint]),
    "glDisable": (None, [ctypes.c_uint]),
    "glUseProgram": (None, [ctypes.c_uint]),
    "glRectf": (None, [ctypes.c_float] * 4),
}


def add_signatures(signatures: dict) -> None:
    """More entry points function() may look up (a module of its own declares the ones
    it calls)."""
    _SIGNATURES.update({k: v for k, v in signatures.items() if k not in _SIGNATURES})


@functools.lru_cache(maxsize=1)
def _get_proc_address():
    name = ctypes.util.find_library("EGL")
    if name is None:
        return None
    try:
        egl = ctypes.CDLL(name)
        fn = egl.eglGetProcAddress
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p]
    return fn


@functools.lru_cache(maxsize=None)
def function(name: str):
    """The GL entry point `name` as a ctypes function, or None where there is none."""
    gpa = _get_proc_address()
    if gpa is None or name not in _SIGNATURES:
        return None
    addr = gpa(name.encode())
    if not addr:
        return None
    restype, argtypes = _SIGNATURES[name]
    return ctypes.CFUNCTYPE(restype, *argtypes)(addr)


def _clear_errors(ctx, limit: int = 8) -> None:
    """Read GL errors until none is left (at most `limit`: a lost context repeats its own)."""
    for _ in range(limit):
        if ctx.error == "GL_NO_ERROR":
            return


MAX_TEXTURE_SIZE = 0x0D33


def usable(ctx) -> bool:
    """Whether the entry points found here reach ctx (the context current in this
    thread): they must read ctx's own max texture size."""
    ok = _get_integer(ctx, MAX_TEXTURE_SIZE) == int(ctx.info.get("GL_MAX_TEXTURE_SIZE", -2))
    _clear_errors(ctx)                    # ctx.info's own probes may leave errors
    return ok


def get_integer(ctx, pname: int) -> int | None:
    """glGetInteger64v(pname) on ctx, or None when the driver rejects the name or these
    entry points do not reach ctx (its GL error is cleared, so it cannot be blamed
    on a later kernel)."""
    return _get_integer(ctx, pname) if usable(ctx) else None


def _get_integer(ctx, pname: int) -> int | None:
    fn = function("glGetInteger64v")
    if fn is None:
        return None
    _clear_errors(ctx)
    v = ctypes.c_int64(-1)
    fn(pname, ctypes.byref(v))
    if ctx.error != "GL_NO_ERROR":
        _clear_errors(ctx)
        return None
    return int(v.value)


def persistent_buffer(ctx, nbytes: int, read: bool):
    """(moderngl Buffer, numpy uint8 view of its persistent, coherent mapping) of a
    buffer made with glNamedBufferStorage (GL 4.5 / ARB_buffer_storage +
    ARB_direct_state_access), or None where the driver cannot.  `read`: the host
    reads it (pixel pack target), else the host writes it (pixel unpack / copy
    source).  Host memory that the GPU copies to or from at DMA speed, and the
    host copies to or from with plain memcpy: no driver-side staging copy."""
    exts = set(ctx.extensions)
    if ctx.version_code < 450 and not {"GL_ARB_buffer_storage", "GL_ARB_direct_state_access"} <= exts:
        return None
    if not usable(ctx):
        return None
    create, storage, mapr = (function(n) for n in ("glCreateBuffers", "glNamedBufferStorage",
                                                   "glMapNamedBufferRange"))
    if None in (create, storage, mapr) or nbytes <= 0:
        return None
    _clear_errors(ctx)
    glo = ctypes.c_uint(0)
    create(1, ctypes.byref(glo))
    access = MAP_PERSISTENT_BIT | MAP_COHERENT_BIT | (MAP_READ_BIT if read else MAP_WRITE_BIT)
    storage(glo.value, nbytes, None, access | (CLIENT_STORAGE_BIT if read else 0))
    ptr = mapr(glo.value, 0, nbytes, access) if ctx.error == "GL_NO_ERROR" else None
    if not ptr or ctx.error != "GL_NO_ERROR":
        _clear_errors(ctx)
        function("glDeleteBuffers")(1, ctypes.byref(glo))
        return None
    view = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))
    return ctx.external_buffer(glo.value, nbytes), view


def delete_buffer(glo: int) -> None:
    """Unmap and delete a buffer made by persistent_buffer (moderngl's external
    buffers are not released by moderngl)."""
    unmap, delete = function("glUnmapNamedBuffer"), function("glDeleteBuffers")
    if unmap is None or delete is None:
        return
    unmap(glo)
    delete(1, ctypes.byref(ctypes.c_uint(glo)))


def wait_gpu(ctx, timeout_ns: int = 60 * 10**9) -> None:
    """Block until the GPU has done every command issued so far: a fence where the
    driver has fences (cheaper than glFinish on some drivers), else ctx.finish()."""
    fence, wait, delete = (function(n) for n in ("glFenceSync", "glClientWaitSync", "glDeleteSync"))
    if None in (fence, wait, delete):
        ctx.finish()
        return
    sync = fence(SYNC_GPU_COMMANDS_COMPLETE, 0)
    if not sync:
        ctx.finish()
        return
    try:
        if wait(sync, SYNC_FLUSH_COMMANDS_BIT, timeout_ns) in (WAIT_FAILED, TIMEOUT_EXPIRED):
            ctx.finish()
    finally:
        delete(sync)


_BUFFER_TEXTURE_FORMATS = {1: R32F, 2: RG32F, 4: RGBA32F}


def buffer_texture(ctx, buffer_glo: int, floats: int) -> int | None:
    """A buffer texture (GL 4.5 direct state access) viewing buffer `buffer_glo` as texels
    of `floats` floats (1, 2 or 4), so that a shader reads the buffer through the
    texture units (texelFetch on a samplerBuffer); its name, or None where the driver
    cannot make one."""
    create, attach = function("glCreateTextures"), function("glTextureBuffer")
    if create is None or attach is None or ctx.version_code < 450 or not usable(ctx):
        return None
    _clear_errors(ctx)
    name = ctypes.c_uint(0)
    create(TEXTURE_BUFFER, 1, ctypes.byref(name))
    attach(name.value, _BUFFER_TEXTURE_FORMATS[floats], buffer_glo)
    if ctx.error != "GL_NO_ERROR" or not name.value:
        _clear_errors(ctx)
        delete_texture(name.value)
        return None
    return int(name.value)


def bind_texture_unit(unit: int, texture: int) -> None:
    function("glBindTextureUnit")(unit, texture)


def delete_texture(texture: int) -> None:
    delete = function("glDeleteTextures")
    if delete is not None and texture:
        delete(1, ctypes.byref(ctypes.c_uint(texture)))


def flush() -> None:
    """glFlush on the context current in this thread: queued commands start now."""
    fn = function("glFlush")
    if fn is not None:
        fn()


_RED, _FLOAT = 0x1903, 0x1406


def fill_buffer(ctx, buffer_glo: int, value: float) -> bool:
    """Fill a buffer with one float32 value on the GPU (glClearNamedBufferData, GL 4.5);
    False where the driver cannot (the caller then writes it).  The caller has checked
    that these entry points reach ctx (usable)."""
    clear = function("glClearNamedBufferData")
    if clear is None or ctx.version_code < 450:
        return False
    data = ctypes.c_float(value)
    _clear_errors(ctx)
    clear(buffer_glo, R32F, _RED, _FLOAT, ctypes.byref(data))
    if ctx.error != "GL_NO_ERROR":
        _clear_errors(ctx)
        return False
    return True


def live_objects(ctx, upto: int) -> dict[str, int] | None:
    """How many buffer and texture names among 1 .. upto name live objects of the context
    current here (glIsBuffer, glIsTexture): what a leak test counts; None where these
    entry points do not reach ctx."""
    is_buffer, is_texture = function("glIsBuffer"), function("glIsTexture")
    if is_buffer is None or is_texture is None or not usable(ctx):
        return None
    return {"buffers": sum(1 for n in range(1, upto + 1) if is_buffer(n)),
            "textures": sum(1 for n in range(1, upto + 1) if is_texture(n))}
