"""Roofline: the per-config GL model, the CUDA model, the ceilings store, and the
microbenchmarks themselves at tiny sizes on whatever EGL gives (llvmpipe in CI)."""
import json

import numpy as np
import pytest

from shadertune.core import roofline as rl
from shadertune.backends.cuda import microbench as rcuda, roofline as cudar
from shadertune.backends.gl import microbench as rgl, roofline as glr
from shadertune.backends.gl.mrt import roofline as mrt_roofline
from shadertune.backends.gl.mrt.layout import MC_SHAPES
from shadertune.core.problem import Problem

CEIL = {"fragment_fma_gflops": 1942.9, "fetch_gtexels": 21.12, "compute_fma_gflops": 62342.0,
        "cuda_fma_gflops": 65119.4, "cuda_dram_gbs": 4234.3, "cuda_fma64_gflops": 33043.4}


# --- the GL model -----------------------------------------------------------------

@pytest.mark.parametrize("mc,h,w", [("1x4", 4, 2), ("2x2", 2, 4), ("2x2", 4, 2)])
def test_flops_per_fetch_of_the_best_blockings_is_21_3(mc, h, w):
    assert mrt_roofline.flops_per_fetch({"mc": mc, "mrt_h": h, "mrt_w": w}) == pytest.approx(64 / 3)


def test_flops_per_fetch_hand_counts():
    # 1x1, one target: a 4-k A texel + a 4-k B texel feed 4 FMAs = 8 flops.
    assert mrt_roofline.flops_per_fetch({"mc": "1x1", "mrt_h": 1, "mrt_w": 1}) == 4.0
    # 1x2: kb = 2, so two B texels per A texel: 3 fetches, 2*4*2 = 16 flops.
    assert mrt_roofline.flops_per_fetch({"mc": "1x2", "mrt_h": 1, "mrt_w": 1}) == pytest.approx(16 / 3)
    # 1x3: kb = 1, four B texels per A texel: 5 fetches, 2*4*3 = 24 flops.
    assert mrt_roofline.flops_per_fetch({"mc": "1x3", "mrt_h": 1, "mrt_w": 1}) == pytest.approx(24 / 5)


def test_per_pass_partial_sum_reads_are_counted():
    cfg = {"mc": "1x4", "mrt_h": 4, "mrt_w": 2, "np": 64}
    flops, fetches = mrt_roofline.gl_fetch_counts(cfg)
    assert flops == 2 * 64 * 4 * 8
    assert fetches == 16 * 12 + 8              # 16 texel steps of 12 fetches, + 8 partial sums
    assert mrt_roofline.flops_per_fetch(cfg) < mrt_roofline.flops_per_fetch({"mc": "1x4", "mrt_h": 4, "mrt_w": 2})
    # A longer pass amortises the partial-sum reads.
    assert mrt_roofline.flops_per_fetch(dict(cfg, np=1024)) > mrt_roofline.flops_per_fetch(cfg)


def test_np_is_clamped_to_padded_K_as_the_layout_does():
    cfg = {"mc": "1x4", "mrt_h": 1, "mrt_w": 1, "np": 256}
    assert mrt_roofline.gl_fetch_counts(cfg, K=10) == mrt_roofline.gl_fetch_counts(dict(cfg, np=12))


def test_model_packing_matches_the_gl_layout():
    layout = pytest.importorskip("shadertune.backends.gl.mrt.layout")
    for mc in MC_SHAPES:
        mc_h, mc_w, ka, kb = layout.packing(mc)
        flops, fetches = mrt_roofline.gl_fetch_counts({"mc": mc, "mrt_h": 1, "mrt_w": 1})
        assert (flops, fetches) == (2 * ka * mc_h * mc_w, 1 + ka // kb), mc


def test_gl_config_roofline_picks_the_lower_ceiling():
    cfg = {"mc": "1x4", "mrt_h": 4, "mrt_w": 2}
    r = glr.gl_config_roofline(cfg, CEIL)
    assert r["bound"] == "fetch"
    assert r["gflops"] == pytest.approx(21.12 * 64 / 3)
    fast_fetch = dict(CEIL, fetch_gtexels=1000.0)
    r = glr.gl_config_roofline(cfg, {"ceilings": fast_fetch})    # stored-file shape works too
    assert r == {"gflops": 1942.9, "bound": "alu", "flops_per_fetch": pytest.approx(64 / 3)}


def test_gl_config_roofline_errors_are_clear():
    with pytest.raises(ValueError, match="unknown mc '3x3'"):
        glr.gl_config_roofline({"mc": "3x3"}, CEIL)
    with pytest.raises(KeyError, match="fetch_gtexels"):
        glr.gl_config_roofline({"mc": "1x4"}, {"fragment_fma_gflops": 1.0})


def test_best_gl_roofline_respects_eight_draw_buffers():
    top = mrt_roofline.best_roofline(CEIL)
    assert top["flops_per_fetch"] == pytest.approx(64 / 3)
    assert top["config"]["mrt_h"] * top["config"]["mrt_w"] <= 8


def test_cuda_roofline_memory_bound_for_thin_problems_alu_bound_for_big():
    thin = cudar.cuda_problem_roofline(Problem(4096, 1, 4096), CEIL)       # matrix-vector
    assert thin["bound"] == "memory"
    assert thin["gflops"] == pytest.approx(4234.3 * Problem(4096, 1, 4096).flops / Problem(4096, 1, 4096).bytes)
    big = cudar.cuda_problem_roofline({"M": 4096, "N": 4096, "K": 4096}, CEIL)
    assert big == {"gflops": 65119.4, "bound": "alu", "intensity": pytest.approx(4096 / 6)}
    assert cudar.cuda_problem_roofline(Problem(4096, 4096, 4096, "float64"), CEIL)["gflops"] == 33043.4


# --- the store --------------------------------------------------------------------

def _measurement():
    return rl.store.new({"backend": "gl", "vendor": "v", "renderer": "r", "driver": "d"},
                        {"fragment_fma_gflops": 10.0, "fetch_gtexels": 0.2}, {"x": {"iters": 1}})


def test_save_load_roundtrip(tmp_path):
    m = _measurement()
    p = rl.save(tmp_path / "sub" / "ceilings.json", m)
    assert rl.load(p) == json.loads(json.dumps(m))
    assert m["created"].startswith("20") and "T" in m["created"]


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.pop("ceilings"), "missing required field 'ceilings'"),
    (lambda d: d.pop("device"), "missing required field 'device'"),
    (lambda d: d["ceilings"].update(fetch_gtexels=0), "ceilings.fetch_gtexels must be a positive finite number"),
    (lambda d: d.update(schema=7), "schema 7 is not supported"),
])
def test_load_refuses_bad_files_naming_file_and_field(tmp_path, mutate, match):
    d = _measurement()
    mutate(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(rl.CeilingsError, match=match) as e:
        rl.load(p)
    assert str(p) in str(e.value)


def test_load_refuses_missing_non_json_binary_and_deep_files(tmp_path):
    with pytest.raises(rl.CeilingsError, match="nope.json: no such file"):
        rl.load(tmp_path / "nope.json")
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(rl.CeilingsError, match="not a ceilings file: invalid JSON at line 1"):
        rl.load(tmp_path / "x.json")
    (tmp_path / "b.json").write_bytes(b"\x00\xff\xfe\x80")
    with pytest.raises(rl.CeilingsError, match="not UTF-8 text"):
        rl.load(tmp_path / "b.json")
    (tmp_path / "d.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(rl.CeilingsError, match="nested too deeply"):
        rl.load(tmp_path / "d.json")


def test_the_software_renderer_flag_round_trips_and_merges(tmp_path):
    g = _measurement()
    assert rl.software_reason(g) is None
    soft = rl.mark_software(g)
    assert soft["device"]["software_renderer"] is True and "software_renderer" not in g["device"]
    rl.save(tmp_path / "s.json", soft)
    back = rl.load(tmp_path / "s.json")
    assert "measured on a software renderer" in rl.software_reason(back)
    # merged with a GPU's CUDA ceilings: no roofline for GL kernels, one for CUDA's
    c = rl.store.new({"backend": "cuda", "renderer": "H"}, {"cuda_fma_gflops": 5.0, "cuda_dram_gbs": 3.0})
    m = rl.load(rl.save(tmp_path / "m.json", rl.merge(soft, c)))
    assert rl.software_reason(m, "gl") and rl.software_reason(m, "cuda") is None
    assert rl.software_reason(rl.merge(g, c)) is None
    bad = dict(g, device=dict(g["device"], software_renderer="yes"))
    with pytest.raises(rl.CeilingsError, match="device.software_renderer must be true or false"):
        rl.store.validate(bad)


def test_ceiling_lines_of_each_model():
    assert glr.gl_ceiling_lines(CEIL)[0] == ("fragment FMA peak 1,943", 1942.9)
    label, v = glr.gl_ceiling_lines({"ceilings": CEIL})[1]
    assert v == pytest.approx(21.12 * 64 / 3) and "21.3 flops/fetch" in label
    assert glr.gl_ceiling_lines({"fragment_fma_gflops": 5.0}) == [("fragment FMA peak 5", 5.0)]
    assert cudar.cuda_ceiling_lines(CEIL) == [("CUDA FMA peak 65,119", 65119.4)]
    assert cudar.cuda_ceiling_lines({"fetch_gtexels": 1.0}) == []


def test_merge_keeps_both_backends():
    g = _measurement()
    c = rl.store.new({"backend": "cuda", "renderer": "H"}, {"cuda_fma_gflops": 5.0, "cuda_dram_gbs": 3.0})
    m = rl.merge(g, c)
    assert set(m["ceilings"]) == {"fragment_fma_gflops", "fetch_gtexels", "cuda_fma_gflops", "cuda_dram_gbs"}
    assert set(m["device"]["backends"]) == {"gl", "cuda"}
    rl.store.validate(m)


# --- the microbenchmarks, tiny, on the GL at hand ------------------------------------

@pytest.fixture(scope="module")
def ctx():
    from shadertune.errors import ContextError
    try:
        return rgl.context()
    except ContextError as e:
        pytest.skip(f"no GL context: {e}")


def test_fragment_fma_shader_does_the_flops_it_counts(ctx):
    size, chains, unroll, iters = 8, 4, 3, 5
    r = rgl.fragment_fma_peak(ctx, size=size, chains=chains, unroll=unroll, iters=iters,
                                target_ms=0, repeats=2, return_output=True)
    assert r["iters"] == iters and r["gflops"] > 0 and len(r["times_ms"]) == 2
    y, x = np.mgrid[0:size, 0:size] + 0.5                  # gl_FragCoord is the pixel centre
    seed = np.stack([x, y, x, y], axis=-1) * 1e-3
    want = rgl.fma_reference(seed, chains, iters * unroll)
    np.testing.assert_allclose(r["output"], want, rtol=1e-5)
    # One step fewer would be visible: the check can fail.
    assert not np.allclose(r["output"], rgl.fma_reference(seed, chains, iters * unroll - 1), rtol=1e-5)


@pytest.mark.parametrize("pattern", rgl.FETCH_PATTERNS)
def test_fetch_shader_fetches_what_it_counts(ctx, pattern):
    size, fetches, iters = 16, 3, 4
    r = rgl.fragment_fetch_rate(ctx, size=size, tex_size=8, fetches=fetches, iters=iters,
                                target_ms=0, repeats=2, return_output=True, pattern=pattern)
    assert r["gtexels"] > 0 and r["iters"] == iters and r["pattern"] == pattern
    want = rgl.fetch_reference(r["texels"], size, fetches, iters, pattern)
    np.testing.assert_allclose(r["output"], want, rtol=1e-5)
    others = [rgl.fetch_reference(r["texels"], size, fetches, iters, q) for q in rgl.FETCH_PATTERNS if q != pattern]
    assert not any(np.allclose(r["output"], o, rtol=1e-5) for o in others)


def test_fetch_rate_refuses_bad_parameters(ctx):
    with pytest.raises(ValueError, match="power of two"):
        rgl.fragment_fetch_rate(ctx, size=4, tex_size=12)
    with pytest.raises(ValueError, match="pattern"):
        rgl.fragment_fetch_rate(ctx, size=4, pattern="zigzag")


def test_compute_fma_shader_does_the_flops_it_counts(ctx):
    if "GL_ARB_compute_shader" not in ctx.extensions and ctx.version_code < 430:
        pytest.skip("no compute shaders on this GL")
    r = rgl.compute_fma_peak(ctx, groups=2, local_size=32, chains=2, unroll=2, iters=3,
                               target_ms=0, repeats=2, return_output=True)
    seed = np.repeat(np.arange(64)[:, None] * 1e-6, 4, axis=1)
    np.testing.assert_allclose(r["output"], rgl.fma_reference(seed, 2, 6), rtol=1e-5)


def test_calibration_doubles_until_the_target(ctx):
    r = rgl.fragment_fma_peak(ctx, size=4, chains=1, unroll=1, iters=1, target_ms=1e9,
                                max_iters=16, repeats=1)
    assert r["iters"] == 16                              # stopped by max_iters, not before


def test_measure_gl_tiny_stores_device_date_and_positive_ceilings(ctx, tmp_path):
    m = rgl.measure_gl(ctx, preset="tiny")
    assert m["device"]["backend"] == "gl" and m["device"]["renderer"] == ctx.info["GL_RENDERER"]
    assert m["ceilings"]["fragment_fma_gflops"] > 0 and m["ceilings"]["fetch_gtexels"] > 0
    assert "compute_fma" in m["details"]
    got = rl.load(rl.save(tmp_path / "c.json", m))
    assert got["ceilings"] == pytest.approx(m["ceilings"])
    # Ceilings measured here feed the model directly.
    assert glr.gl_config_roofline({"mc": "2x2", "mrt_h": 2, "mrt_w": 2}, got)["gflops"] > 0


# --- CUDA: measured on a GPU, a clear skip elsewhere ----------------------------------

def test_cuda_unavailable_is_a_clear_error_or_it_measures():
    ok, why = rcuda.available()
    if not ok:
        assert why
        with pytest.raises(rcuda.CudaUnavailable, match="CuPy|CUDA|device"):
            rcuda.measure_cuda(preset="tiny")
        return
    m = rcuda.measure_cuda(preset="tiny", fp64=False)          # pragma: no cover (GPU machines)
    assert m["ceilings"]["cuda_fma_gflops"] > 0 and m["ceilings"]["cuda_dram_gbs"] > 0
