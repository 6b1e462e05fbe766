"""What each GL path does with float32 subnormals (|x| < 1.18e-38), as docs/semantics.md
says: on llvmpipe every fragment-family path (the render-target path in GLSL with either
fetch, the image path, ARBfp assembly) reads subnormal inputs as zero and flushes
subnormal results to zero, and the compute family keeps both, equal to numpy's float32.

The assertions hold on llvmpipe only (what was measured); on another renderer the test
skips with what it saw there (`pytest -rs tests/test_gl_subnormals.py` on a GPU machine
prints it, for docs/semantics.md)."""
import numpy as np
import pytest

import shadertune
from shadertune.core.problem import Problem

TINY = np.float32(1e-39)           # subnormal: float32's smallest normal is 1.18e-38
PATHS = {                           # path -> (rule on a config of the space at 8x8x8, flushes on llvmpipe)
    "fragment mrt glsl texelFetch": (lambda c: c["family"] == "fragment" and c["out"] == "mrt"
                                     and c["lang"] == "glsl" and c["fetch"] == "texelFetch", True),
    "fragment mrt glsl texture": (lambda c: c["family"] == "fragment" and c["out"] == "mrt"
                                  and c["lang"] == "glsl" and c["fetch"] == "texture", True),
    "fragment image": (lambda c: c["family"] == "fragment" and c["out"] == "image", True),
    "fragment mrt arbfp": (lambda c: c["family"] == "fragment" and c["lang"] == "arbfp", True),
    "compute ssbo": (lambda c: c["family"] == "compute" and c["b_src"] == "ssbo", False),
    "compute buffer texture": (lambda c: c["family"] == "compute" and c["b_src"] == "texture", False),
}


def _cases():
    """(name, A, B, the element of C that is subnormal in numpy's float32)."""
    A1, B1 = np.zeros((8, 8), np.float32), np.eye(8, dtype=np.float32)
    A1[0, 0] = TINY                                          # a subnormal input in A
    A2, B2 = np.eye(8, dtype=np.float32), np.zeros((8, 8), np.float32)
    B2[0, 0] = TINY                                          # a subnormal input in B
    A3, B3 = np.zeros((8, 8), np.float32), np.zeros((8, 8), np.float32)
    A3[1, 0], B3[0, 1] = 1e-20, 1e-19                        # normal x normal -> subnormal
    return [("input in A", A1, B1, (0, 0)), ("input in B", A2, B2, (0, 0)),
            ("product", A3, B3, (1, 1))]


def test_each_gl_path_flushes_or_keeps_subnormals_as_documented(gl, tmp_path):
    cfgs = gl.space(Problem(8, 8, 8)).configs()
    renderer = gl.device().renderer
    seen = {}
    for path, (rule, flushes) in PATHS.items():
        cfg = next((c for c in cfgs if rule(c)), None)
        if cfg is None:
            seen[path] = "no config on this device"
            continue
        got = []
        for case, A, B, at in _cases():
            C = shadertune.matmul(A, B, config=dict(cfg), db=tmp_path / "s.sqlite")
            ref = (A @ B)[at]
            assert ref != 0 and abs(ref) < np.finfo(np.float32).tiny        # numpy keeps it
            got.append((case, float(C[at]), float(ref)))
        kept = all(g == r for _, g, r in got)
        zero = all(g == 0.0 for _, g, _ in got)
        seen[path] = "kept" if kept else "flushed" if zero else f"mixed {got}"
        if "llvmpipe" in renderer:
            assert seen[path] == ("flushed" if flushes else "kept"), (path, got)
    if "llvmpipe" not in renderer:
        pytest.skip(f"subnormals on {renderer}: {seen}")
