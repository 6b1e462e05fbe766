"""Narrowed spaces for search-quality studies on a subspace."""
import pytest

from shadertune.problem import Problem
from shadertune.search.restrict import RestrictedBackend, narrow, parse_fix


def test_parse_fix():
    assert parse_fix(["glsl=330", "unroll=4,full", "fetch=texelFetch"]) == {
        "glsl": (330,), "unroll": (4, "full"), "fetch": ("texelFetch",)}
    with pytest.raises(ValueError, match="KNOB=VALUE"):
        parse_fix(["glsl"])


def test_narrowed_gl_space(gl_backend):
    p = Problem(64, 64, 64)
    full = gl_backend.space(p)
    rb = RestrictedBackend(gl_backend, parse_fix(["glsl=330", "fetch=texelFetch", "unroll=4"]))
    sub = rb.space(p)
    assert 0 < len(sub) < len(full)
    assert all(c["glsl"] == "330" and c["fetch"] == "texelFetch" and c["unroll"] == 4 for c in sub)
    assert sub.phases.start is None or sub.why_invalid(sub.phases.start) is None
    assert rb.name == "gl" and rb.device() == gl_backend.device()
    with pytest.raises(ValueError, match="unknown knobs"):
        narrow(full, {"colour": ("red",)})
    with pytest.raises(ValueError, match="none of"):
        narrow(full, {"mc": ("3x3",)})
