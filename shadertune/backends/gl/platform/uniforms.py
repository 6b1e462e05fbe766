"""Uniform writes that skip the value a program already holds.

A program keeps its uniforms' values between dispatches, and every program here has one
writer (a kernel owns its programs; the context's GL-array programs are written only
through regions._set), so a value equal to the one written last needs no GL call.  A
cached call then writes the few uniforms that changed (operand offsets, the pass's K
range) instead of the thirty it names: on a GPU each write is a driver call on the
call's host path.  Every uniform a program's writer sets must go through set_uniform:
a write beside it would leave the remembered value stale."""
from __future__ import annotations

_UNSET = object()
_LAST = "_shadertune_last"


def set_uniform(uniform, value) -> None:
    """uniform.value = value, unless the same value (of the same type) was written last."""
    last = getattr(uniform, _LAST, _UNSET)
    if last is not _UNSET and type(last) is type(value) and last == value:
        return
    uniform.value = value
    setattr(uniform, _LAST, value)


def set_uniforms(pairs) -> None:
    """set_uniform(u, v) for each (u, v) of `pairs`: one call for a list a caller keeps
    (a kernel's repeated launch, compute/driver.py), the same skips."""
    for uniform, value in pairs:
        last = getattr(uniform, _LAST, _UNSET)
        if last is _UNSET or type(last) is not type(value) or last != value:
            uniform.value = value
            setattr(uniform, _LAST, value)
