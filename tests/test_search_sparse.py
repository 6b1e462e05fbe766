"""Draws and restarts on a space whose valid configs are few inside a large product.

Every strategy ends once the whole valid space is evaluated, and each draw's work
is bounded: asserted on evaluation and draw counts.  A draw counter that fails
past a generous count, and a thread joined with a generous time-out, turn a
regression into a failure instead of a hang; neither decides a pass.
"""
import random
import threading

import pytest

from shadertune.core.problem import Problem
from shadertune.core.result import OK, Result
from shadertune.search import Budget, SearchOptions, get_strategy
from shadertune.search.random_search import IDLE_LIMIT, REJECTION_LIMIT, SMALL_SPACE, draws
from shadertune.core.space import PhasePlan, Space

P = Problem(8, 8, 8)
VALID = 16
# draws a strategy may make in all: one idle run before the enumerated rest per
# draws() made, and a few runs before it (generous: the rule needs one)
DRAW_LIMIT = 20 * IDLE_LIMIT


def sparse_space(phases=None) -> Space:
    """8 knobs of 10 values: 10^8 points, of which 2^4 = 16 are valid.  After
    REJECTION_LIMIT draws the product's share accepted estimates far more than
    SMALL_SPACE valid configs, so only the idle rule ends the rejection."""
    knobs = {f"k{i}": tuple(range(10)) for i in range(8)}
    rules = [f"k{i} < 2" for i in range(4)] + [f"k{i} == 0" for i in range(4, 8)]
    space = Space(knobs, rules, phases=phases)
    assert space.full_size / REJECTION_LIMIT > SMALL_SPACE
    return space


@pytest.fixture
def counted_draws(monkeypatch):
    """Space.draw, counted; past DRAW_LIMIT draws it fails the test (no hang)."""
    calls = []
    draw = Space.draw

    def counted(self, rng):
        calls.append(1)
        if len(calls) > DRAW_LIMIT:
            pytest.fail(f"more than {DRAW_LIMIT} draws: the draws do not end")
        return draw(self, rng)
    monkeypatch.setattr(Space, "draw", counted)
    return calls


def evaluate(cfg):
    return Result("t", "d", P, cfg, OK, times_ms=[1.0 + sum(cfg.values())])


def within(seconds, fn):
    """fn() on a thread, joined with a generous time-out: a hang fails the test."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    return out[0]


def test_draws_end_once_every_valid_config_is_drawn(counted_draws):
    space = sparse_space()
    got = within(120, lambda: list(draws(space, random.Random(0))))
    assert len(got) == len(set(got)) == VALID and set(got) == set(space.configs())
    assert len(counted_draws) == IDLE_LIMIT        # then the enumerated rest, shuffled


def test_draws_pass_over_what_the_caller_has_and_end(counted_draws):
    space = sparse_space()
    have = set(space.configs()[:10])
    got = within(120, lambda: list(draws(space, random.Random(0), skip=have.__contains__)))
    assert set(got) == set(space.configs()) - have
    assert within(120, lambda: list(draws(space, random.Random(0), skip=lambda c: True))) == []
    assert len(counted_draws) == 2 * IDLE_LIMIT


def test_draws_that_keep_finding_new_configs_are_not_cut_short(counted_draws):
    """The idle rule counts draws in a row that give nothing new: a space where most
    draws are new keeps drawing from the product, never enumerating."""
    space = Space({f"k{i}": tuple(range(10)) for i in range(6)}, ["k0 != 3"])
    space.configs = lambda: pytest.fail("enumerated")
    got = list(zip(range(3000), draws(space, random.Random(2))))
    assert len({c for _, c in got}) == 3000 and all(c["k0"] != 3 for _, c in got)


PLAN = PhasePlan(outer=("k0",), refine="k1", groups=(("k2", "k3"),))


@pytest.mark.parametrize("strategy,phases", [("phased", None), ("phased", PLAN), ("random", None),
                                             ("model", None), ("exhaustive", None)],
                         ids=["phased-descent", "phased-plan", "random", "model-no-cost-model",
                              "exhaustive"])
def test_every_strategy_ends_once_the_whole_valid_space_is_evaluated(counted_draws, strategy, phases):
    """A time budget that turns the convergence rule off (spend_all): the restarts go on
    until the draws run out, which they must once all 16 configs are evaluated."""
    space = sparse_space(phases)
    seen = []

    def ev(cfg):
        seen.append(cfg)
        return evaluate(cfg)
    results = within(300, lambda: get_strategy(strategy)(
        space, ev, Budget(seconds=3600, spend_all=True), SearchOptions(seed=4)))
    assert len(results) == len(seen) == VALID and set(seen) == set(space.configs())
    assert len(counted_draws) <= DRAW_LIMIT
    assert min(results, key=lambda r: r.median_ms).config == {f"k{i}": 0 for i in range(8)}
