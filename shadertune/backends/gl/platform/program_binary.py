"""Compute programs as the driver's own binaries (GL 4.1 / ARB_get_program_binary).

A program compiled in one context gives its binary (glGetProgramBinary); another
context of the same driver and GPU, in any process, makes a program from it with
glProgramBinary in about a millisecond, where compiling the source again takes the
driver a third of a second for one of the compute family's shaders.  A binary the
driver no longer takes (a new driver) is refused by it: the caller compiles the source.

BinaryProgram answers what the compute family's driver asks of moderngl's
ComputeShader: get(name) -> a uniform whose .value is set, run(x, y, z), release().
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
PROGRAM_BINARY_LENGTH = 0x8741
PROGRAM_BINARY_RETRIEVABLE_HINT = 0x8257
FLOAT, UINT = 0x1406, 0x1405

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
    "glProgramParameteri": (None, [_c.c_uint, _c.c_uint, _c.c_int]),
    "glGetProgramiv": (None, [_c.c_uint, _c.c_uint, _c.POINTER(_c.c_int)]),
    "glGetProgramInfoLog": (None, [_c.c_uint, _c.c_int, _c.POINTER(_c.c_int), _c.c_char_p]),
    "glGetProgramBinary": (None, [_c.c_uint, _c.c_int, _c.POINTER(_c.c_int), _c.POINTER(_c.c_uint),
                                  _c.c_void_p]),
    "glProgramBinary": (None, [_c.c_uint, _c.c_uint, _c.c_void_p, _c.c_int]),
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
glraw.add_signatures(_SIGNATURES)
_gl = glraw.function


def available(ctx) -> bool:
    """Whether ctx's driver gives and takes program binaries (at least one format) and
    the entry points here reach it."""
    n = glraw.get_integer(ctx, 0x87FE)          # GL_NUM_PROGRAM_BINARY_FORMATS
    return bool(n) and all(_gl(name) is not None for name in _SIGNATURES)


def _log(get, obj: int) -> str:
    n = _c.c_int(0)
    (_gl("glGetShaderiv") if get == "shader" else _gl("glGetProgramiv"))(obj, INFO_LOG_LENGTH, _c.byref(n))
    buf = _c.create_string_buffer(max(1, n.value))
    (_gl("glGetShaderInfoLog") if get == "shader" else _gl("glGetProgramInfoLog"))(obj, len(buf), None, buf)
    return buf.value.decode(errors="replace").strip()


def compile_binary(source: str) -> tuple[int, bytes]:
    """(format, binary) of the compute program of `source`, compiled and linked in the
    context current in this thread; BuildError with the driver's log where it fails."""
    shader = _gl("glCreateShader")(COMPUTE_SHADER)
    program = _gl("glCreateProgram")()
    try:
        text = source.encode()
        _gl("glShaderSource")(shader, 1, _c.byref(_c.c_char_p(text)), _c.byref(_c.c_int(len(text))))
        _gl("glCompileShader")(shader)
        ok = _c.c_int(0)
        _gl("glGetShaderiv")(shader, COMPILE_STATUS, _c.byref(ok))
        if not ok.value:
            raise BuildError(f"GLSL compute compile/link failed: {_log('shader', shader)[:2000]}", source)
        _gl("glAttachShader")(program, shader)
        _gl("glProgramParameteri")(program, PROGRAM_BINARY_RETRIEVABLE_HINT, 1)
        _gl("glLinkProgram")(program)
        _gl("glGetProgramiv")(program, LINK_STATUS, _c.byref(ok))
        if not ok.value:
            raise BuildError(f"GLSL compute compile/link failed: {_log('program', program)[:2000]}", source)
        got = binary_of(program)
        if got is None:
            raise BuildError("the driver gave no program binary", source)
        return got
    finally:
        _gl("glDeleteShader")(shader)
        _gl("glDeleteProgram")(program)


def binary_of(program: int) -> tuple[int, bytes] | None:
    """(format, binary) of the linked program named `program`, or None where the driver
    gives none."""
    n = _c.c_int(0)
    _gl("glGetProgramiv")(program, PROGRAM_BINARY_LENGTH, _c.byref(n))
    if n.value <= 0:
        return None
    buf = _c.create_string_buffer(n.value)
    length, fmt = _c.c_int(0), _c.c_uint(0)
    _gl("glGetProgramBinary")(program, n.value, _c.byref(length), _c.byref(fmt), buf)
    if length.value <= 0:
        return None
    return int(fmt.value), buf.raw[:length.value]


class BinaryUniform:
    """A uniform of a BinaryProgram: setting .value writes it (glProgramUniform)."""

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


class BinaryProgram:
    """A compute program made from a binary in the current context."""

    def __init__(self, glo: int):
        self.glo = glo
        self._uniforms = self._find_uniforms()

    @classmethod
    def load(cls, fmt: int, data: bytes) -> "BinaryProgram | None":
        """The program of (fmt, data), or None where the driver refuses the binary."""
        glo = _gl("glCreateProgram")()
        if not glo:
            return None
        _gl("glProgramBinary")(glo, fmt, data, len(data))
        ok = _c.c_int(0)
        _gl("glGetProgramiv")(glo, LINK_STATUS, _c.byref(ok))
        if not ok.value:
            _gl("glDeleteProgram")(glo)
            return None
        return cls(glo)

    def _find_uniforms(self) -> dict:
        n = _c.c_int(0)
        _gl("glGetProgramiv")(self.glo, ACTIVE_UNIFORMS, _c.byref(n))
        found = {}
        name = _c.create_string_buffer(256)
        for i in range(n.value):
            length, size, kind = _c.c_int(0), _c.c_int(0), _c.c_uint(0)
            _gl("glGetActiveUniform")(self.glo, i, len(name), _c.byref(length), _c.byref(size),
                                      _c.byref(kind), name)
            text = name.value.decode()
            location = _gl("glGetUniformLocation")(self.glo, name.value)
            if location >= 0:
                found[text] = BinaryUniform(self.glo, location, kind.value)
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
