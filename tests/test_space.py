"""Space: domains, restrictions (callables and expression strings), sizes, neighbours."""
import pytest

from shadertune.config import Config
from shadertune.space import Space


def space(**kw):
    return Space({"a": (1, 2, 4), "b": ("x", "y"), "c": (1, 2)},
                 restrictions=kw.pop("restrictions", ["a * c <= limit", lambda cfg: cfg["b"] != "y" or cfg["a"] > 1]),
                 constants=kw.pop("constants", {"limit": 4}), **kw)


def test_sizes_full_and_pruned():
    s = space()
    assert s.full_size == 12
    valid = [(c["a"], c["b"], c["c"]) for c in s.configs()]
    expect = [(a, b, c) for a in (1, 2, 4) for b in "xy" for c in (1, 2)
              if a * c <= 4 and (b != "y" or a > 1)]
    assert valid == expect and len(s) == len(expect) == 8
    assert s.describe()["size"] == 8 and s.describe()["full_size"] == 12


def test_membership_and_reasons():
    s = space()
    assert Config(a=2, b="y", c=2) in s
    assert "not met" in s.why_invalid(Config(a=4, b="x", c=2))
    assert "a=3 not in" in s.why_invalid(Config(a=3, b="x", c=1))
    assert "missing knobs" in s.why_invalid({"a": 1})
    assert "unknown knobs" in s.why_invalid({"a": 1, "b": "x", "c": 1, "d": 0})
    assert s.why_invalid({"a": 1, "b": "x", "c": 1}) is None      # plain mappings work


def test_restriction_strings_are_checked_when_the_space_is_made():
    with pytest.raises(ValueError, match="unknown"):
        Space({"a": (1, 2)}, ["a < nope"])
    with pytest.raises(SyntaxError):
        Space({"a": (1, 2)}, ["a <"])
    with pytest.raises(TypeError):
        Space({"a": (1, 2)}, [42])


def test_a_failing_restriction_rejects_rather_than_crashes():
    s = Space({"a": (0, 1, 2)}, ["4 // a >= 2"])
    assert [c["a"] for c in s.configs()] == [1, 2]
    assert "failed" in s.why_invalid(Config(a=0))


def test_expression_builtins_and_constants():
    s = Space({"np": (2, 4, 6, 8)}, ["np <= ceil(K / 4) * 4", "log2(np) == int(log2(np))"],
              constants={"K": 5})
    assert [c["np"] for c in s.configs()] == [2, 4, 8]


def test_bad_spaces_are_refused():
    with pytest.raises(ValueError):
        Space({})
    with pytest.raises(ValueError, match="empty"):
        Space({"a": ()})
    with pytest.raises(ValueError, match="repeated"):
        Space({"a": (1, 1)})
    with pytest.raises(ValueError, match="shadow"):
        Space({"a": (1,)}, constants={"a": 2})
    with pytest.raises(ValueError, match="unknown knobs"):
        Space({"a": (1,)}, phases={"outer": ["b"], "refine": "a", "groups": []})


def test_neighbours_differ_in_one_knob_and_are_valid():
    s = space()
    n = s.neighbours(Config(a=2, b="x", c=2), "a")
    assert n == [Config(a=1, b="x", c=2), Config(a=2, b="x", c=2)]     # a=4 breaks a*c <= 4


def test_phase_plan_is_kept():
    plan = {"outer": ["b"], "refine": "a", "groups": [["c"]]}
    assert space(phases=plan).phases == plan
    assert space().phases is None


def test_gl_space_is_pruned_by_device_limits_and_shape(gl_backend):
    from shadertune.errors import ContextError
    from shadertune.problem import Problem
    try:
        s = gl_backend.space(Problem(16, 24, 20))
    except ContextError as e:
        pytest.skip(f"no GL context: {e}")
    assert 0 < len(s) < s.full_size
    lim = gl_backend.device().limits
    for c in s.configs():
        assert c["mrt_h"] * c["mrt_w"] <= lim["max_draw_buffers"]
        assert c["np"] <= 20
    assert {k: s.phases[k] for k in ("outer", "refine", "groups")} == {
        "outer": ["out", "glsl", "fetch", "unroll"], "refine": "np",
        "groups": [["mc"], ["mrt_h", "mrt_w"], ["block_h", "block_w"], ["a_src", "b_src"]]}
    if "start" in s.phases:                    # an optional start point must be in the space
        assert s.why_invalid(s.phases["start"]) is None
