"""Every generated GL kernel computes A @ B on shapes the blocking does not divide.

Issue #2, item 10: every mc x (mrt_w, mrt_h in 1, 2, 4, product <= 8) x np
(dividing K, not dividing K, np >= K) x unroll, against a float64 reference,
relative Frobenius error <= 1e-5, on 37x129 @ 129x61.
"""
import itertools

import numpy as np
import pytest

from shadertune.backends.gl.mrt.codegen import plan_layout
from shadertune.backends.gl.mrt.driver import MrtKernel
from shadertune.core.config import Config
from shadertune.errors import BuildError, InvalidConfig
from shadertune.core.problem import Problem

from numerics import rel_err

M, K, N = 37, 129, 61
MRTS = [(h, w) for h, w in itertools.product((1, 2, 4), repeat=2) if h * w <= 8]


def np_cases(mc):
    # K = 129 = 3 * 43: a multiple of ka that divides the padded K, one that does not, and >= K
    return {"1x4": {"divides": 12, "ragged": 8, "whole": 132},
            "2x2": {"divides": 6, "ragged": 10, "whole": 132}}.get(mc, {"divides": 12, "ragged": 8, "whole": 132})


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((M, K))
    B = rng.standard_normal((K, N))
    return A, B, A @ B


@pytest.mark.parametrize("unroll", [1, "full"])
@pytest.mark.parametrize("np_kind", ["divides", "ragged", "whole"])
@pytest.mark.parametrize("mrt", MRTS, ids=lambda m: f"mrt{m[0]}x{m[1]}")
@pytest.mark.parametrize("mc", ["1x1", "1x2", "1x3", "1x4", "2x2"])
def test_every_knob_combination(gl_backend, data, mc, mrt, np_kind, unroll):
    A, B, ref = data
    np_ = np_cases(mc)[np_kind]
    cfg = Config(glsl="330", fetch="texelFetch", unroll=unroll, np=np_, mc=mc, mrt_h=mrt[0], mrt_w=mrt[1])
    problem = Problem(M, N, K)
    why = gl_backend.space(problem).why_invalid(cfg)
    if why is None:
        k = gl_backend.build(problem, cfg)
    else:
        # a long pass fully unrolled over many targets is pruned (slow to compile and
        # to run on real drivers), but the code generator must still get it right
        assert unroll == "full" and "instruction budget" in why
        k = MrtKernel(gl_backend.ctx, problem, cfg, plan_layout(Problem(M, N, K), cfg), gl_backend.source(problem, cfg))
    try:
        out = k.run(A, B)
        assert out.shape == (M, N) and out.dtype == np.float32
        assert np.isfinite(out).all(), "an output element was not written"
        assert rel_err(out, ref) <= 1e-5
    finally:
        k.release()


@pytest.mark.parametrize("glsl,fetch,unroll", [("450", "texture", 2), ("330", "texture", 4),
                                               ("450", "texelFetch", "full")])
@pytest.mark.parametrize("mc", ["1x1", "1x3", "2x2"])
def test_profiles_and_partial_unroll(gl_backend, data, glsl, fetch, unroll, mc):
    A, B, ref = data
    cfg = Config(glsl=glsl, fetch=fetch, unroll=unroll, np=32, mc=mc, mrt_h=2, mrt_w=2)
    k = gl_backend.build(Problem(M, N, K), cfg)
    try:
        assert rel_err(k.run(A, B), ref) <= 1e-5
    finally:
        k.release()


def test_alpha_beta(gl_backend, data, rng):
    A, B, ref = data
    C = rng.standard_normal((M, N))
    cfg = Config(glsl="330", fetch="texelFetch", unroll=1, np=12, mc="1x4", mrt_h=2, mrt_w=4)
    with gl_backend.build(Problem(M, N, K), cfg) as k:
        assert rel_err(k.run(A, B, C, alpha=-0.5, beta=2.0), -0.5 * ref + 2.0 * C) <= 1e-5
        # a single pass applies alpha and beta too
    with gl_backend.build(Problem(M, N, K), cfg.replace(np=132)) as k:
        assert rel_err(k.run(A, B, C, alpha=3.0, beta=-1.0), 3.0 * ref - C) <= 1e-5


def test_timing_returns_every_repeat(gl_backend, data):
    A, B, _ = data
    with gl_backend.build(Problem(M, N, K), gl_backend.default_config(Problem(M, N, K))) as k:
        k.run(A, B)
        times = k.time(repeats=4, warmup=1)
    assert len(times) == 4 and all(t > 0 for t in times)


MRT_DEFAULT = Config(glsl="330", fetch="texelFetch", unroll=4, np=32, mc="1x4", mrt_h=4, mrt_w=2)


def test_poisoned_output_shows_unwritten_elements(gl_backend, data):
    """The driver poisons its targets: skipping the passes leaves NaN, not stale results."""
    A, B, _ = data
    with gl_backend.build(Problem(M, N, K), MRT_DEFAULT) as k:
        k.run(A, B)
        k.poison()
        assert np.isnan(k.read(0)).all() and np.isnan(k.read(1)).all()


def test_configs_written_before_the_image_path_are_mrt_configs(gl_backend, data):
    """A config without out/block/source knobs (stored or written before they existed)
    means Jiang's MRT path, and the space says so."""
    A, B, ref = data
    p = Problem(M, N, K)
    assert MRT_DEFAULT in gl_backend.space(p)
    with gl_backend.build(p, MRT_DEFAULT) as k:
        assert type(k) is MrtKernel and k.config["out"] == "mrt" and k.config["block_h"] == 0
        assert rel_err(k.run(A, B), ref) <= 1e-5


def test_invalid_configs_are_refused_before_compiling(gl_backend):
    p = Problem(M, N, K)
    with pytest.raises(InvalidConfig, match="max_draw_buffers"):
        gl_backend.build(p, Config(glsl="330", fetch="texelFetch", unroll=1, np=8, mc="1x4", mrt_h=4, mrt_w=4))
    with pytest.raises(InvalidConfig, match="np"):
        gl_backend.build(p, Config(glsl="330", fetch="texelFetch", unroll=1, np=6, mc="1x4", mrt_h=1, mrt_w=1))
    with pytest.raises(InvalidConfig, match="float32"):
        gl_backend.build(Problem(4, 4, 4, dtype="float64"), gl_backend.default_config(Problem(4, 4, 4)))


def test_compile_errors_are_typed(gl_backend):
    # The fragment family's default: on a GPU the backend's own default is the compute family,
    # which the MRT kernel class cannot plan.
    cfg = MRT_DEFAULT
    with pytest.raises(BuildError, match="GLSL"):
        MrtKernel(gl_backend.ctx, Problem(8, 8, 8), cfg, plan_layout(Problem(8, 8, 8), cfg),
                 "#version 330 core\nvoid main() { this is not glsl; }\n")


def test_space_is_pruned_and_reported(gl_backend):
    s = gl_backend.space(Problem(M, N, K))
    assert 0 < len(s) < s.full_size
    assert all(c["mrt_h"] * c["mrt_w"] <= 8 for c in s)
    assert all(c["np"] <= 132 for c in s)
    assert s.phases.plan_for("fragment").refine == "np"


@pytest.mark.parametrize("mrt", [(4, 2), (2, 4), (1, 1)], ids=lambda m: f"mrt{m[0]}x{m[1]}")
@pytest.mark.parametrize("np_", [12, 40, 124])
def test_row_major_operands_go_up_as_they_are(gl_backend, np_, mrt):
    """1x4 with K and N multiples of 4: A and B are uploaded straight from the caller's
    arrays into their textures' corners, the padding around them zeroed, also in pooled
    textures that held NaN before."""
    rng = np.random.default_rng(5)
    M_, N_, K_ = 37, 64, 124                      # np 12 and 40 leave Kp > K; M leaves Mp > M
    A = rng.standard_normal((M_, K_)).astype(np.float32)
    B = rng.standard_normal((K_, N_)).astype(np.float32)
    p = Problem(M_, N_, K_)
    cfg = Config(glsl="330", fetch="texelFetch", unroll=1, np=np_, mc="1x4", mrt_h=mrt[0], mrt_w=mrt[1])
    with gl_backend.build(p, cfg) as k:
        assert k.layout.a_row_major and k.layout.b_row_major
        for tex in (k.tex_a, k.tex_b):                                  # NaN, then back to the pool
            tex.write(np.full((tex.height, tex.width, 4), np.nan, np.float32))
    with gl_backend.build(p, cfg) as k:
        out = np.empty((M_, N_), np.float32)
        assert k.run(A, B, out=out) is out
    assert rel_err(out, A.astype(np.float64) @ B) <= 1e-5
