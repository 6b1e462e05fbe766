"""Config resolution (shadertune.front.requests): the same rules and errors for every backend."""
import json
import re

import numpy as np
import pytest

import shadertune
from shadertune.front import matmul as api
from shadertune.core.config import Config
from shadertune.front.requests import parse_request, resolve
from shadertune.core.problem import Problem

from numerics import rel_err

P = Problem(64, 64, 64)


@pytest.fixture(scope="module")
def gl():
    return api.backend("gl")


@pytest.fixture(scope="module")
def cuda():
    return api.backend("cuda")      # no GPU needed: the space uses sm_90 limits


def test_partial_config_fills_from_the_default(gl):
    d = gl.default_config(P)
    assert resolve(gl, P, {"np": 32}) == d.replace(np=32)
    assert resolve(gl, P, '{"glsl": "450"}') == d.replace(glsl="450")


def test_filled_knobs_move_to_fit_the_ones_given(gl):
    """mrt_w = 4 with the default's mrt_h = 4 is 16 targets (> 8): mrt_h moves, not mrt_w."""
    d = gl.default_for(P, {"mrt_w": 4})          # an MRT knob: the MRT path's default
    assert d["out"] == "mrt"
    cfg = resolve(gl, P, {"mrt_w": 4})
    assert cfg == d.replace(mrt_w=4, mrt_h=2)
    cfg = resolve(gl, P, {"np": 2})            # 2 k per pass: only 2x2 packing, unroll 1
    assert cfg["np"] == 2 and cfg in gl.space(P)


def test_partial_cuda_config(cuda):
    d = cuda.default_config(P)
    cfg = resolve(cuda, P, {"BK": 8})
    assert cfg["BK"] == 8 and cfg in cuda.space(P)
    assert sum(cfg[k] != d[k] for k in d) <= 3


def test_values_spelt_as_text_or_numbers(gl):
    assert resolve(gl, P, {"glsl": 330, "unroll": "4"})["glsl"] == "330"
    assert resolve(gl, P, {"glsl": 330, "unroll": "4"})["unroll"] == 4


def test_presets(gl, cuda):
    assert resolve(gl, P, "fast") == gl.default_config(P) == resolve(gl, P, "default")
    assert resolve(cuda, P, "fast") == cuda.default_config(P)
    ffma = resolve(cuda, P, "ffma")
    assert ffma["MMA"] == 0 and ffma in cuda.space(P)
    jiang = resolve(gl, P, "jiang")
    assert (jiang["mc"], jiang["mrt_h"], jiang["mrt_w"], jiang["np"], jiang["unroll"]) == ("1x1", 1, 1, 4, 1)
    assert resolve(gl, Problem(5, 6, 7), "naive")["np"] == 8
    A, B = np.random.default_rng(0).standard_normal((2, 9, 13)), np.ones((13, 5))
    for name in ("jiang", "naive"):
        assert rel_err(shadertune.matmul(A, B, config=name), A @ B) <= 1e-5


def _cases(backend):
    """(spec, exception, message) for one kind of bad config each, spelt for `backend`."""
    name = backend.name
    typo, good = ("unrol", "unroll") if name == "gl" else ("BMM", "BM")
    knob, bad_value = ("unroll", 3) if name == "gl" else ("BK", 12)
    return [
        (3, TypeError, "matmul: config must be 'auto', 'default', a preset name, a dict or Config "
                       "of knobs, or JSON text, got int"),
        ("fsat", ValueError, f"matmul: unknown config 'fsat' for the {name} backend; did you mean "
                             f"'fast'? (expected 'auto', 'default', a preset: "),
        ('{"np": ', ValueError, "matmul: config is not valid JSON (Expecting value: line 1 column 7"),
        ("[1, 2]", ValueError, f"matmul: unknown config '[1, 2]' for the {name} backend"),
        ({typo: 4}, ValueError, f"matmul: unknown config knob '{typo}' for the {name} backend; did "
                                f"you mean '{good}'? (its knobs: "),
        ({knob: bad_value}, ValueError, f"matmul: config {{'{knob}': {bad_value}}} is not valid for "
                                        f"A(64, 64) @ B(64, 64) on the {name} backend: "
                                        f"{knob}={bad_value} not in ["),
        ({1: 2}, TypeError, "matmul: config knob names must be str, got 1"),
    ]


@pytest.mark.parametrize("backend", ["gl", "cuda"])
def test_bad_configs_give_the_same_errors_on_both_backends(backend):
    """Through matmul itself: the CUDA path checks the config before it needs a GPU."""
    A = np.ones((64, 64), np.float32)
    for spec, exc, message in _cases(api.backend(backend)):
        with pytest.raises(exc) as e:
            shadertune.matmul(A, A, backend=backend, config=spec)
        assert str(e.value).startswith(message), (spec, str(e.value))


def test_invalid_mix_names_the_callers_shape_and_the_filled_knobs(gl):
    with pytest.raises(ValueError) as e:
        shadertune.matmul(np.ones((64, 64)), np.ones((64, 64)), config={"mrt_h": 4, "mrt_w": 4})
    msg = str(e.value)
    assert msg.startswith("matmul: config {'mrt_h': 4, 'mrt_w': 4} is not valid for "
                          "A(64, 64) @ B(64, 64) on the gl backend: restriction mrt_h * mrt_w <= "
                          "max_draw_buffers (the MRT path) not met (the knobs not given were taken "
                          "from the default")


def test_explicit_config_fits_the_tiling_remainders(gl, rng, monkeypatch):
    """Issue 14 item 8: a config valid for the main tile was refused on a remainder (K = 16388,
    or M = 16385 with mrt_h = 4).  Here with a 16-texel limit: A(18, 20) @ B(20, 7) is a
    16x7x16 main tile and remainders of 2 rows and 4 k, where np = 16 and two row targets
    do not fit."""
    limits = dict(gl.device().limits, max_texture_size=16)
    monkeypatch.setattr(gl, "_device", type(gl.device())(**{**gl.device().to_dict(), "limits": limits}))
    api.clear_cache()
    cfg = {"glsl": "330", "fetch": "texelFetch", "unroll": 1, "np": 16, "mc": "2x2", "mrt_h": 2, "mrt_w": 1}
    A, B = rng.standard_normal((18, 20)), rng.standard_normal((20, 7))
    C = rng.standard_normal((18, 7)).astype(np.float32)
    ref = 0.5 * (A @ B) + 2.0 * C
    assert rel_err(shadertune.matmul(A, B, C, config=cfg, alpha=0.5, beta=2.0), ref) <= 1e-5
    with pytest.raises(ValueError, match=re.escape("is not valid for A(18, 20) @ B(20, 7) (its 16x7x16 "
                                                   "part) on the gl backend: np=32 not in")):
        shadertune.matmul(A, B, config=dict(cfg, np=32))
    api.clear_cache()


def test_parse_request_reads_config_objects_and_numpy_values(gl):
    r = parse_request(Config(np=16), gl)
    assert r.kind == "knobs" and r.knobs == Config(np=16)
    assert parse_request({"np": np.int64(16)}, gl).knobs == Config(np=16)
    assert parse_request(json.dumps({"np": 16}), gl).knobs == Config(np=16)
    assert parse_request(None, gl).kind == "default" and parse_request(" auto ", gl).kind == "auto"


# --- the compute family's partial configs (the union's held knobs) -------------------

@pytest.mark.parametrize("given", [
    {"family": "compute", "ks": 2}, {"family": "compute", "vec": 4}, {"family": "compute", "bk": 8, "db": 1},
    '{"family": "compute", "vec": 1}', Config(family="compute", vec=4), {"family": "compute", "np": 64}])
def test_partial_compute_configs_complete_to_a_whole_compute_config(gl, rng, given):
    """A compute config that leaves out the fragment knobs its family holds (lang among
    them) is completed, runs and matches numpy; its Config holds every knob."""
    p = Problem(32, 32, 64)          # splits of K pay here: few workgroups, four slabs of K
    cfg = resolve(gl, p, given)
    knobs = json.loads(given) if isinstance(given, str) else dict(given)
    assert set(cfg) == set(gl.space(p).knobs) and cfg in gl.space(p)
    assert cfg["family"] == "compute" and cfg["lang"] == "glsl" and cfg["out"] == "buffer"
    assert all(cfg[k] == v for k, v in knobs.items())
    A = rng.standard_normal((32, 64)).astype(np.float32)
    B = rng.standard_normal((64, 32)).astype(np.float32)
    assert rel_err(shadertune.matmul(A, B, config=given), A @ B) <= 1e-5


@pytest.mark.parametrize("given, conflict", [
    ({"family": "compute", "mc": "2x2"}, "family='compute' takes no mc='2x2' (it holds mc='1x4')"),
    ({"family": "compute", "out": "mrt"}, "family='compute' takes no out='mrt' (it holds out='buffer')"),
    ({"family": "compute", "glsl": "330"}, "family='compute' takes no glsl='330' (it holds glsl='450')"),
    ({"family": "compute", "np": 4}, "family='compute' takes no np=4 (its np: [64])"),
    ({"out": "buffer", "mc": "2x2"}, "the knobs given fit no family: family='fragment' takes no out='buffer'")])
def test_contradictory_partial_configs_name_the_conflict(gl, given, conflict):
    A = np.ones((64, 64), np.float32)
    with pytest.raises(ValueError) as e:
        shadertune.matmul(A, A, config=given)
    msg = str(e.value)
    assert msg.startswith("matmul: config ") and conflict in msg and "\n" not in msg
