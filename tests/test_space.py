"""Space: domains, restrictions (expressions, pyATF callables, declared and whole-config
callables), early pruning, sizes, neighbours, the phase plan."""
import itertools
import random

import pytest

from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import OK, Result
from shadertune.core.space import PhasePlan, Space, restriction


def space(**kw):
    return Space({"a": (1, 2, 4), "b": ("x", "y"), "c": (1, 2)},
                 restrictions=kw.pop("restrictions", ["a * c <= limit", lambda cfg: cfg["b"] != "y" or cfg["a"] > 1]),
                 constants=kw.pop("constants", {"limit": 4}), **kw)


def product_filtered(s: Space) -> set:
    """The definition of a space: every point of the product that why_invalid accepts."""
    pts = (Config(dict(zip(s.knobs, v))) for v in itertools.product(*s.knobs.values()))
    return {c for c in pts if s.why_invalid(c) is None}


def test_sizes_full_and_pruned():
    s = space()
    assert s.full_size == 12
    valid = {(c["a"], c["b"], c["c"]) for c in s.configs()}
    expect = {(a, b, c) for a in (1, 2, 4) for b in "xy" for c in (1, 2)
              if a * c <= 4 and (b != "y" or a > 1)}
    assert valid == expect and len(s) == len(expect) == 8
    assert s.describe()["size"] == 8 and s.describe()["full_size"] == 12


def test_enumeration_is_depth_first_in_the_binding_order():
    s = space()
    order = s.binding_order()
    assert sorted(order) == ["a", "b", "c"]
    keys = [tuple(s.knobs[k].index(c[k]) for k in order) for c in s.configs()]
    assert keys == sorted(keys)


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


def test_pyatf_callables_read_knobs_and_constants_by_parameter_name():
    def block_shape(BM, WM):
        "warp tiles divide the block tile"
        return BM % WM == 0

    def fits(BM, limit):
        return BM <= limit
    s = Space({"BM": (16, 32, 64, 128), "WM": (16, 32, 48)}, [block_shape, fits], {"limit": 64})
    assert {(c["BM"], c["WM"]) for c in s} == {(16, 16), (32, 16), (32, 32), (64, 16), (64, 32)}
    assert s.why_invalid(Config(BM=32, WM=48)) == "restriction warp tiles divide the block tile not met"
    assert "fits not met" in s.why_invalid(Config(BM=128, WM=16))
    with pytest.raises(ValueError, match="must all be knobs or constants"):
        Space({"BM": (16,)}, [lambda BM, nope: True])


def test_declared_knobs_and_whole_config_callables():
    calls = []

    @restriction(knobs=["a"])
    def small_a(cfg):
        calls.append(dict(cfg))
        return cfg["a"] < 3
    s = Space({"a": (1, 2, 3, 4), "b": tuple(range(50))}, [small_a, lambda cfg: cfg["b"] % 2 == 0])
    s.binding_order()                                    # (samples pass rates)
    calls.clear()
    assert {(c["a"], c["b"]) for c in s} == {(a, b) for a in (1, 2) for b in range(0, 50, 2)}
    # checked as soon as 'a' is bound, once per value: a=3, 4 never reach the 50 values of b
    assert sorted(d["a"] for d in calls) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="declares unknown knobs"):
        Space({"a": (1,)}, [restriction(knobs=["z"])(lambda cfg: True)])


def test_a_rule_is_checked_as_soon_as_its_knobs_are_bound():
    """Dead subtrees are cut at their root: a rule on two knobs that rejects most
    pairs means the rules on the other knobs run on the surviving pairs only."""
    seen = {"pair": 0, "rest": 0}

    def pair(a, b):
        seen["pair"] += 1
        return a == b

    def rest(c, d, a):
        seen["rest"] += 1
        return (c + d + a) % 3 != 0
    doms = {"a": tuple(range(10)), "b": tuple(range(10)), "c": tuple(range(10)), "d": tuple(range(10))}
    s = Space(doms, [pair, rest])
    s.binding_order()                                    # (samples pass rates)
    seen.update(pair=0, rest=0)
    n = len(s)
    # each pair of (a, b) once; 'rest' only below the 10 pairs that pass, once per (c, d)
    assert seen == {"pair": 100, "rest": 1000}
    assert s.binding_order()[-2:] in (["c", "d"], ["d", "c"])        # free knobs go last
    assert n == len(product_filtered(s)) == sum((c + d + a) % 3 != 0 for a in range(10)
                                                for c in range(10) for d in range(10))


def random_spaces(seed: int, n: int, knobs: int = 5):
    """`n` seeded random spaces: small integer domains, rules of every form reading
    random knobs (so some knobs are read by no rule, and some groups are linked by none)."""
    rng = random.Random(seed)
    for trial in range(n):
        knobs_ = {f"k{i}": tuple(rng.sample(range(1, 9), rng.randint(1, 4)))
                  for i in range(rng.randint(1, knobs))}
        names = list(knobs_)
        rules = []
        for _ in range(rng.randint(0, 4)):
            picked = rng.sample(names, rng.randint(1, len(names)))
            m = rng.randint(2, 4)
            form = rng.choice(["expr", "atf", "declared", "whole", "constants"])
            if form == "expr":
                rules.append(f"({' + '.join(picked)} + lim) % {m} != 0")
            elif form == "atf":
                rules.append(eval(f"lambda {', '.join(picked)}, lim: ({' + '.join(picked)} + lim) % {m} != 0"))
            elif form == "declared":
                rules.append(restriction(knobs=picked)(
                    lambda cfg, p=tuple(picked), m=m: (sum(cfg[k] for k in p) + 1) % m != 0))
            elif form == "whole":
                rules.append(lambda cfg, p=tuple(picked), m=m: (sum(cfg[k] for k in p) + 1) % m != 0)
            else:                            # a rule of constants alone: all or nothing
                rules.append(f"lim % {m} != {rng.randint(0, 1)}")
        yield trial, Space(knobs_, rules, {"lim": 1})


def test_enumeration_equals_the_filtered_product_on_random_spaces():
    for trial, s in random_spaces(7, 25):
        got = s.configs()
        assert len(got) == len(set(got)), trial
        assert set(got) == product_filtered(s), (trial, s.knobs)


def test_counting_makes_no_config_and_equals_the_filtered_product():
    """count() multiplies the counts of knob groups no rule links (a knob no rule reads
    multiplies by its domain) and walks each group; len() is count()."""
    for trial, s in random_spaces(11, 60, knobs=6):
        want = len(product_filtered(s))
        fresh = Space(s.knobs, s.restrictions, s.constants)
        assert fresh.count() == len(fresh) == want, (trial, s.knobs, s.restrictions)
        assert fresh._valid is None, trial                   # counted, not enumerated
        assert len(s.configs()) == s.count() == want, trial
    linked = Space({"a": (1, 2, 3), "b": (1, 2), "c": (1, 2, 3, 4), "d": (5, 6, 7)},
                   ["a + b != 3", "c != 2"])
    assert [sorted(g) for g in linked._independent_groups()] == [["a", "b"], ["c"], ["d"]]
    assert linked.count() == 4 * 3 * 3 == len(linked.configs())


def test_a_draw_is_random_configs_point_when_it_is_valid():
    """Space.draw consumes the generator as random_config does and returns that point
    when why_invalid accepts it, else None (so seeded draws are what they were)."""
    for trial, s in random_spaces(5, 25):
        a, b = random.Random(trial), random.Random(trial)
        for _ in range(200):
            point = s.random_config(a)
            got = s.draw(b)
            assert got == (point if s.why_invalid(point) is None else None), (trial, point)
    u = _union()
    a, b = random.Random(1), random.Random(1)
    for _ in range(300):
        point = u.random_config(a)
        got = u.draw(b)
        assert got == (point if point in u else None)
        assert got is None or (got.key == point.key and set(got) == set(u.knobs))


def test_bad_spaces_are_refused():
    with pytest.raises(ValueError):
        Space({})
    with pytest.raises(ValueError, match="empty"):
        Space({"a": ()})
    with pytest.raises(ValueError, match="repeated"):
        Space({"a": (1, 1)})
    with pytest.raises(TypeError, match="JSON scalars"):
        Space({"a": ((1, 2),)})
    with pytest.raises(ValueError, match="shadow"):
        Space({"a": (1,)}, constants={"a": 2})
    with pytest.raises(ValueError, match="unknown knobs"):
        Space({"a": (1,)}, phases=PhasePlan(outer=("b",), refine="a"))
    with pytest.raises(TypeError, match="PhasePlan"):
        Space({"a": (1,)}, phases={"outer": [], "refine": "a", "groups": []})
    with pytest.raises(ValueError, match="starts outside"):
        space(phases=PhasePlan(refine="a", start=Config(a=4, b="x", c=2)))


def test_neighbours_differ_in_one_knob_and_are_valid():
    s = space()
    n = s.neighbours(Config(a=2, b="x", c=2), "a")
    assert n == [Config(a=1, b="x", c=2), Config(a=2, b="x", c=2)]     # a=4 breaks a*c <= 4


def test_phase_plan_is_a_frozen_typed_value():
    plan = PhasePlan(outer=["b"], refine="a", groups=[["c"]])
    assert plan.outer == ("b",) and plan.groups == (("c",),) and plan.start is None
    s = space(phases=plan)
    assert s.phases == plan and space().phases is None
    with pytest.raises(AttributeError):
        plan.refine = "c"
    started = plan.starting_at({"a": 1, "b": "x", "c": 1})
    assert started.start == Config(a=1, b="x", c=1) and plan.start is None
    s.phases = started                                   # a space takes a new plan, checked
    assert s.phases.start == Config(a=1, b="x", c=1)


def test_gl_space_is_pruned_by_device_limits_and_shape(gl_backend):
    from shadertune.errors import ContextError
    from shadertune.core.problem import Problem
    try:
        s = gl_backend.space(Problem(16, 24, 20))
    except ContextError as e:
        pytest.skip(f"no GL context: {e}")
    assert 0 < len(s) < s.full_size
    lim = gl_backend.device().limits
    for c in s.configs():
        assert c["mrt_h"] * c["mrt_w"] <= lim["max_draw_buffers"]
        assert c["np"] <= 20
    # one plan a family: Jiang's order for the fragment family, the compute family's own
    # the family that runs faster on the device first: llvmpipe's is the fragment family
    software = gl_backend.device().limits["software_renderer"]
    assert s.phases.branch == "family" and s.knobs["family"] == (
        ("fragment", "compute") if software else ("compute", "fragment"))
    fragment = s.phases.plan_for("fragment")
    assert (fragment.outer, fragment.refine, fragment.groups) == (
        ("out", "lang", "glsl", "fetch", "unroll"), "np",
        (("mc",), ("mrt_h", "mrt_w"), ("block_h", "block_w"), ("a_src", "b_src")))
    compute = s.phases.plan_for("compute")
    assert compute.groups[0] == ("bm", "bn") and compute.refine == "ks"
    for start in s.phases.starts():              # every start point is in the space, its family's
        assert s.why_invalid(start) is None
    assert {st["family"] for st in s.phases.starts()} == {"compute", "fragment"}


# --- a union of spaces told apart by one knob (GL: its compute and fragment families) ---

def _union():
    from shadertune.core.space import UnionSpace
    a = Space({"x": (1, 2, 4), "shared": ("s", "t")}, ["x * 2 <= 8"])
    b = Space({"y": (10, 20), "shared": ("t", "u")}, ["y > 10 or shared == 'u'"])
    return UnionSpace("kind", [("a", a, {"y": 0}), ("b", b, {"x": 0})],
                      phases=PhasePlan(branch="kind", branches=(
                          ("a", PhasePlan(refine="x", start={"kind": "a", "x": 1, "shared": "s", "y": 0})),
                          ("b", PhasePlan(groups=(("y", "shared"),))))),
                      domain_order=("b", "a"))


def test_a_union_holds_each_part_with_its_fixed_values():
    u = _union()
    # knob order and domains read in domain_order; the branch knob in the parts' order
    assert list(u.knobs) == ["kind", "y", "shared", "x"] and u.knobs["kind"] == ("a", "b")
    assert u.knobs["shared"] == ("t", "u", "s") and u.knobs["x"] == (0, 1, 2, 4)
    cfgs = u.configs()
    assert len(cfgs) == len(u) == 6 + 3 and u.full_size == 6 + 4
    assert {c["kind"] for c in cfgs[:6]} == {"a"} and all(c["y"] == 0 for c in cfgs[:6])
    assert Config(kind="b", y=10, shared="u", x=0) in u
    assert "y=10: kind=a holds y=0" in u.why_invalid(Config(kind="a", x=1, shared="s", y=10))
    assert "not in ['a', 'b']" in u.why_invalid(Config(kind="c", x=1, shared="s", y=0))
    assert "restriction" in u.why_invalid(Config(kind="b", y=10, shared="t", x=0))
    assert u.why_invalid({"kind": "a", "x": 1}) .startswith("missing knobs")


def test_a_union_finds_first_configs_narrows_and_draws_per_part():
    import random
    u = _union()
    assert u.first({"shared": "u"}, ["y"]) == Config(kind="b", y=10, shared="u", x=0)
    assert u.first({"x": 4, "shared": "u"}, []) is None      # a has no 'u', and b holds x = 0
    only_b = u.narrowed({"kind": ("b",)})
    assert list(only_b.parts) == ["b"] and {c["kind"] for c in only_b.configs()} == {"b"}
    assert u.narrowed({"x": (1,)}).configs() == [c for c in u.configs() if c["x"] == 1]
    with pytest.raises(ValueError, match="no kind is left"):
        u.narrowed({"kind": ("b",), "y": (0,)})
    draws = [u.random_config(random.Random(s)) for s in range(200)]
    assert {d["kind"] for d in draws} == {"a", "b"}
    assert all(d["y"] == 0 for d in draws if d["kind"] == "a")


def test_a_union_counts_and_enumerates_its_parts_whole():
    u = _union()
    assert u.count() == sum(space.count() for space, _ in u.parts.values()) == 9
    assert u._valid is None and all(space._valid is None for space, _ in u.parts.values())
    cfgs = u.configs()
    assert cfgs == [Config({u.branch: v, **fixed, **c}) for v, (space, fixed) in u.parts.items()
                    for c in Space(space.knobs, space.restrictions, space.constants).configs()]
    assert all(set(c) == set(u.knobs) and c in u for c in cfgs)


def _a_times_c_within_limit(a, c, limit):
    return a * c <= limit


def test_a_space_pickles_without_its_compiled_walks():
    import pickle
    s = space(restrictions=[_a_times_c_within_limit])
    s.draw(random.Random(0))
    assert s._walks                                   # closures: plain pickle refuses them
    back = pickle.loads(pickle.dumps(s))
    assert back._walks == {} and back.count() == len(back.configs()) == 10
    assert back.draw(random.Random(0)) == s.draw(random.Random(0))


def test_a_branched_plan_walks_each_part_in_its_own_order():
    from shadertune.search.phased import search as phased
    u = _union()
    seen = []

    def evaluate(cfg):
        seen.append(cfg)
        ms = (cfg["x"] if cfg["kind"] == "a" else 3 + cfg["y"] / 100)
        return Result(backend="t", device="d", problem=Problem(1, 1, 1), config=cfg, times_ms=[ms],
                      status=OK)
    phased(u, evaluate)
    kinds = [c["kind"] for c in seen]
    assert kinds[0] == "a" and "b" in kinds and kinds.index("b") > kinds.index("a")
    assert seen[0] == Config(kind="a", x=1, shared="s", y=0)               # branch a's start
    assert {c["x"] for c in seen if c["kind"] == "a"} == {1, 2, 4}          # its refine knob
    assert {(c["y"], c["shared"]) for c in seen if c["kind"] == "b"} >= {(20, "t"), (10, "u")}
    assert u.phases.for_config(seen[-1]).branch is None
    assert u.phases.start_point == seen[0]


def test_admits_is_why_invalid_without_the_reason():
    # positional, whole-config and declared mapping rules, one that raises, values off
    # the domains, missing and unknown knobs: admits(dict) == (why_invalid is None)
    @restriction(knobs=["c"])
    def c_small(cfg):
        return cfg["c"] < 2 or cfg["a"] != 4

    s = space(restrictions=["a * c <= limit", lambda cfg: cfg["b"] != "y" or cfg["a"] > 1,
                            c_small, "1 // (a - 2) >= -1"])
    points = [dict(zip(s.knobs, v)) for v in itertools.product((1, 2, 4, 8), ("x", "y"), (1, 2))]
    points += [{"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 1, "d": 0}]
    verdicts = [s.admits(p) for p in points]
    assert verdicts == [s.why_invalid(p) is None for p in points]
    assert any(verdicts) and not all(verdicts)


def test_the_cuda_space_admits_a_config_written_before_its_newest_knobs():
    from shadertune.backends.cuda.device import DEFAULT_LIMITS
    from shadertune.backends.cuda.space import make_space
    p = Problem(300, 200, 100)
    s = make_space(p, DEFAULT_LIMITS)
    cfg = s.configs()[0].to_dict()
    old = {k: v for k, v in cfg.items() if k not in ("SK", "PS", "AR")}
    assert s.admits(cfg) and s.admits(old) == (s.why_invalid(old) is None)
    assert not s.admits({**cfg, "BM": 7})
