"""Strategies against the fake backend's synthetic cost surface (no GL, instant)."""
import itertools
import time

import pytest
from fake_backend import NP_BEST, OUTER, FakeBackend, best_correct, cost_ms, make_space

from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import OK, Result
from shadertune.search import Budget, Evaluator, SearchOptions, Tracker, get_strategy
from shadertune.search.phased import powers_of_two
from shadertune.core.space import PhasePlan, Space

P = Problem(8, 8, 64)


def run(strategy, budget=Budget(), problem=P, backend=None, phases=None, **kw):
    """Run `strategy` on the fake backend; `phases` collects (label, evaluations so far)."""
    be = backend or FakeBackend()
    ev = Evaluator(be, problem, repeats=3, warmup=0,
                   on_phase=None if phases is None else lambda label: phases.append((label, ev.measured)))
    options = SearchOptions(cost_model=lambda cs: be.predict_ms(problem, cs), **kw)
    results = get_strategy(strategy)(be.space(problem), ev, budget, options)
    return be, results


def plan_part(results, phases):
    """The results of the phase plan: those before the local search took over."""
    end = next(n for label, n in phases if label == "local search")
    return results[:end]


def best_cfg(results):
    ok = [r for r in results if r.ok]
    return min(ok, key=lambda r: r.median_ms).config


def test_phased_finds_the_exhaustive_optimum_with_few_evaluations():
    be, ex = run("exhaustive")
    phases = []
    _, ph = run("phased", phases=phases)
    space = be.space(P)
    assert len(ex) == len(space)
    plan = plan_part(ph, phases)
    assert best_cfg(ex) == best_correct(space) == best_cfg(plan) == best_cfg(ph)
    assert best_cfg(plan)["np"] == NP_BEST        # only the np refinement reaches 22
    assert len(plan) <= 0.05 * len(space)
    # then the local search: nothing better nearby, so it converges soon after
    assert phases[-1][0].startswith("converged") and len(ph) <= len(plan) + 100


def test_no_config_is_evaluated_twice():
    for strategy in ("phased", "exhaustive", "random"):
        be, results = run(strategy, Budget(max_evals=3000))
        keys = [r.config for r in results]
        assert len(keys) == len(set(keys)), strategy
        assert len(be.builds) == len(set(be.builds)) == len(results), strategy


def test_phased_order_follows_jiang():
    """outer loops (glsl, fetch, unroll) -> np powers of two -> mc -> mrt -> np refinement."""
    phases = []
    _, results = run("phased", phases=phases)
    cfgs = [r.config for r in plan_part(results, phases)]
    # outer knobs change in blocks, in product order with glsl outermost
    blocks = [k for k, _ in itertools.groupby((c["glsl"], c["fetch"], c["unroll"]) for c in cfgs)]
    assert blocks == list(itertools.product(*(list(OUTER[k]) for k in ("glsl", "fetch", "unroll"))))
    first = [c for c in cfgs if (c["glsl"], c["fetch"], c["unroll"]) == ("330", "texelFetch", 1)]
    # 1. np over the powers of two, increasing, mc and mrt held at the start point
    np_phase = first[:6]
    assert [c["np"] for c in np_phase] == [2, 4, 8, 16, 32, 64]
    assert {(c["mc"], c["mrt_h"], c["mrt_w"]) for c in np_phase} == {("1x1", 1, 1)}
    # 2. each mc at the best power of two (16, the nearest to NP_BEST=22 on its side)
    mc_phase = first[6:9]
    assert [c["mc"] for c in mc_phase] == ["1x2", "1x4", "2x2"]   # 1x1 at np=16 is cached
    assert {c["np"] for c in mc_phase} == {16}
    # 3. each mrt jointly at the best np and mc (1x4; 2x2 is wrong for glsl 330)
    mrt_phase = first[9:16]            # (1, 1) with 1x4 at np=16 came with the mc phase
    assert {(c["np"], c["mc"]) for c in mrt_phase} == {(16, "1x4")}
    assert [(c["mrt_h"], c["mrt_w"]) for c in mrt_phase] == \
        [(1, 2), (1, 4), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2)]
    # 4. np refinement at the best mc/mrt: midpoints on both sides, recursively
    refine = first[16:]
    assert all(c["np"] != 16 for c in refine)
    assert {(c["mc"], c["mrt_h"], c["mrt_w"]) for c in refine} == {("1x4", 2, 2)}
    assert [c["np"] for c in refine] == [12, 24, 20, 28, 22]
    # each phase is named as it starts
    labels = [label for label, _ in phases]
    assert labels[:4] == ["glsl=330 fetch=texelFetch unroll=1: np", "glsl=330 fetch=texelFetch unroll=1: mc",
                          "glsl=330 fetch=texelFetch unroll=1: mrt_h mrt_w",
                          "glsl=330 fetch=texelFetch unroll=1: np refinement"]


def test_mrt_group_is_searched_jointly_over_both_knobs():
    _, results = run("phased")
    first = [r.config for r in results
             if (r.config["glsl"], r.config["fetch"], r.config["unroll"]) == ("330", "texelFetch", 1)]
    mrt = [(c["mrt_h"], c["mrt_w"]) for c in first if c["np"] == 16 and c["mc"] == "1x4"]
    # every pair the space accepts (product <= 8; not 4x4), in domain order
    assert mrt == [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2)]


def _line_space(domain, best, valid=lambda v: True):
    """A one-knob space whose cost is |np - best| + 1: for refinement tests."""
    return Space({"np": domain}, [lambda c: valid(c["np"])], phases=PhasePlan(refine="np")), \
        lambda cfg: _fake_result(cfg, abs(cfg["np"] - best) + 1.0)


def _fake_result(cfg, ms, status=OK):
    return Result("t", "d", P, cfg, status, times_ms=[ms] if status == OK else [])


@pytest.mark.parametrize("best", [3, 5, 6, 7, 9, 13, 22, 47, 63, 64, 100, 127])
def test_np_refinement_reaches_any_value_of_a_unimodal_line(best):
    space, evaluate = _line_space(tuple(range(1, 129)), best)
    results = get_strategy("phased")(space, evaluate, Budget(max_evals=8 + 2 * 7 + 2))
    assert best_cfg(results)["np"] == best    # powers of two + ~2 per halving reach it


def test_np_refinement_only_tries_values_the_space_accepts():
    seen = []

    def evaluate(cfg):
        seen.append(cfg["np"])
        return _fake_result(cfg, abs(cfg["np"] - 23) + 1.0)
    space = Space({"np": tuple(range(1, 65))}, ["np % 3 != 0"], phases=PhasePlan(refine="np"))
    results = get_strategy("phased")(space, evaluate, Budget())
    assert all(v % 3 for v in seen)
    assert best_cfg(results)["np"] == 23


def test_powers_of_two():
    assert powers_of_two((2, 3, 4, 6, 8, 12, 64)) == [2, 4, 8, 64]
    assert powers_of_two(("a", "b")) == ["a", "b"]
    assert powers_of_two((1, True, 2)) == [1, 2]


def test_invalid_points_are_skipped_without_evaluating():
    be, results = run("phased")
    space = be.space(P)
    assert all(space.why_invalid(c) is None for c in be.builds)


@pytest.mark.parametrize("strategy", ["phased", "exhaustive", "random"])
def test_budget_of_evaluations(strategy):
    be, results = run(strategy, Budget(max_evals=17))
    assert len(results) == 17 == len(be.builds)


@pytest.mark.parametrize("strategy", ["phased", "exhaustive", "random"])
def test_budget_of_seconds(strategy):
    be = FakeBackend()
    ev = Evaluator(be, P, repeats=1, warmup=0)

    small = Problem(8, 8, 16)
    ev = Evaluator(be, small, repeats=1, warmup=0)

    def slow(cfg):                     # 100 ms an evaluation against a 0.5 s budget
        time.sleep(0.1)
        return ev(cfg)
    be.space(small).configs()          # enumerated (and cached) before the clock starts
    results = get_strategy(strategy)(be.space(small), slow, Budget(seconds=0.5))
    assert 1 <= len(results) <= 5     # no evaluation starts after the limit


def test_zero_budget_evaluates_nothing():
    be, results = run("phased", Budget(max_evals=0))
    assert results == [] and be.builds == []


def test_random_is_seeded_and_uniform_without_replacement():
    _, a = run("random", Budget(max_evals=50), seed=1)
    _, b = run("random", Budget(max_evals=50), seed=1)
    _, c = run("random", Budget(max_evals=50), seed=2)
    assert [r.config for r in a] == [r.config for r in b] != [r.config for r in c]


def test_random_samples_large_spaces_without_enumerating(monkeypatch):
    from shadertune.search import random_search
    monkeypatch.setattr(random_search, "ENUMERATE_LIMIT", 10)
    space = make_space(P)
    monkeypatch.setattr(Space, "configs", lambda self: pytest.fail("enumerated"))
    seen = []
    results = random_search.search(space, lambda c: seen.append(c) or _fake_result(c, 1.0),
                                   Budget(max_evals=40), SearchOptions(seed=3))
    assert len(results) == 40 == len(set(seen))
    assert all(space.why_invalid(c) is None for c in seen)


def test_wrong_fast_kernels_are_never_best():
    for strategy in ("phased", "exhaustive"):
        _, results = run(strategy)
        b = min((r for r in results if r.ok), key=lambda r: r.median_ms)
        fastest = min((r for r in results if r.times_ms or r.status == "wrong"),
                      key=lambda r: cost_ms(r.config))
        assert fastest.status == "wrong"          # the trap is there...
        assert b.status == OK and b.config == best_correct(FakeBackend().space(P))


def test_coordinate_descent_without_a_phase_plan():
    be = FakeBackend(phases=None)
    phases = []
    ev = Evaluator(be, P, repeats=1, warmup=0, on_phase=lambda label: phases.append((label, ev.measured)))
    space = be.space(P)
    assert space.phases is None
    results = plan_part(get_strategy("phased")(space, ev, Budget()), phases)
    assert phases[0][0] == "coordinate descent"
    by_cfg = {r.config: r for r in results}
    best = best_cfg(results)
    # a coordinate-wise optimum: every one-knob move from it was evaluated and is no better
    for knob in space.knobs:
        for n in space.neighbours(best, knob):
            assert n in by_cfg
            assert not (by_cfg[n].ok and by_cfg[n].median_ms < by_cfg[best].median_ms)
    assert best["np"] == NP_BEST
    assert len(results) < 0.05 * len(space)


def test_tracker_returns_the_first_result_for_a_repeat():
    calls = []
    t = Tracker(lambda c: calls.append(c) or _fake_result(c, 1.0), Budget(max_evals=1))
    a = t(Config(np=2))
    assert t(Config(np=2)) is a and calls == [Config(np=2)]
    from shadertune.search import BudgetExhausted
    with pytest.raises(BudgetExhausted):
        t(Config(np=4))


def test_budget_validation():
    with pytest.raises(ValueError):
        Budget(max_evals=-1)
    with pytest.raises(ValueError):
        Budget(seconds=float("nan"))


def test_a_named_start_point_is_where_the_np_sweep_begins():
    plan = PhasePlan(outer=("glsl", "fetch", "unroll"), refine="np",
                     groups=(("mc",), ("mrt_h", "mrt_w")),
                     start=Config(glsl="330", fetch="texelFetch", unroll=1, np=8, mc="1x2",
                                  mrt_h=2, mrt_w=1))
    _, results = run("phased", backend=FakeBackend(phases=plan))
    first = [r.config for r in results][:6]
    assert [c["np"] for c in first] == [2, 4, 8, 16, 32, 64]
    assert {(c["mc"], c["mrt_h"], c["mrt_w"]) for c in first} == {("1x2", 2, 1)}
