"""The GL compute family (family=compute) on llvmpipe: every knob value, odd shapes,
both transposes, alpha/beta, stacked batches, passes and split-K, against float64.

Configs come from the space itself: for each problem, a seeded greedy cover takes
space configs until every value of every compute knob has been built and run.
"""
import random

import numpy as np
import pytest

import shadertune
from shadertune.backends.gl import GLBackend
from shadertune.backends.gl.compute.layout import ComputeLayout
from shadertune.backends.gl.compute.space import compute_space
from shadertune.backends.gl.paths import predict_ms
from shadertune.backends.gl.space import gl_space
from shadertune.core.problem import Problem
from shadertune.search.restrict import narrow

from numerics import rel_err

# ragged everywhere; transposed A; transposed B and a batch; both, with a deep K (passes,
# splits); a larger one for the 256 blocks and vec 4
PROBLEMS = [Problem(37, 53, 29), Problem(40, 36, 64, trans_a=True),
            Problem(33, 44, 48, trans_b=True, batch=3), Problem(18, 20, 2100, trans_a=True, trans_b=True),
            Problem(200, 152, 40)]


@pytest.fixture(scope="module")
def backend():
    return GLBackend()


def cover(space, want: set, seed=0) -> list:
    """Space configs of the compute family until every (knob, value) of `want` that some
    valid config holds appears in one of them (greedy, seeded); `want` keeps the rest."""
    part, _ = space.parts["compute"]
    configs = [c for c in space.configs() if c["family"] == "compute"]
    random.Random(seed).shuffle(configs)
    chosen = []
    for c in configs:
        new = {(k, c[k]) for k in part.knobs} & want
        if new:
            chosen.append(c)
            want -= new
    return chosen


def reference(p: Problem, A, B, C, alpha, beta):
    a64, b64 = A.astype(np.float64), B.astype(np.float64)
    prod = np.matmul(np.swapaxes(a64, -1, -2) if p.trans_a else a64,
                     np.swapaxes(b64, -1, -2) if p.trans_b else b64)
    return alpha * prod + (beta * C if beta else 0.0)


@pytest.mark.slow
def test_every_knob_value_is_right_on_odd_shapes(backend):
    """Every value of every compute knob is built and checked against float64 on some
    problem; values a problem's space prunes are left to the others."""
    part, _ = backend.space(PROBLEMS[0]).parts["compute"]
    want = {(k, v) for k, dom in part.knobs.items() if k != "np" for v in dom}
    want |= {("np", "passes")}                      # np's values are per K: one multi-pass config
    for problem in PROBLEMS:
        space = backend.space(problem)
        rng = np.random.default_rng(7)
        a_shape, b_shape = problem.stored_shapes
        A = rng.uniform(-1, 1, a_shape).astype(np.float32)
        B = rng.uniform(-1, 1, b_shape).astype(np.float32)
        C = rng.uniform(-1, 1, problem.out_shape).astype(np.float32)
        chosen = cover(space, want)
        if ("np", "passes") in want:
            multi = [c for c in space.configs() if c["family"] == "compute" and c["np"] < problem.K]
            if multi:
                chosen.append(multi[0])
                want.discard(("np", "passes"))
        for i, cfg in enumerate(chosen):
            alpha, beta = ((1.0, 0.0), (2.0, 0.5), (-1.5, 1.0))[i % 3]
            with backend.build(problem, cfg) as k:
                got = k.run(A, B, C if beta else None, alpha=alpha, beta=beta)
            assert got.shape == problem.out_shape
            err = rel_err(got, reference(problem, A, B, C, alpha, beta))
            assert err < 1e-5, (problem.key, cfg.to_dict(), err)
    assert not want, f"knob values no test problem built: {sorted(want)}"


def test_a_checked_run_poisons_c_and_times_itself(backend):
    p = Problem(40, 48, 32)
    cfg = next(c for c in backend.space(p).configs() if c["family"] == "compute" and c["ks"] == 1)
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (40, 32)).astype(np.float32)
    B = rng.uniform(-1, 1, (32, 48)).astype(np.float32)
    with backend.build(p, cfg) as k:
        k.load(A, B)
        k.poison()
        assert np.isnan(k.read(0)).all()            # every element no invocation writes stays NaN
        C, ms = k.checked_run(A, B)
        assert ms > 0 and rel_err(C, A.astype(np.float64) @ B) < 1e-5
        times = k.time(repeats=2, warmup=0)
        assert len(times) == 2 and min(times) > 0


def test_split_k_reduces_in_one_extra_dispatch(backend):
    p = Problem(16, 16, 512)
    space = backend.space(p)
    split = max((c for c in space.configs() if c["family"] == "compute"), key=lambda c: c["ks"])
    assert split["ks"] > 1
    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, (16, 512)).astype(np.float32)
    B = rng.uniform(-1, 1, (512, 16)).astype(np.float32)
    C = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    with backend.build(p, split) as k:
        assert k.reducer is not None and k.w_buf is not None
        got = k.run(A, B, C, alpha=0.5, beta=-2.0)
    assert rel_err(got, 0.5 * (A.astype(np.float64) @ B) - 2.0 * C) < 1e-5


def test_stacked_products_run_as_one_dispatch(backend, monkeypatch, tmp_path):
    built = []
    real = GLBackend.build

    def record(self, problem, config):
        built.append((problem, config["family"]))
        return real(self, problem, config)
    monkeypatch.setattr(GLBackend, "build", record)
    rng = np.random.default_rng(9)
    A = rng.standard_normal((4, 30, 20)).astype(np.float32)
    B = rng.standard_normal((20, 17)).astype(np.float32)          # one B for every product
    out = np.ones((4, 30, 17), np.float32)
    got = shadertune.matmul(A, B, out=out, alpha=2.0, beta=0.5, db=tmp_path / "none.sqlite")
    ref = 2.0 * np.matmul(A.astype(np.float64), B) + 0.5
    assert got is out and rel_err(out, ref) < 1e-5
    assert built == [(Problem(30, 17, 20, batch=4), "compute")]


def test_family_is_one_word_away(backend, monkeypatch, tmp_path):
    built = []
    real = GLBackend.build

    def record(self, problem, config):
        built.append(config["family"])
        return real(self, problem, config)
    monkeypatch.setattr(GLBackend, "build", record)
    rng = np.random.default_rng(2)
    A = rng.standard_normal((24, 20)).astype(np.float32)
    B = rng.standard_normal((20, 28)).astype(np.float32)
    for family in ("fragment", "compute"):
        got = shadertune.matmul(A, B, config={"family": family}, db=tmp_path / "none.sqlite")
        assert rel_err(got, A.astype(np.float64) @ B) < 1e-5
    assert built == ["fragment", "compute"]
    space = narrow(backend.space(Problem(24, 28, 20)), {"family": ("fragment",)})
    assert {c["family"] for c in space.configs()} == {"fragment"} and "compute" not in space.parts


def test_without_compute_shaders_the_family_drops_out(backend):
    limits = dict(backend.device().limits, compute=False)
    space = gl_space(Problem(32, 32, 32), limits)
    assert space.knobs["family"] == ("fragment",)
    assert all(c["family"] == "fragment" for c in space.configs())
    with pytest.raises(ValueError, match="compute shaders"):
        gl_space(Problem(32, 32, 32, batch=2), limits)


def test_device_limits_prune_the_space(backend):
    limits = dict(backend.device().limits)
    p = Problem(256, 256, 256)
    small = compute_space(p, dict(limits, max_compute_shared_bytes=16 << 10, max_compute_invocations=128))
    for c in small.configs():
        L = ComputeLayout.plan(p, {**c.to_dict(), "unroll": c["unroll"]})
        assert L.shared_bytes <= 16 << 10 and L.threads <= 128
    # a split only where the grid leaves units idle: 600^2 has at least 9 tiles, 2 waves of
    # one unit's; 16 units leave room for splits
    q = Problem(600, 600, 256)
    assert all(c["ks"] == 1 for c in compute_space(q, dict(limits, compute_units=1)).configs())
    assert any(c["ks"] > 1 for c in compute_space(q, dict(limits, compute_units=16)).configs())


def test_cost_model_ranks_like_the_h200():
    """On an H200-like device (132 units, 48 KB shared): the square's fastest predicted
    configs are compute configs of 64-128 tiles, and a deep-K 512 x 512 x 65536 product
    is predicted faster split than whole."""
    limits = {"compute": True, "max_compute_shared_bytes": 49152, "max_compute_invocations": 1024,
              "max_compute_groups": [65535] * 3, "max_ssbo_bytes": 1 << 31,
              "max_texture_buffer_texels": 1 << 27, "compute_units": 132, "software_renderer": False}
    p = Problem(512, 512, 65536)
    space = compute_space(p, limits).narrowed({"lanes_n": (8,), "pad": (4,), "unroll": ("full",),
                                              "a_src": ("ssbo",), "b_src": ("ssbo",)})
    configs = [{**c.to_dict(), "family": "compute"} for c in space.configs()]
    ms = predict_ms(p, configs, limits)
    best = configs[int(np.argmin(ms))]
    assert best["ks"] > 1
    whole = [m for m, c in zip(ms, configs) if c["ks"] == 1]
    assert min(ms) < 0.5 * min(whole)
