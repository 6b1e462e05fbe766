"""Inf and NaN as numpy has them, on every GL path and channel packing: an Inf or NaN
operand, and a sum that overflows from finite operands (3e38 + 3e38), give numpy's
+-Inf and NaN, in one pass and across passes (where partial sums are carried), on
render targets in GLSL and in assembly (ARBfp on llvmpipe, NVfp where the driver has it),
on the image path and in the compute family."""
import numpy as np
import pytest

import shadertune
from shadertune.backends.gl.mrt.layout import MC_SHAPES
from shadertune.core.problem import Problem

P = Problem(9, 10, 18)          # K pads to 20: a last texel part padding; M, N odd for the 1x2-2x2 blocks


def operands(p: Problem = P):
    """Positive operands (no +Inf meets -Inf by chance) with non-finite values at the edges:
    row 0 +Inf from A[0, 0] (the first pass), row M-1 -Inf from A[M-1, K-1] (the last),
    column N-1 NaN from B[K-1, N-1], and row 1 overflowing from two finite 3e38 (k 0 and 5:
    two passes apart where a pass holds 4 k)."""
    rng = np.random.default_rng(7)
    A = rng.uniform(1.0, 2.0, (p.M, p.K)).astype(np.float32)
    B = rng.uniform(1.0, 2.0, (p.K, p.N)).astype(np.float32)
    A[0, 0] = np.inf
    A[p.M - 1, p.K - 1] = -np.inf
    B[p.K - 1, p.N - 1] = np.nan
    A[1, 0] = A[1, 5] = 3e38
    with np.errstate(over="ignore", invalid="ignore"):
        ref = A @ B
    return A, B, ref


def picks(configs):
    """Per (lang, mc): the most passes on one render target, and the largest target grid in
    one pass (a config of each kind where the space has one)."""
    chosen = {}
    for c in configs:
        key = (c["lang"], c["mc"])
        many = chosen.setdefault(key + ("passes",), c)
        if c["mrt_h"] * c["mrt_w"] == 1 and c["np"] < many["np"]:
            chosen[key + ("passes",)] = c
        wide = chosen.setdefault(key + ("grid",), c)
        if (c["mrt_h"] * c["mrt_w"], c["np"]) > (wide["mrt_h"] * wide["mrt_w"], wide["np"]):
            chosen[key + ("grid",)] = c
    return sorted(set(chosen.values()), key=lambda c: c.key)


def check(backend, configs, p: Problem = P):
    A, B, ref = operands(p)
    for cfg in configs:
        with backend.build(p, cfg) as k:
            got = k.run(A, B)
        np.testing.assert_allclose(got, ref, rtol=1e-4, equal_nan=True, err_msg=cfg.key)


def render_target_configs(backend, lang):
    space = backend.space(P)
    configs = [c for c in space.configs() if c["family"] == "fragment" and c["out"] == "mrt"
               and c["lang"] == lang]
    if not configs:
        pytest.skip(f"lang={lang} does not run in this GL context")
    assert {c["mc"] for c in configs} == set(MC_SHAPES)
    return picks(configs)


@pytest.mark.parametrize("lang", ["glsl", "arbfp", "nvfp"])
def test_render_target_kernels_keep_inf_and_nan_as_numpy(gl_backend, lang):
    """Every channel packing (mc 1x1 .. 2x2), many passes and wide target grids: in
    assembly the lanes 1x1 and 1x2 keep are summed in the last pass by a select, not a
    multiply by a 0/1 weight (0 x Inf is NaN)."""
    configs = render_target_configs(gl_backend, lang)
    assert len(configs) >= len(MC_SHAPES)
    check(gl_backend, configs)


@pytest.mark.parametrize("path,p", [("image", P), ("compute", Problem(9, 10, 40))])
def test_image_and_compute_kernels_keep_inf_and_nan_as_numpy(gl_backend, path, p):
    """The image path's most passes and its first config; the compute family's first
    config and a split of K (its reduce pass adds the splits' partial sums)."""
    configs = [c for c in gl_backend.space(p).configs() if c["family"] == "compute" or c["out"] == "image"
               if (c["family"] == "compute") == (path == "compute")]
    if not configs:
        pytest.skip(f"no {path} kernels on this device")
    chosen = {min(configs, key=lambda c: c["np"]), configs[0]}
    chosen.update([c for c in configs if c["ks"] > 1][:1])
    assert path == "image" or any(c["ks"] > 1 for c in chosen)
    check(gl_backend, sorted(chosen, key=lambda c: c.key), p)


@pytest.mark.parametrize("bad", ["overflow", "inf"])
def test_the_arbfp_reproducer(gl_backend, bad):
    """The issue's reproducer: a row of ones with two 3e38 (or one Inf) gives Inf, not NaN."""
    if "arbfp" not in gl_backend.space(Problem(4, 4, 8)).knobs["lang"]:
        pytest.skip("lang=arbfp does not run in this GL context")
    A = np.ones((4, 8), np.float32)
    if bad == "overflow":
        A[1, 0] = A[1, 4] = 3e38
    else:
        A[1, 3] = np.inf
    got = shadertune.matmul(A, np.ones((8, 4), np.float32), config={"lang": "arbfp", "mc": "1x1", "np": 8})
    with np.errstate(over="ignore"):
        ref = A @ np.ones((8, 4), np.float32)
    assert np.isposinf(got[1]).all()
    np.testing.assert_array_equal(got, ref)
