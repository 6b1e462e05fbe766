"""Compute programs made through the GL entry points themselves, so that the driver can
compile them on threads of its own.

moderngl's compute_shader compiles and links in one blocking call on the calling
thread.  With GL_KHR_parallel_shader_compile (or its ARB twin) glCompileShader and
glLinkProgram return at once, the driver compiles on its own threads, and
GL_COMPLETION_STATUS_KHR says when a program is done; a status query that needs the
result (LINK_STATUS) waits for it.  start() begins one such compile; Compiling.finish()
gives the program or the driver's error.

RawProgram answers what the compute family's driver asks of moderngl's ComputeShader:
get(name) -> a uniform whose .value is set, run(x, y, z), release().
"""
from __future__ import annotations

import ctypes

from ....errors import BuildError
from . import glraw

COMPUTE_SHADER = 0x91B9
COMPILE_STATUS = 0x8B81
LINK_STATUS = 0x8B82
INFO_LOG_LENGTH = 0x8B84
ACTIVE_UNIFORMS = 0x8B86
COMPLETION_STATUS = 0x91B1          # GL_COMPLETION_STATUS_KHR (= _ARB)
ALL_THREADS = 0xFFFFFFFF            # glMaxShaderCompilerThreadsKHR: as many as the driver likes
FLOAT, UINT = 0x1406, 0x1405
EXTENSIONS = ("GL_KHR_parallel_shader_compile", "GL_ARB_parallel_shader_compile")

_c = ctypes
_SIGNATURES = {
    "glCreateShader": (_c.c_uint, [_c.c_uint]),
    "glShaderSource": (None, [_c.c_uint, _c.c_int, _c.POINTER(_c.c_char_p), _c.POINTER(_c.c_int)]),
    "glCompileShader": (None, [_c.c_uint]),
    "glGetShaderiv": (None, [_c.c_uint, _c.c_uint, _c.POINTER(_c.c_int)]),
    "glGetShaderInfoLog": (None, [_c.c_uint, _c.c_int, _c.POINTER(_c.c_int), _c.c_char_p]),
    "glDeleteShader": (None, [_c.c_uint]),
    "glCreateProgram": (_c.c_uint, []),
    "glAttachShader": (None, [_c.c_uint, _c.c_uint]),
    "glLinkProgram": (None, [_c.c_uint]),
    "glGetProgramiv": (None, [_c.c_uint, _c.c_uint, _c.POINTER(_c.c_int)]),
    "glGetProgramInfoLog": (None, [_c.c_uint, _c.c_int, _c.POINTER(_c.c_int), _c.c_char_p]),
    "glDeleteProgram": (None, [_c.c_uint]),
    "glGetActiveUniform": (None, [_c.c_uint, _c.c_uint, _c.c_int, _c.POINTER(_c.c_int),
                                  _c.POINTER(_c.c_int), _c.POINTER(_c.c_uint), _c.c_char_p]),
    "glGetUniformLocation": (_c.c_int, [_c.c_uint, _c.c_char_p]),
    "glProgramUniform1i": (None, [_c.c_uint, _c.c_int, _c.c_int]),
    "glProgramUniform1ui": (None, [_c.c_uint, _c.c_int, _c.c_uint]),
    "glProgramUniform1f": (None, [_c.c_uint, _c.c_int, _c.c_float]),
    "glUseProgram": (None, [_c.c_uint]),
    "glDispatchCompute": (None, [_c.c_uint, _c.c_uint, _c.c_uint]),
}
_THREADS = {"glMaxShaderCompilerThreadsKHR": (None, [_c.c_uint]),
            "glMaxShaderCompilerThreadsARB": (None, [_c.c_uint])}
glraw.add_signatures({**_SIGNATURES, **_THREADS})
_gl = glraw.function


def parallel_available(ctx) -> bool:
    """Whether ctx's driver compiles on threads of its own (the extension, and every entry
    point here reached), after asking it to use as many as it likes."""
    exts = getattr(ctx, "extensions", None) or set()
    if not any(e in exts for e in EXTENSIONS) or any(_gl(n) is None for n in _SIGNATURES):
        return False
    threads = _gl("glMaxShaderCompilerThreadsKHR") or _gl("glMaxShaderCompilerThreadsARB")
    if threads is None:
        return False
    threads(ALL_THREADS)
    return True


def _get(kind: str, obj: int, what: int) -> int:
    v = _c.c_int(0)
    (_gl("glGetShaderiv") if kind == "shader" else _gl("glGetProgramiv"))(obj, what, _c.byref(v))
    return v.value


def _log(kind: str, obj: int) -> str:
    buf = _c.create_string_buffer(max(1, _get(kind, obj, INFO_LOG_LENGTH)))
    (_gl("glGetShaderInfoLog") if kind == "shader" else _gl("glGetProgramInfoLog"))(obj, len(buf), None, buf)
    return buf.value.decode(errors="replace").strip()


class Compiling:
    """A compute program the driver is compiling and linking (start())."""

    def __init__(self, source: str):
        self.source = source
        self.shader = _gl("glCreateShader")(COMPUTE_SHADER)
        self.program = _gl("glCreateProgram")()
        text = source.encode()
        _gl("glShaderSource")(self.shader, 1, _c.byref(_c.c_char_p(text)), _c.byref(_c.c_int(len(text))))
        _gl("glCompileShader")(self.shader)
        _gl("glAttachShader")(self.program, self.shader)
        _gl("glLinkProgram")(self.program)

    def done(self) -> bool:
        """Whether the driver reports it compiled (never waits).  NVIDIA's then still
        links it at finish(), on the calling thread (notes/gl.md, "Compiles")."""
        return bool(_get("program", self.program, COMPLETION_STATUS))

    def finish(self) -> "RawProgram":
        """The program, once the driver is done (waits for it); BuildError with the
        driver's log where the compile or the link failed (nothing is kept then)."""
        try:
            if not _get("shader", self.shader, COMPILE_STATUS):
                raise BuildError(f"GLSL compute compile/link failed: {_log('shader', self.shader)[:2000]}",
                                 self.source)
            if not _get("program", self.program, LINK_STATUS):
                raise BuildError(f"GLSL compute compile/link failed: {_log('program', self.program)[:2000]}",
                                 self.source)
        except BaseException:
            self.discard()
            raise
        _gl("glDeleteShader")(self.shader)       # the program keeps what it needs
        program, self.program, self.shader = self.program, 0, 0
        return RawProgram(program)

    def discard(self) -> None:
        """Give it back unfinished or unwanted (a config the search did not reach)."""
        if self.shader:
            _gl("glDeleteShader")(self.shader)
        if self.program:
            _gl("glDeleteProgram")(self.program)
        self.shader = self.program = 0


def start(source: str) -> Compiling:
    """Begin compiling `source` in the context current in this thread; returns at once
    where the driver compiles in parallel (parallel_available)."""
    return Compiling(source)


class RawUniform:
    """A uniform of a RawProgram: setting .value writes it (glProgramUniform)."""

    def __init__(self, program: int, location: int, gl_type: int):
        self._program, self._location, self._type = program, location, gl_type
        self._value = None

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v) -> None:
        if self._type == FLOAT:
            _gl("glProgramUniform1f")(self._program, self._location, float(v))
        elif self._type == UINT:
            _gl("glProgramUniform1ui")(self._program, self._location, int(v))
        else:                                  # int, bool, samplers: one integer
            _gl("glProgramUniform1i")(self._program, self._location, int(v))
        self._value = v


class RawProgram:
    """A linked compute program of the current context, by its GL name."""

    def __init__(self, glo: int):
        self.glo = glo
        self._uniforms = self._find_uniforms()

    def _find_uniforms(self) -> dict:
        found = {}
        name = _c.create_string_buffer(256)
        for i in range(_get("program", self.glo, ACTIVE_UNIFORMS)):
            length, size, kind = _c.c_int(0), _c.c_int(0), _c.c_uint(0)
            _gl("glGetActiveUniform")(self.glo, i, len(name), _c.byref(length), _c.byref(size),
                                      _c.byref(kind), name)
            location = _gl("glGetUniformLocation")(self.glo, name.value)
            if location >= 0:
                found[name.value.decode()] = RawUniform(self.glo, location, kind.value)
        return found

    def get(self, name: str, default=None):
        return self._uniforms.get(name, default)

    def run(self, group_x: int = 1, group_y: int = 1, group_z: int = 1) -> None:
        _gl("glUseProgram")(self.glo)
        _gl("glDispatchCompute")(group_x, group_y, group_z)

    def release(self) -> None:
        if self.glo:
            _gl("glDeleteProgram")(self.glo)
            self.glo = 0
