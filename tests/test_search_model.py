"""The model-guided strategy, the local search every strategy ends with, batches through
the Tracker, and tune()'s hooks (cost model, default strategy, phase names): on the fake
backend, whose optimum is known."""
import math

import pytest
from fake_backend import PHASES, FakeBackend, best_correct, cost_ms, is_unwritten, is_wrong

from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import OK, Result
from shadertune.search import (BaseEvaluator, Budget, BudgetExhausted, Evaluator, SearchOptions,
                               Tracker, get_strategy, tune)
from shadertune.search.local import neighbourhood
from shadertune.search.model import ranked_configs
from shadertune.core.space import PhasePlan

P = Problem(8, 8, 64)


def search(strategy, be, budget=Budget(), phases=None, **kw):
    ev = Evaluator(be, P, repeats=3, warmup=0,
                   on_phase=None if phases is None else lambda label: phases.append((label, ev.measured)))
    options = SearchOptions(cost_model=lambda cs: be.predict_ms(P, cs), **kw)
    return get_strategy(strategy)(be.space(P), ev, budget, options)


def best_of(results):
    return min((r for r in results if r.ok), key=lambda r: r.median_ms)


def evals_to_reach(results, target_ms):
    """Evaluations until the best so far is within 0.2% of target_ms (None: never)."""
    best = math.inf
    for i, r in enumerate(results, 1):
        best = min(best, r.median_ms if r.ok else math.inf)
        if best <= target_ms * 1.002:
            return i
    return None


# --- the model strategy ---------------------------------------------------------------

def test_model_strategy_with_a_cost_model_finds_the_optimum():
    be = FakeBackend(model=True)
    phases = []
    results = search("model", be, phases=phases)
    space = be.space(P)
    assert be.predicted >= len(space)                     # the whole space was ranked
    assert phases[0] == ("model: top 24", 0)
    # the model is fooled by the traps (wrong, unwritten C: predicted fastest), so its
    # first guesses fail verification; the search goes on through the ranking
    assert not any(r.ok for r in results[:24])
    assert best_of(results).config == best_correct(space)
    assert evals_to_reach(results, cost_ms(best_correct(space))) <= 0.02 * len(space)
    assert phases[-1][0].startswith("converged")           # and it stops by itself
    assert len(results) <= 0.03 * len(space)


def test_model_strategy_without_a_cost_model_starts_from_random_draws():
    space = FakeBackend().space(P)
    runs = {}
    for seed in (0, 1):
        phases = []
        runs[seed] = search("model", FakeBackend(), phases=phases, seed=seed)
        assert phases[0][0] == "random starts (no cost model): top 24"
        assert evals_to_reach(runs[seed], cost_ms(best_correct(space))) <= 0.02 * len(space)
    again = search("model", FakeBackend(), seed=0)
    assert [r.config for r in again] == [r.config for r in runs[0]] != [r.config for r in runs[1]]


def test_model_ranking_keeps_one_config_per_prediction():
    space = FakeBackend().space(P)
    seen = []

    def model(cfgs):
        seen.append(len(cfgs))
        return [float(c["np"]) for c in cfgs]     # the model only sees np
    ranked = ranked_configs(space, SearchOptions(cost_model=model))
    assert [c["np"] for c in ranked] == sorted({c["np"] for c in space})
    assert seen == [len(space)]
    sampled = ranked_configs(space, SearchOptions(cost_model=model, rank_limit=100))
    assert seen[-1] == 100 and len(sampled) <= 100
    assert ranked_configs(space, SearchOptions()) is None
    assert ranked_configs(space, SearchOptions(cost_model=lambda cs: None)) is None


def test_the_start_point_is_timed_first_and_the_top_as_one_batch():
    start = Config(glsl="450", fetch="texelFetch", unroll=4, np=16, mc="1x4", mrt_h=2, mrt_w=2)
    announced = []

    class Announcing(FakeBackend):
        def precompile(self, problem, configs):
            announced.append(list(configs))
    be = Announcing(phases=PHASES.starting_at(start), model=True)
    results = search("model", be, Budget(max_evals=40))
    assert results[0].config == start
    assert announced[0] == [r.config for r in results[:24]]   # one batch, compiled together
    assert len(results) == 40


# --- the local search -----------------------------------------------------------------

def test_neighbourhood_moves_one_knob_or_one_group_and_stays_valid():
    space = FakeBackend().space(P)
    cfg = Config(glsl="330", fetch="texelFetch", unroll=1, np=32, mc="1x1", mrt_h=1, mrt_w=1)
    near = neighbourhood(space, cfg)
    assert cfg not in near and len(near) == len(set(near)) and all(c in space for c in near)
    moved = [{k for k in c if c[k] != cfg[k]} for c in near]
    assert all(len(m) == 1 or m <= {"mrt_h", "mrt_w"} for m in moved)    # one knob, or the mrt group
    assert Config(cfg.replace(mrt_h=2, mrt_w=4)) in near                  # the group jointly
    # np (an ordered domain 2..64 step 2): values 1, 2, 4, 8, 16 places away
    assert sorted(c["np"] for c in near if c["np"] != 32) == [16, 24, 28, 30, 34, 36, 40, 48, 64]
    assert {c["unroll"] for c in near if c["unroll"] != 1} == {2, 4, "full"}


def test_phased_goes_on_past_its_plan_while_budget_remains():
    """A plan without the mrt group leaves mrt at its start values; the local search
    after the plan finds the better mrt."""
    plan = PhasePlan(outer=("glsl", "fetch", "unroll"), refine="np", groups=(("mc",),))
    be = FakeBackend(phases=plan)
    phases = []
    results = search("phased", be, phases=phases)
    end = next(n for label, n in phases if label == "local search")
    in_plan = best_of(results[:end])
    assert (in_plan.config["mrt_h"], in_plan.config["mrt_w"]) == (1, 1)
    assert len(results) > end and best_of(results).median_ms < 0.8 * in_plan.median_ms
    assert (best_of(results).config["mrt_h"], best_of(results).config["mrt_w"]) != (1, 1)
    assert phases[-1][0].startswith("converged")
    # with a budget, the continuation stops exactly there
    assert len(search("phased", FakeBackend(phases=plan), Budget(max_evals=end + 7))) == end + 7


def test_convergence_waits_for_patience_restarts_without_a_gain():
    be = FakeBackend(model=True)
    phases = []
    search("model", be, phases=phases, patience=1)
    short = [label for label, _ in phases if label.startswith("restart") and "local" not in label]
    phases = []
    search("model", FakeBackend(model=True), phases=phases, patience=4)
    long = [label for label, _ in phases if label.startswith("restart") and "local" not in label]
    assert len(long) >= len(short) + 3


def test_a_time_limit_to_spend_goes_past_convergence_until_it_is_spent():
    """Budget(seconds, spend_all=True) (the CLI's --time-limit): no convergence stop; the
    restarts go on until the time is spent or the ranking runs out."""
    phases = []
    converged = search("model", FakeBackend(model=True), Budget(seconds=60), phases=phases, patience=1)
    assert phases[-1][0].startswith("converged")
    phases = []
    spent = search("model", FakeBackend(model=True), Budget(seconds=60, spend_all=True), phases=phases,
                   patience=1)
    assert not any(label.startswith("converged") for label, _ in phases)
    assert len(spent) > len(converged) + 10
    # spend_all without a limit changes nothing (there is nothing to spend)
    phases = []
    search("model", FakeBackend(model=True), Budget(spend_all=True), phases=phases, patience=1)
    assert phases[-1][0].startswith("converged")


def test_a_count_to_spend_evaluates_exactly_that_many():
    """Budget(n, spend_all=True) (bench-workers: runs compared at equal evaluations): no
    convergence stop before n evaluations, and not one more."""
    phases = []
    converged = search("model", FakeBackend(model=True), Budget(200), phases=phases, patience=1)
    assert phases[-1][0].startswith("converged") and len(converged) < 200
    phases = []
    spent = search("model", FakeBackend(model=True), Budget(200, spend_all=True), phases=phases,
                   patience=1)
    assert not any(label.startswith("converged") for label, _ in phases)
    assert len(spent) == 200


# --- batches and the budget -------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["phased", "model", "exhaustive", "random"])
@pytest.mark.parametrize("n", [1, 17, 24, 25])
def test_budget_of_evaluations_is_exact_with_batches(strategy, n):
    be = FakeBackend(model=True)
    results = search(strategy, be, Budget(max_evals=n))
    assert len(results) == n == len(be.builds)


class BatchRecorder(BaseEvaluator):
    """An evaluator that takes whole batches (as a distributed one would) and answers
    them out of order internally; it records the batches."""

    def __init__(self, ev):
        self.ev, self.batches = ev, []

    def __call__(self, cfg):
        return self.ev(cfg)

    def many(self, configs, stop=None):
        self.batches.append(list(configs))
        done = {c: self.ev(c) for c in reversed(configs)}
        return [done[c] for c in configs]


@pytest.mark.parametrize("strategy", ["phased", "model", "exhaustive", "random"])
def test_strategies_ask_for_batches_through_the_evaluator(strategy):
    be = FakeBackend(model=True)
    rec = BatchRecorder(Evaluator(be, P, repeats=1, warmup=0))
    options = SearchOptions(cost_model=lambda cs: be.predict_ms(P, cs))
    results = get_strategy(strategy)(be.space(P), rec, Budget(max_evals=60), options)
    assert len(results) == 60 and max(len(b) for b in rec.batches) >= 6
    assert sum(len(b) for b in rec.batches) <= 60                      # every batch cut to the budget
    asked = [c for b in rec.batches for c in b]
    assert len(asked) == len(set(asked)) and set(asked) <= {r.config for r in results}


def _result(cfg, ms=1.0):
    return Result("t", "d", P, cfg, OK, times_ms=[ms])


def test_tracker_many_replays_repeats_and_cuts_to_the_budget():
    calls = []
    t = Tracker(lambda c: calls.append(c) or _result(c), Budget(max_evals=5))
    a, b, c, d = (Config(np=v) for v in (2, 4, 6, 8))
    r = t.many([a, b, a])
    assert [x.config for x in r] == [a, b, a] and r[0] is r[2] and calls == [a, b]
    assert t.many([b]) == [r[1]] and calls == [a, b]                       # seen: no evaluation
    with pytest.raises(BudgetExhausted):
        t.many([c, d, Config(np=10), Config(np=12)])                       # 3 left of 4 asked
    assert calls == [a, b, c, d, Config(np=10)] and len(t.results) == 5
    with pytest.raises(BudgetExhausted):
        t.many([Config(np=14)])
    assert t.many([a, c]) == [r[0], t.get(c)]                              # replay needs no budget


def test_tracker_many_checks_the_time_limit_before_each_evaluation():
    now = [0.0]
    calls = []

    def slow(cfg):
        calls.append(cfg)
        now[0] += 1.0                        # one second an evaluation
        return _result(cfg)
    t = Tracker(slow, Budget(seconds=2.5), clock=lambda: now[0])
    with pytest.raises(BudgetExhausted):
        t.many([Config(np=v) for v in range(2, 20, 2)])
    assert len(calls) == 3 == len(t.results)             # started at 0, 1 and 2 s; not at 3 s


def test_tracker_forwards_phases_and_prefetch_within_the_budget():
    got = {"phase": [], "prefetch": []}

    class Listening(BaseEvaluator):
        def __call__(self, cfg):
            return _result(cfg)

        def phase(self, label):
            got["phase"].append(label)

        def prefetch(self, configs):
            got["prefetch"].append(list(configs))
    t = Tracker(Listening(), Budget(max_evals=3))
    t.phase("model: top 24")
    t(Config(np=2))
    t.prefetch([Config(np=v) for v in (2, 4, 6, 8)])
    assert got == {"phase": ["model: top 24"], "prefetch": [[Config(np=4), Config(np=6)]]}


def test_options_are_checked():
    with pytest.raises(ValueError):
        SearchOptions(batch=0)
    with pytest.raises(ValueError):
        SearchOptions(min_gain=1.5)
    with pytest.raises(ValueError, match="predictions"):
        SearchOptions(cost_model=lambda cs: [1.0]).predict([Config(np=2), Config(np=4)])


# --- tune(): the backend's cost model and default strategy, phase names ----------------------

def test_tune_hands_the_cost_model_and_names_phases():
    be = FakeBackend(model=True)
    labels = []
    e = tune(be, P, strategy="model", budget=Budget(max_evals=30), repeats=1, warmup=0,
             on_phase=labels.append)
    assert be.predicted > 0 and labels[0] == "model: top 24" and e["evaluated"] == 30


def test_tune_times_the_backends_candidates_first():
    """Backend.candidates (CUDA: its curated list) are the model strategy's first
    configs, in order; those outside the space are dropped; the ranking fills the batch."""
    good = [Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2),
            Config(glsl="330", fetch="texture", unroll=2, np=8, mc="1x2", mrt_h=1, mrt_w=1)]
    outside = Config(glsl="330", fetch="texture", unroll=2, np=66, mc="1x2", mrt_h=1, mrt_w=1)

    class Listing(FakeBackend):
        def candidates(self, problem, n=24):
            return [good[0], outside, good[1]][:n]
    be = Listing(model=True)
    e = tune(be, P, strategy="model", budget=Budget(max_evals=30), repeats=1, warmup=0)
    assert [r["config"] for r in e["results"][:2]] == [c.to_dict() for c in good]
    assert outside.to_dict() not in [r["config"] for r in e["results"]]
    assert e["best"]["config"] == good[0].to_dict()           # (the fake's optimum)
    # the base default: the untuned default config alone
    assert FakeBackend().candidates(P) == [FakeBackend().default_config(P)]


def test_tune_uses_the_backends_default_strategy():
    class ModelFirst(FakeBackend):
        default_strategy = "model"
    labels = []
    tune(FakeBackend(), P, budget=Budget(max_evals=3), repeats=1, on_phase=labels.append)
    assert labels[0].endswith(": np")                                  # phased (the base default)
    labels.clear()
    tune(ModelFirst(), P, budget=Budget(max_evals=3), repeats=1, on_phase=labels.append)
    assert labels[0] == "random starts (no cost model): top 24"
    with pytest.raises(ValueError, match="unknown strategy"):
        tune(FakeBackend(), P, strategy="annealing")


def test_traps_are_never_best_for_the_model_strategy():
    results = search("model", FakeBackend(model=True))
    b = best_of(results)
    assert not (is_wrong(b.config) or is_unwritten(b.config))
    assert any(r.status == "wrong" for r in results)
