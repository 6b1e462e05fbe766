"""What the library says, through the channels a numpy user expects: a float64 call on GL
(computed in float32) warns as numpy does (warnings: PrecisionWarning), and first-use
tuning logs what it times and for how long (logging: the "shadertune" logger)."""
import logging
import warnings

import numpy as np
import pytest
from subproc import run_python

import shadertune
from shadertune.errors import PrecisionWarning
from shadertune.perfmodel import FirstUse


def test_float64_on_gl_warns_as_numpy_does(gl, rng, tmp_path):
    """PrecisionWarning goes through the warnings module's own registry, as numpy's
    warnings do: the default filter shows it once per calling line, "always" on every
    call, and "error" raises on every call (not only the first of the process)."""
    A, B = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))          # float64
    db = tmp_path / "s.sqlite"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shadertune.matmul(A.astype(np.float32), B.astype(np.float32), db=db)
        assert not caught                                                    # float32: nothing
        for _ in range(3):
            C = shadertune.matmul(A, B, db=db)
    assert [w.category for w in caught] == [PrecisionWarning] * 3
    assert "float64 operands on the gl backend are computed and returned in float32" in str(caught[0].message)
    assert caught[0].filename == __file__                                    # the caller's line
    assert C.dtype == np.float32 and np.allclose(C, A @ B, rtol=1e-4, atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            with pytest.raises(PrecisionWarning):
                shadertune.matmul(A, B, db=db)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            shadertune.matmul(A, B, db=db)                                   # one line: once
    assert [w.category for w in caught] == [PrecisionWarning]


def test_errors_is_an_attribute_after_import_shadertune_alone():
    code = ("import shadertune, warnings; "
            "assert issubclass(shadertune.errors.PrecisionWarning, UserWarning); "
            "warnings.simplefilter('error', shadertune.errors.PrecisionWarning); print('ok')")
    r = run_python(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_first_use_logs_what_it_times_and_for_how_long(gl, caplog, rng, tmp_path):
    A = rng.standard_normal((12, 8)).astype(np.float32)
    B = rng.standard_normal((8, 10)).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="shadertune"):
        shadertune.matmul(A, B, db=tmp_path / "s.sqlite", tune=FirstUse(k=2, seconds=30))
    lines = [r.getMessage() for r in caplog.records if r.name == "shadertune.first_use"]
    assert lines[0].startswith("tuning 12x10x8 float32 on first use on gl (")
    assert "up to 2 configs, at most 30 s" in lines[0] and str(tmp_path / "s.sqlite") in lines[0]
    assert lines[1].startswith("tuned 12x10x8 float32 on first use: 2 configs timed in ")
    assert "GFLOP/s" in lines[1]


def test_the_front_door_documents_every_argument():
    """help(shadertune.matmul), help(shadertune.tune), help(shadertune.explain): numpy-style
    sections, every parameter described, every parameter annotated."""
    import inspect
    import re
    for fn in (shadertune.matmul, shadertune.tune, shadertune.explain):
        doc = inspect.getdoc(fn)
        for section in ("Parameters", "Returns", "Raises", "Examples"):
            assert f"\n{section}\n{'-' * len(section)}\n" in doc, (fn.__name__, section)
        params = doc.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
        described = {n.strip() for line in re.findall(r"^(\w[\w, ]*) :", params, re.M) for n in line.split(",")}
        sig = inspect.signature(fn)
        assert set(sig.parameters) <= described, (fn.__name__, set(sig.parameters) - described)
        assert all(p.annotation is not inspect.Parameter.empty for p in sig.parameters.values()), fn.__name__
        assert sig.return_annotation is not inspect.Signature.empty
