"""The GL roofline of the image path (texture fetches and storage-buffer loads), the
storage-buffer load-rate microbenchmark, and the software-renderer flag."""
import numpy as np
import pytest

from shadertune.core import roofline as rl
from shadertune.backends.gl import microbench as rgl
from shadertune.backends.gl import roofline as glr
from shadertune.backends.gl.image import roofline as image_roofline
from shadertune.backends.gl.mrt import roofline as mrt_roofline

CEIL = {"fragment_fma_gflops": 1943.0, "fetch_gtexels": 31.7, "ssbo_gloads": 40.0}


def image(**kw):
    return {"out": "image", "block_h": 8, "block_w": 16, "a_src": "texture", "b_src": "ssbo", **kw}


def test_image_load_counts_by_hand():
    # per A texel (4 k): 8 A vec4 from the texture, 16 B vec4 (4 k x 4 texels) from the buffer
    assert image_roofline.gl_image_load_counts(image()) == (2 * 4 * 128, 8, 16)
    assert image_roofline.gl_image_load_counts(image(a_src="ssbo")) == (1024, 0, 24)
    assert image_roofline.gl_image_load_counts(image(b_src="texture")) == (1024, 24, 0)
    # a pass of 256 k: 64 steps, and the block's 32 C texels read back once (imageLoad)
    assert image_roofline.gl_image_load_counts(image(np=256)) == (2 * 256 * 128, 64 * 8 + 32, 64 * 16)
    # np is clamped to K rounded up to 4, as the layout does
    assert image_roofline.gl_image_load_counts(image(np=256), K=30) == image_roofline.gl_image_load_counts(image(np=32))


def test_image_roofline_is_bound_by_the_slowest_unit():
    r = glr.gl_config_roofline(image(), CEIL)
    # alu: 1024 / 1943; fetch: 8 / 31.7; ssbo: 16 / 40 -> alu is the slowest
    assert r["bound"] == "alu" and r["gflops"] == pytest.approx(1943.0)
    assert r["flops_per_fetch"] == 128 and r["flops_per_load"] == 64
    slow_ssbo = glr.gl_config_roofline(image(), dict(CEIL, ssbo_gloads=10.0))
    assert slow_ssbo["bound"] == "ssbo" and slow_ssbo["gflops"] == pytest.approx(1024 / 16 * 10.0)
    tex = glr.gl_config_roofline(image(b_src="texture"), CEIL)
    assert tex["bound"] == "fetch" and tex["gflops"] == pytest.approx(1024 / 24 * 31.7)
    # the best MRT blocking is bound at 21.3 flops a fetch; an 8x16 block from textures at 42.7
    assert image_roofline.flops_per_fetch(image(b_src="texture")) == pytest.approx(2 * mrt_roofline.flops_per_fetch(
        {"mc": "1x4", "mrt_h": 4, "mrt_w": 2}))


def test_image_roofline_needs_the_load_rate_only_where_it_loads():
    no_ssbo = {k: v for k, v in CEIL.items() if k != "ssbo_gloads"}
    assert glr.gl_config_roofline(image(b_src="texture"), no_ssbo)["bound"] == "fetch"
    with pytest.raises(KeyError, match="ssbo_gloads"):
        glr.gl_config_roofline(image(), no_ssbo)
    with pytest.raises(ValueError, match="block"):
        image_roofline.gl_image_load_counts(image(block_w=6))
    with pytest.raises(ValueError, match="operand source"):
        image_roofline.gl_image_load_counts(image(a_src="pbo"))


def test_ceilings_say_whether_they_are_a_roofline():
    gpu = rl.store.new({"backend": "gl", "renderer": "NVIDIA H200", "software_renderer": False},
                       {"fetch_gtexels": 31.7})
    cpu = rl.store.new({"backend": "gl", "renderer": "llvmpipe", "software_renderer": True},
                       {"fetch_gtexels": 0.4})
    cuda = rl.store.new({"backend": "cuda", "renderer": "H200"}, {"cuda_fma_gflops": 65000.0})
    assert rl.software_reason(gpu) is None and "llvmpipe" in rl.software_reason(cpu)
    assert rl.software_reason(rl.merge(cpu, cuda), "gl") and rl.software_reason(rl.merge(cpu, cuda), "cuda") is None
    assert rl.software_reason(rl.merge(gpu, cuda)) is None and rl.software_reason(cuda) is None


def test_the_measured_device_carries_the_flag(gl_backend):
    dev = rgl.device_of(gl_backend.ctx)
    assert dev["software_renderer"] == ("llvmpipe" in dev["renderer"].lower())


def test_ssbo_load_rate_loads_what_it_counts(gl_backend):
    r = rgl.fragment_ssbo_rate(gl_backend.ctx, size=16, tex_size=16, fetches=4, target_ms=0.5, repeats=2,
                               max_iters=4, return_output=True)
    ref = rgl.fetch_reference(r["texels"], 16, r["fetches"], r["iters"], pattern="matmul")
    np.testing.assert_allclose(r["output"], ref, rtol=1e-5)
    assert r["gloads"] > 0 and r["gbytes_per_s"] == pytest.approx(16 * r["gloads"])
