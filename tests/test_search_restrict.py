"""Narrowed spaces for search-quality studies on a subspace."""
import pytest

from shadertune.core.problem import Problem
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
    with pytest.raises(ValueError, match="unknown knob"):
        narrow(full, {"colour": ("red",)})
    with pytest.raises(ValueError, match="not in its domain"):
        narrow(full, {"mc": ("3x3",)})


def test_narrowed_cuda_space_keeps_its_rules_and_start():
    """search-quality --backend cuda: a CUDA subspace (no GPU needed to build it)."""
    from shadertune.backends.cuda import CUDABackend
    be = CUDABackend()
    p = Problem(4096, 4096, 512)
    rb = RestrictedBackend(be, parse_fix(["MMA=0", "KG=1", "KL=1", "BK=16", "ST=0,2", "BM=64,128",
                                          "BN=64,128", "PAD=4", "DB=1"]))
    sub = rb.space(p)
    full = be.space(p)
    assert 0 < len(sub) < 2000 and set(sub.configs()) <= set(full.configs())
    assert {c for c in full.configs() if all(c[k] in sub.knobs[k] for k in c)} == set(sub.configs())
    assert sub.phases.groups == full.phases.groups
    assert sub.phases.start is None or sub.why_invalid(sub.phases.start) is None
    assert rb.default_strategy == "model"
    kept = RestrictedBackend(be, parse_fix(["BK=8,16,32"])).space(p)       # the start fits: kept
    assert kept.phases.start == full.phases.start
