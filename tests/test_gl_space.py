"""The GL space with the image path: pruning from device limits (faked), its enumeration,
its start point and the phased order over both paths."""
import itertools

import pytest

from shadertune.backends.gl.image.space import REGISTER_BUDGET
from shadertune.backends.gl.space import IMAGE_BODY_BUDGET, default_config, gl_space, mrt_default_config, with_defaults
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.search.restrict import narrow

# what an H200's NVIDIA driver reports (GL 4.5), and a device with nothing past GL 3.3
FULL = {"max_draw_buffers": 8, "max_texture_size": 32768, "max_texture_units": 32, "gl_version": 450,
        "image_store": True, "ssbo": True, "fbo_no_attachments": True, "max_image_units": 8,
        "max_fragment_image_uniforms": 8, "max_combined_output_resources": 16,
        "max_fragment_ssbo_blocks": 16, "max_ssbo_bindings": 16, "max_ssbo_bytes": 1 << 31}
GL33 = {"max_draw_buffers": 8, "max_texture_size": 16384, "max_texture_units": 16, "gl_version": 330}
P = Problem(32, 32, 16)


def image_configs(space):
    return [c for c in space if c["out"] == "image"]


def image_start(space, unroll=1):
    """Where the phased search starts the image path (its first valid config in domain order)."""
    from shadertune.search.budget import Tracker
    from shadertune.search.phased import _start
    fixed = {"family": "fragment", "out": "image", "glsl": space.constants["image_glsl"],
             "fetch": "texelFetch", "unroll": unroll}
    return _start(space, Tracker(lambda c: None), fixed, space.phases.plan_for("fragment"))


def test_without_image_limits_the_knobs_drop_out_and_mrt_stays():
    s = gl_space(P, GL33)
    assert s.knobs["out"] == ("mrt",) and s.knobs["block_h"] == (0,) and s.knobs["a_src"] == ("texture",)
    cfgs = s.configs()
    assert cfgs and all(c["out"] == "mrt" for c in cfgs)
    start = default_config(P, s)
    assert start["out"] == "mrt" and (start["mc"], start["mrt_h"], start["mrt_w"]) == ("1x4", 4, 2)
    assert s.phases.plan_for("fragment").start == start     # the fragment family's plan starts there
    # the same MRT configs as a device with image support has
    full_mrt = [c for c in gl_space(P, dict(FULL, max_texture_units=16, max_texture_size=16384))
                if c["out"] == "mrt" and c["glsl"] == "330"]
    assert sorted(map(repr, full_mrt)) == sorted(repr(c) for c in cfgs if c["glsl"] == "330")


@pytest.mark.parametrize("missing", ["image_store", "fbo_no_attachments", "max_fragment_image_uniforms",
                                     "max_image_units"])
def test_each_image_requirement_is_needed(missing):
    s = gl_space(P, {k: v for k, v in FULL.items() if k != missing})
    assert s.knobs["out"] == ("mrt",) and not image_configs(s)


def test_no_storage_buffers_means_texture_operands_only():
    for limits in ({**FULL, "ssbo": False}, {**FULL, "max_fragment_ssbo_blocks": 0}):
        s = gl_space(P, limits)
        imgs = image_configs(s)
        assert imgs and {(c["a_src"], c["b_src"]) for c in imgs} == {("texture", "texture")}
        assert image_start(s)["b_src"] == "texture"
    one = image_configs(gl_space(P, {**FULL, "max_fragment_ssbo_blocks": 1}))
    assert {(c["a_src"], c["b_src"]) for c in one} == {("texture", "texture"), ("ssbo", "texture"),
                                                       ("texture", "ssbo")}


def test_storage_buffer_size_limit_prunes_large_operands():
    p = Problem(64, 8, 16)                     # A: 4 KB, B: 512 B
    s = gl_space(p, {**FULL, "max_ssbo_bytes": 1000})
    srcs = {(c["a_src"], c["b_src"]) for c in image_configs(s)}
    assert ("texture", "ssbo") in srcs and not any(a == "ssbo" for a, _ in srcs)


def test_an_older_context_writes_the_image_path_in_glsl_330():
    s = gl_space(P, {**FULL, "gl_version": 430})
    imgs = image_configs(s)
    assert imgs and {c["glsl"] for c in imgs} == {"330"}
    assert {c["glsl"] for c in s if c["out"] == "mrt"} == {"330"}


def test_image_path_restrictions():
    s = gl_space(P, FULL)
    imgs = image_configs(s)
    assert {c["glsl"] for c in imgs} == {"450"} and {c["fetch"] for c in imgs} == {"texelFetch"}
    assert {(c["mc"], c["mrt_h"], c["mrt_w"]) for c in imgs} == {("1x4", 1, 1)}
    assert all(c["block_h"] * c["block_w"] <= REGISTER_BUDGET for c in imgs)
    assert all(c["unroll"] in (1, 2, 4) and c["np"] % 4 == 0 for c in imgs)
    assert all(int(c["unroll"]) * c["block_h"] * c["block_w"] * 4 <= IMAGE_BODY_BUDGET for c in imgs)
    mrt = [c for c in s if c["out"] == "mrt"]
    assert all((c["block_h"], c["block_w"], c["a_src"], c["b_src"]) == (0, 0, "texture", "texture")
               for c in mrt)
    why = s.why_invalid(Config(out="image", glsl="450", fetch="texelFetch", unroll=1, np=16, mc="1x4",
                               mrt_h=1, mrt_w=1, block_h=16, block_w=16, a_src="texture", b_src="texture"))
    assert "register budget" in why
    # a skinny C: blocks taller than C is wide in rows are mostly padding
    skinny = gl_space(Problem(3, 256, 16), FULL)
    assert {c["block_h"] for c in image_configs(skinny)} == {1, 2}


def test_enumeration_equals_the_filtered_product():
    """GLSpace walks each path's product; it must find exactly the valid points of the
    product of every domain (a narrowed space keeps every rule's corner in reach)."""
    s = narrow(gl_space(Problem(20, 24, 36), FULL),
               {"unroll": (1, "full"), "np": (4, 8), "mc": ("1x4", "2x2"), "mrt_h": (1, 2), "mrt_w": (1,),
                "block_h": (0, 2, 16), "block_w": (0, 4)})
    product = [Config(dict(zip(s.knobs, v))) for v in itertools.product(*s.knobs.values())]
    valid = [c for c in product if s.why_invalid(c) is None]
    assert any(c["out"] == "image" for c in valid) and any(c["out"] == "mrt" for c in valid)
    assert sorted(map(repr, s.configs())) == sorted(map(repr, valid))


def test_old_configs_read_as_mrt_configs():
    old = Config(glsl="330", fetch="texelFetch", unroll=2, np=16, mc="1x4", mrt_h=4, mrt_w=2)
    s = gl_space(P, FULL)
    assert old in s and with_defaults(old) in s
    assert with_defaults(old)["out"] == "mrt"
    assert s.why_invalid(dict(old, out="image")) is not None      # no MRT knobs on the image path


def test_phased_starts_the_image_path_at_a_16x8_block_and_mrt_at_the_default():
    p = Problem(4096, 4096, 32)
    s = gl_space(p, FULL)
    plan = s.phases.plan_for("fragment")
    assert plan.outer[0] == "out" and s.knobs["out"][0] == "image"
    assert ("block_h", "block_w") in plan.groups and ("a_src", "b_src") in plan.groups
    start = image_start(s)
    assert start in s and (start["block_h"], start["block_w"]) == (16, 8)   # the H200's best block
    assert (start["a_src"], start["b_src"]) == ("texture", "ssbo") and start["np"] == 4
    default = mrt_default_config(p, s)
    assert default["out"] == "mrt" and plan.start == default
    # what matmul runs untuned is the image path's start block where the device has it
    image = default_config(p, s)
    assert image["out"] == "image" and (image["block_h"], image["block_w"], image["b_src"]) == (16, 8, "ssbo")
    # where no image config has the outer values, there is no start (and no scan of the product)
    from shadertune.search.budget import Tracker
    from shadertune.search.phased import _start
    assert _start(s, Tracker(lambda c: None), {"family": "fragment", "out": "image", "glsl": "330",
                                                "fetch": "texelFetch", "unroll": 1}, plan) is None


@pytest.mark.parametrize("K", [29, 30, 33, 34])
def test_every_valid_config_generates(K):
    """The space counts a pass's steps as the layout does: np clamped to K first.  With
    mc 2x2 (2 k a texel) and K = 30, np = 32 covers 30 k in 15 steps, so unroll 2 is
    refused by the space, as the code generator refuses it."""
    from shadertune.backends.gl.paths import path_of
    p = Problem(24, 20, K)
    space = gl_space(p, GL33)
    for cfg in space.configs():
        path = path_of(cfg)
        path.source(path.plan(p, cfg), cfg)                   # raises InvalidConfig if refused
    trap = with_defaults(Config(glsl="330", fetch="texelFetch", unroll=2, np=32, mc="2x2",
                                mrt_h=1, mrt_w=1))
    if K == 30:
        assert "unroll" in space.why_invalid(trap)
        assert space.why_invalid(trap.replace(unroll=1)) is None
