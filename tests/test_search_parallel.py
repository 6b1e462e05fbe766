"""Searches on an evaluator that runs k evaluations at once (a cluster's workers).

The strategies fill the idle rounds of their batches with configs timed ahead
(Tracker.many(..., ahead=...)); the search asks for exactly what it asks on one
worker, in the same order, in fewer rounds (a batch of b configs: ceil(b / k)).
Everything here is counted (configs, batches, rounds), never timed.
"""
import math
import random

import pytest
from fake_backend import FakeBackend

from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import OK, RUN_FAILED, Result
from shadertune.search import Budget, SearchOptions, Tracker, get_strategy, tune
from shadertune.search import budget as budget_module
from shadertune.search.contract import BaseEvaluator
from shadertune.search.evaluate import Evaluator
from shadertune.search.phased import powers_of_two, refine_recursively
from shadertune.core.space import Space

P = Problem(8, 8, 64)


class AtOnce(BaseEvaluator):
    """Evaluates a batch one config after another, says it runs k at once, and counts
    the batches it was given (the rounds they take on k workers)."""

    def __init__(self, fn, k: int):
        self.fn, self.k, self.batches, self.order = fn, k, [], []

    @property
    def parallelism(self):
        return self.k

    def __call__(self, cfg):
        return self.many([cfg])[0]

    def many(self, cfgs, stop=None):
        self.batches.append(len(cfgs))
        self.order += cfgs
        return [self.fn(c) for c in cfgs]

    @property
    def rounds(self):
        return sum(math.ceil(b / self.k) for b in self.batches)


@pytest.fixture
def trackers(monkeypatch):
    """Every Tracker a strategy makes, kept (its `path`: the search's own evaluations)."""
    made = []

    class Kept(Tracker):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)
    for name in ("phased", "model", "random_search", "exhaustive"):
        monkeypatch.setattr(f"shadertune.search.{name}.Tracker", Kept)
    return made


def fake_run(strategy, k, budget, trackers, cost_model=True):
    be = FakeBackend()
    ev = Evaluator(be, P, repeats=2, warmup=0)
    at_once = AtOnce(ev, k)
    options = SearchOptions(cost_model=(lambda cs: be.predict_ms(P, cs)) if cost_model else None, seed=5)
    results = get_strategy(strategy)(be.space(P), at_once, budget, options)
    return results, trackers[-1], at_once


@pytest.mark.parametrize("strategy,cost_model", [("phased", True), ("model", True), ("model", False),
                                                 ("random", True), ("exhaustive", True)])
@pytest.mark.parametrize("budget", [Budget(), Budget(max_evals=45)], ids=["converged", "45 evaluations"])
def test_k_workers_ask_for_what_one_worker_asks(trackers, strategy, cost_model, budget):
    one, t1, ev1 = fake_run(strategy, 1, budget, trackers, cost_model)
    assert [r.config for r in t1.path] == [r.config for r in one] == ev1.order     # one worker: plain
    for k in (2, 3, 4):
        got, tk, evk = fake_run(strategy, k, budget, trackers, cost_model)
        path = [r.config for r in tk.path]
        assert [r.config for r in got] == evk.order                    # the report: as measured
        assert len(evk.order) == len(set(evk.order)) and set(path) <= set(evk.order)
        if budget.max_evals is None:             # run to its end: the same search
            assert path == [r.config for r in one] and set(evk.order) >= set(ev1.order), (strategy, k)
        else:                                    # the count includes configs timed ahead
            unasked = len(got) - len(path)
            assert len(got) == budget.max_evals and path == [r.config for r in one][:len(path)]
            assert len(path) == budget.max_evals - unasked, (strategy, k)
        assert evk.rounds <= ev1.rounds
    if strategy == "phased":                     # its refinement steps one config at a time
        assert evk.rounds < 0.9 * ev1.rounds


def test_timed_ahead_configs_stay_out_of_the_searchs_view_until_it_asks():
    space_cfgs = [Config(x=i) for i in range(10)]
    ev = AtOnce(lambda c: Result("t", "d", P, c, OK, times_ms=[10.0 - c["x"]]), 3)
    run = Tracker(ev, Budget(max_evals=5))
    a, *later = space_cfgs
    run.many([a], ahead=later)
    assert ev.batches == [3] and ev.order == space_cfgs[:3]          # two idle workers filled
    assert run.get(space_cfgs[1]) is None and not run.evaluated(space_cfgs[2])
    assert run.best().config == a and len(run.path) == 1 and len(run.results) == 3
    assert run(space_cfgs[2]).config == space_cfgs[2] and ev.batches == [3]   # asked: no evaluation
    assert len(run.path) == 2 and run.best().config == space_cfgs[2]
    run.many([space_cfgs[1], space_cfgs[5]], ahead=space_cfgs[6:])
    # one new config (x=1 was timed ahead) leaves two workers idle, but the budget has
    # one evaluation left after this batch: one config ahead
    assert ev.batches == [3, 2] and ev.order[3:] == [space_cfgs[5], space_cfgs[6]]
    assert [r.config["x"] for r in run.path] == [0, 2, 1, 5]
    run(space_cfgs[6])                                                 # the fifth asked for
    with pytest.raises(budget_module.BudgetExhausted):
        run(space_cfgs[7])                                             # the budget counts asked ones
    assert [r.config["x"] for r in run.results] == [0, 1, 2, 5, 6] and ev.batches == [3, 2]


def test_one_worker_times_nothing_ahead():
    ev = AtOnce(lambda c: Result("t", "d", P, c, OK, times_ms=[1.0]), 1)
    run = Tracker(ev)
    run.many([Config(x=0)], ahead=[Config(x=1), Config(x=2)])
    assert ev.batches == [1] and len(run.results) == 1


def _reference_refine(space, run, cur, knob):
    """The recursive refinement as it was written one step at a time (before the walk
    was a state machine that k workers can time ahead of): the reference."""
    dom = sorted(v for v in space.knobs[knob] if isinstance(v, int))
    b = cur[knob]
    pw = powers_of_two(dom)
    lo = max([v for v in pw if v < b], default=dom[0])
    hi = min([v for v in pw if v > b], default=dom[-1])
    best_s = run(cur).median_ms
    while True:
        moved = False
        for side in ("left", "right"):
            a, c = (lo, b) if side == "left" else (b, hi)
            mid = (a + c) / 2
            inside = sorted((v for v in dom if a < v < c), key=lambda v: (abs(v - mid), v))
            v = next((v for v in inside if cur.replace(**{knob: v}) in space), None)
            if v is None:
                continue
            moved = True
            cand = cur.replace(**{knob: v})
            r = run(cand)
            s = r.median_ms if r.ok else math.inf
            if s < best_s:
                lo, hi = (a, b) if side == "left" else (b, c)
                cur, b, best_s = cand, v, s
                break
            if side == "left":
                lo = v
            else:
                hi = v
        if not moved:
            return cur


def test_the_refinement_walk_is_the_one_step_at_a_time_bisection():
    """On random lines (domains, values the space rejects, bumpy costs, failures) the
    walk on one worker evaluates what the reference does, in its order, and ends at its
    config; on k workers it ends at the same config, having asked for the same ones."""
    rng = random.Random(3)
    for trial in range(300):
        dom = sorted(rng.sample(range(1, 200), rng.randint(2, 40)))
        banned = set(rng.sample(dom, rng.randint(0, len(dom) // 3)))
        costs = {v: rng.choice([math.inf] + [rng.uniform(1, 100)] * 6) for v in dom}
        space = Space({"np": tuple(dom), "u": (1,)}, [lambda np: np not in banned])
        start = Config(np=rng.choice([v for v in dom if v not in banned] or [dom[0]]), u=1)
        if start not in space:
            continue

        def evaluate(c):
            s = costs[c["np"]]
            return Result("t", "d", P, c, OK, times_ms=[s]) if s < math.inf else \
                Result("t", "d", P, c, RUN_FAILED)
        if not evaluate(start).ok:
            continue
        ref_order, got = [], {}
        ref = _reference_refine(space, Tracker(lambda c: ref_order.append(c) or evaluate(c)), start, "np")
        for k in (1, 2, 4):
            ev = AtOnce(evaluate, k)
            run = Tracker(ev)
            end = refine_recursively(space, run, start, "np")
            assert end == ref, (trial, k)
            assert [r.config for r in run.path] == ref_order, (trial, k)
            got[k] = ev
        assert got[1].order == ref_order and got[1].rounds == len(ref_order)
        assert got[4].rounds <= got[2].rounds <= got[1].rounds


def test_tune_reports_the_configs_timed_ahead():
    be = FakeBackend()

    class Two(Evaluator):
        parallelism = 2
    one = tune(be, P, budget=Budget(max_evals=40), repeats=2)
    two = tune(be, P, budget=Budget(max_evals=40), evaluator=Two(be, P, repeats=2))
    assert "ahead" not in one and one["evaluated"] == two["evaluated"] == 40
    unasked = two["ahead"]["timed"] - two["ahead"]["asked"]
    assert two["ahead"]["asked"] > 0 and unasked >= 0
    # the search's own evaluations (all but those never asked for) are one worker's
    both = {Config(r["config"]) for r in one["results"]} & {Config(r["config"]) for r in two["results"]}
    assert len(both) >= 40 - unasked


class Carrying(AtOnce):
    """AtOnce whose configs timed ahead run on past their batch (a cluster's evaluator):
    they come in when the search next looks (collect), or when it asks for one (a
    batch that names it), or at the search's end (finish)."""
    carries = True

    def __init__(self, fn, k: int):
        super().__init__(fn, k)
        self.flying: list = []

    def many(self, cfgs, stop=None, ahead=()):
        landing = [c for c in cfgs if c in self.flying]
        out = super().many([c for c in cfgs if c not in landing]) if len(cfgs) > len(landing) else []
        got = dict(zip([c for c in cfgs if c not in landing], out))
        for c in landing:
            self.flying.remove(c)
            got[c] = self.fn(c)
        self.order += [c for c in ahead if c not in self.order]
        self.flying += [c for c in ahead if c not in self.flying]
        return [got[c] for c in cfgs]

    def carried(self):
        return frozenset(self.flying)

    # collect: the first one has come in (one at a time: some are still running when
    # the search next decides)

    def collect(self):
        came = self.flying[:1]
        self.flying = self.flying[1:]
        return [(c, self.fn(c)) for c in came]

    def finish(self, wait=True):
        came, self.flying = self.flying, []
        return [self.fn(c) for c in came]


@pytest.mark.parametrize("strategy", ["phased", "model"])
@pytest.mark.parametrize("budget", [Budget(), Budget(max_evals=45)], ids=["converged", "45 evaluations"])
def test_configs_carried_past_their_batch_change_nothing_the_search_decides(trackers, strategy, budget):
    """An evaluator that carries configs timed ahead past their batch (some still
    running when the search next decides): the search asks for what one worker asks;
    the budget counts the ones in flight, so a count budget is met exactly, with the
    search's end collecting what it never asked for."""
    one, t1, _ = fake_run(strategy, 1, budget, trackers)
    be = FakeBackend()
    ev = Evaluator(be, P, repeats=2, warmup=0)
    options = SearchOptions(cost_model=lambda cs: be.predict_ms(P, cs), seed=5)
    for k in (2, 4):
        carrying = Carrying(ev, k)
        got = get_strategy(strategy)(be.space(P), carrying, budget, options)
        tk = trackers[-1]
        got = list(got) + carrying.finish()
        path = [r.config for r in tk.path]
        assert len({r.config for r in got}) == len(got)                  # each measured once
        if budget.max_evals is None:
            assert path == [r.config for r in one], (strategy, k)
        else:
            assert len(got) == budget.max_evals and path == [r.config for r in one][:len(path)]


class HeldToTheEnd(Evaluator):
    """A local evaluator that says it runs two at once and carries the configs timed
    ahead (measured at once) until the search asks for one or ends: it hands nothing
    over before (collect), so every config timed ahead and never asked for comes in
    only at the search's end (finish)."""
    parallelism = 2
    carries = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._held: dict = {}
        self.late = 0

    def many(self, configs, stop=None, ahead=()):
        out = [self._held.pop(c) if c in self._held else self(c) for c in configs]
        for c in ahead:
            if c not in self._held:
                self._held[c] = self(c)
        return out

    def carried(self):
        return frozenset(self._held)

    def finish(self, wait=True):
        got, self._held = list(self._held.values()), {}
        self.late += len(got)
        return got


def test_the_report_counts_configs_timed_ahead_that_came_in_at_the_searchs_end():
    """Configs timed ahead that the search never collected come in at its end: the
    report's `ahead` counts them among those timed, so evaluated - (timed - asked) is
    the search's own evaluations, the first of one worker's."""
    be = FakeBackend()
    ev = HeldToTheEnd(be, P, repeats=2)
    two = tune(be, P, budget=Budget(max_evals=40), evaluator=ev)
    assert two["evaluated"] == 40 and ev.late > 0
    own = two["evaluated"] - (two["ahead"]["timed"] - two["ahead"]["asked"])
    one = tune(FakeBackend(), P, budget=Budget(max_evals=own), repeats=2)
    mine = {Config(r["config"]) for r in two["results"]}
    assert {Config(r["config"]) for r in one["results"]} <= mine and one["evaluated"] == own


def _draw_spaces():
    small = Space({"a": tuple(range(20)), "b": tuple(range(20))}, ["a + b < 30"])
    large = Space({f"k{i}": tuple(range(10)) for i in range(6)}, ["k0 + k1 < 15"])
    # 16 valid configs in 10^8 points: the draws end by the idle rule's enumeration
    sparse = Space({f"k{i}": tuple(range(10)) for i in range(8)},
                   [f"k{i} < 2" for i in range(4)] + [f"k{i} == 0" for i in range(4, 8)])
    return {"small": small, "large": large, "sparse": sparse}


@pytest.mark.parametrize("which", ["small", "large", "sparse"])
def test_a_fork_of_the_draws_yields_what_they_yield_next_and_leaves_them_where_they_were(which):
    import itertools
    from shadertune.search.random_search import draws
    space = _draw_spaces()[which]
    passed_over = set()
    d = draws(space, random.Random(4), skip=passed_over.__contains__)
    head = list(itertools.islice(d, 3))
    passed_over.update(head[:1])
    fork = d.fork()
    seen_by_fork = list(itertools.islice(fork, 30))
    assert list(itertools.islice(d, 30)) == seen_by_fork and len(seen_by_fork) >= min(13, 30)
    assert not set(head) & set(seen_by_fork)


@pytest.mark.parametrize("source", ["ranked", "small", "large", "sparse"])
def test_peeking_at_the_next_restart_batch_changes_no_batch(source):
    """FreshBatches.peek shows the batch next() gives were nothing evaluated meanwhile, and
    takes nothing: configs evaluated after a peek are passed over when the batch is taken,
    the batch filled from further on, as without the peek."""
    from shadertune.search.local import Listed, fresh_batches
    from shadertune.search.random_search import draws
    fn = lambda c: Result("t", "d", P, c, OK, times_ms=[1.0])   # noqa: E731

    def batches(run):
        if source == "ranked":
            src = Listed([Config(a=i, b=0) for i in range(40)])
        else:
            src = draws(_draw_spaces()[source], random.Random(7), skip=run.evaluated)
        return fresh_batches(src, 4, run)
    peeking, plain = Tracker(fn), Tracker(fn)
    a, b = batches(peeking), batches(plain)
    for taken in range(12):
        peeked = a.peek()
        for run in (peeking, plain):            # a climb's evaluations between two restarts
            run.many(peeked[:1] + peeked[3:])
        got, want = next(a, None), next(b, None)
        assert got == want
        if got is None:
            break
        assert got[:2] == peeked[1:3]
    assert taken >= 3
