"""Hand-tuned GL baselines run through the same driver and compute the right product."""
import numpy as np
import pytest

from shadertune.backends.gl import handtuned
from shadertune.core.problem import Problem
from numerics import rel_err


@pytest.mark.parametrize("name", list(handtuned.BASELINES))
@pytest.mark.parametrize("np_", [None, 8])
def test_baselines_are_correct(gl_backend, name, np_, rng):
    p = Problem(37, 61, 129)
    A, B, C = rng.standard_normal((37, 129)), rng.standard_normal((129, 61)), rng.standard_normal((37, 61))
    with handtuned.build(gl_backend, p, name, np=np_) as k:
        assert rel_err(k.run(A, B), A @ B) <= 1e-5
        assert rel_err(k.run(A, B, C, alpha=0.5, beta=-2.0), 0.5 * (A @ B) - 2.0 * C) <= 1e-5
        assert len(k.time(repeats=2, warmup=0)) == 2


def test_layout_headers_and_unknown_name(gl_backend):
    for path in handtuned.BASELINES.values():
        from shadertune.core.templates import read
        assert {"mc", "ka", "kb", "mrt_h", "mrt_w"} <= set(handtuned.declared_layout(read(path)))
    with pytest.raises(ValueError, match="unknown hand-tuned baseline"):
        handtuned.build(gl_backend, Problem(4, 4, 4), "cublas")


def test_assembly_path_reports_support(gl_backend):
    ok, note = handtuned.assembly_support(gl_backend)
    assert isinstance(ok, bool) and note
    assert ok or "skipped" in note


def test_assembly_baseline_runs_or_skips_with_a_note(gl_backend, rng):
    ok, note = handtuned.assembly_support(gl_backend)
    p = Problem(37, 61, 129)
    if not ok:
        from shadertune.errors import InvalidConfig
        with pytest.raises(InvalidConfig, match="assembly baseline skipped"):
            handtuned.build_assembly(gl_backend, p)
        pytest.skip(note)
    A, B, C = rng.standard_normal((37, 129)), rng.standard_normal((129, 61)), rng.standard_normal((37, 61))
    for np_ in (None, 8):
        with handtuned.build_assembly(gl_backend, p, np=np_) as k:
            assert rel_err(k.run(A, B), A @ B) <= 1e-5
            assert rel_err(k.run(A, B, C, alpha=0.5, beta=-2.0), 0.5 * (A @ B) - 2.0 * C) <= 1e-5
            times = k.time(repeats=2, warmup=1)
            assert len(times) == 2 and all(t > 0 for t in times)
