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


def fake_options(be, cost_model=True):
    """The fake's cost model (None from a FakeBackend without one) and, where it has
    one, its candidates as seeds."""
    return SearchOptions(cost_model=(lambda cs: be.predict_ms(P, cs)) if cost_model else None, seed=5,
                         seeds=be.candidates(P) if be.model else ())


def fake_run(strategy, k, budget, trackers, cost_model=True, modelled=False):
    be = FakeBackend(model=modelled)
    ev = Evaluator(be, P, repeats=2, warmup=0)
    at_once = AtOnce(ev, k)
    results = get_strategy(strategy)(be.space(P), at_once, budget, fake_options(be, cost_model))
    return results, trackers[-1], at_once


@pytest.mark.parametrize("strategy,cost_model,modelled", [
    ("phased", True, False), ("model", True, False), ("model", False, False), ("model", True, True),
    ("random", True, False), ("exhaustive", True, False)])
@pytest.mark.parametrize("budget", [Budget(), Budget(max_evals=45)], ids=["converged", "45 evaluations"])
def test_k_workers_ask_for_what_one_worker_asks(trackers, strategy, cost_model, modelled, budget):
    one, t1, ev1 = fake_run(strategy, 1, budget, trackers, cost_model, modelled)
    assert [r.config for r in t1.path] == [r.config for r in one] == ev1.order     # one worker: plain
    for k in (2, 3, 4):
        got, tk, evk = fake_run(strategy, k, budget, trackers, cost_model, modelled)
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


@pytest.mark.parametrize("strategy,modelled", [("phased", False), ("model", False), ("model", True)],
                         ids=["phased", "model without a model", "model"])
@pytest.mark.parametrize("budget", [Budget(), Budget(max_evals=45), Budget(max_evals=150, spend_all=True)],
                         ids=["converged", "45 evaluations", "150 evaluations, spent"])
def test_configs_carried_past_their_batch_change_nothing_the_search_decides(trackers, strategy, modelled, budget):
    """An evaluator that carries configs timed ahead past their batch (some still
    running when the search next decides): the search asks for what one worker asks;
    the budget counts the ones in flight, so a count budget is met exactly, with the
    search's end collecting what it never asked for."""
    one, t1, _ = fake_run(strategy, 1, budget, trackers, modelled=modelled)
    be = FakeBackend(model=modelled)
    ev = Evaluator(be, P, repeats=2, warmup=0)
    options = fake_options(be)
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


# --- what the local search offers ahead (local.py) -------------------------------------

def test_ahead_is_read_only_where_configs_are_timed_ahead_and_only_until_the_room_is_filled():
    """The strategies pass their guesses as generators (a neighbourhood and its
    predictions): one worker never reads them, k workers read as many as are timed."""
    read = []

    def offered():
        for i in range(100):
            read.append(i)
            yield Config(x=100 + i)
    fn = lambda c: Result("t", "d", P, c, OK, times_ms=[1.0])   # noqa: E731
    Tracker(AtOnce(fn, 1)).many([Config(x=0)], ahead=offered())
    assert read == []
    Tracker(AtOnce(fn, 3)).many([Config(x=0), Config(x=1), Config(x=2)], ahead=offered())
    assert read == []                                       # no worker idles
    run = Tracker(AtOnce(fn, 3))
    run.many([Config(x=0)], ahead=offered())
    assert read == [0, 1] and len(run.results) == 3         # two idle workers
    read.clear()
    run.many([Config(x=0)], ahead=offered())
    assert read == []                                       # nothing new to time


def _climb_space():
    space = Space({"x": tuple(range(1, 17)), "y": tuple(range(1, 17))})
    cost = lambda c: 1.0 + (c["x"] - 11) ** 2 + (c["y"] - 5) ** 2     # noqa: E731
    return space, cost, lambda c: Result("t", "d", P, c, OK, times_ms=[cost(c)])


class Counted(Carrying):
    """Carrying, counting what the Tracker reports timed ahead and asked for."""
    timed = asked = 0

    def timed_ahead(self, timed=0, asked=0):
        self.timed += timed
        self.asked += asked


def test_a_climbs_step_end_offers_the_next_step_from_the_batchs_predicted_best():
    """Every step is one batch (step_evals = batch): the step's end offers the neighbours
    the climb times if it moves to the batch's predicted best.  The model is exact, so it
    always moves there while it moves at all: every config timed ahead is asked for but
    the last step's (the local optimum: the climb moves no further)."""
    from shadertune.search.local import climb
    space, cost, fn = _climb_space()
    options = SearchOptions(cost_model=lambda cs: [cost(c) for c in cs], batch=8, step_evals=8)
    start = Config(x=1, y=16)
    one = Tracker(AtOnce(fn, 1))
    end = climb(space, one, start, options)
    ev = Counted(fn, 2)
    two = Tracker(ev)
    assert climb(space, two, start, options) == end == Config(x=11, y=5)
    assert [r.config for r in two.path] == [r.config for r in one.path]
    measured = set(ev.order)
    assert len(measured) == len(ev.order) and ev.asked >= 8
    # one a worker carried across each step's end: only the last step's never asked for
    assert len(measured) - len(two.path) == 2


def test_a_steps_last_batch_offers_what_follows_the_climb_before_the_next_steps_guess():
    """With `then` (improve passes the next restart batch), a step's last batch offers it
    first: asked once the climb ends, which a step's last batch usually does; the guess
    at the next step comes after it; a step's earlier batches offer the step's rest and
    the guess."""
    from shadertune.search.local import climb, next_step
    space, cost, fn = _climb_space()
    options = SearchOptions(cost_model=lambda cs: [cost(c) for c in cs], batch=4, step_evals=8)
    after = [Config(x=16, y=16), Config(x=15, y=16)]
    run = Offers(Carrying(fn, 2))
    climb(space, run, Config(x=1, y=16), options, then=lambda: list(after))
    start, *steps = run.asked              # the start config's own evaluation first
    assert start[1] == [Config(x=1, y=16)] and not start[2] and len(steps) >= 4
    for _, batch, offered, seen in steps:
        step = next_step(space, Tracker(lambda c: None), batch[0], options, skip=seen | set(batch))
        if offered[:2] == after:           # a step's last batch
            assert offered[2:] == step
        else:                              # its first: the step's other batch, then the guess
            assert len(offered) > 4 and offered[4:] == step and not set(after) & set(offered)
    # the climb ends on a step none of whose batches moves it: its last batch offered `after`
    assert steps[-1][2][:2] == after


class Offers(Tracker):
    """A Tracker that keeps, for each batch asked, its phase, its configs and what it
    offered ahead (read whole, then passed on)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.label, self.asked = "", []

    def phase(self, label):
        self.label = label
        super().phase(label)

    def many(self, cfgs, ahead=()):
        cfgs, ahead = list(cfgs), list(ahead)
        self.asked.append((self.label, cfgs, ahead, set(self.seen)))
        return super().many(cfgs, ahead=ahead)


def _offers_run(monkeypatch, k, strategy="model", budget=Budget(max_evals=160, spend_all=True), cost_model=True):
    made = []

    class Kept(Offers):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)
    monkeypatch.setattr(f"shadertune.search.{strategy}.Tracker", Kept)
    be = FakeBackend(model=True)
    options = SearchOptions(cost_model=(lambda cs: be.predict_ms(P, cs)) if cost_model else None, seed=5,
                            seeds=be.candidates(P))
    ev = Counted(Evaluator(be, P, repeats=2, warmup=0), k)
    get_strategy(strategy)(be.space(P), ev, budget, options)
    return made[-1], be.space(P), options, ev


def test_the_model_strategys_first_batch_offers_the_first_climbs_first_step(monkeypatch):
    """The first batch (a seed and the model's top 3) offers the neighbours the first climb
    times from its predicted best; the model is exact, so the climb starts there and its
    first step asks for what was offered."""
    from shadertune.search import model
    from shadertune.search.local import next_step, predicted_best
    space, cost, fn = _climb_space()
    options = SearchOptions(cost_model=lambda cs: [cost(c) for c in cs], seeds=[Config(x=1, y=16)], top=4)
    made = []

    class Kept(Offers):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)
    monkeypatch.setattr(model, "Tracker", Kept)
    one = model.search(space, AtOnce(fn, 1), Budget(), options)
    model.search(space, Carrying(fn, 2), Budget(), options)
    run = made[-1]
    assert [r.config for r in run.path] == [r.config for r in one]
    (label, first, offered, _), (label2, step, _, _) = run.asked[:2]
    assert label == "model: top 4" and label2 == "local search" and len(first) == 4
    best = predicted_best(first, options)
    assert best == min(run.path[:4], key=lambda r: r.median_ms).config
    assert offered == next_step(space, Tracker(fn), best, options, skip=first) and len(offered) > 8
    assert step == offered[:8]


@pytest.mark.parametrize("cost_model", [True, False], ids=["model", "no model"])
def test_a_restart_batch_offers_the_next_restart_batch_first(monkeypatch, cost_model):
    """Each restart batch offers the next one first (as the restarts then give it: those
    of its configs timed meanwhile passed over), then the first climb step from its
    predicted best; the peek takes nothing from the restarts: the search asks for what one
    worker asks."""
    from shadertune.search.local import next_step, predicted_best
    one, *_ = _offers_run(monkeypatch, 1, cost_model=cost_model)
    run, space, options, ev = _offers_run(monkeypatch, 2, cost_model=cost_model)
    assert [r.config for r in run.path] == [r.config for r in one.path][:len(run.path)]
    restarts = [(i, a) for i, a in enumerate(run.asked) if a[0].endswith("starting points")]
    assert len(restarts) >= 3
    for (i, (_, batch, offered, _)), (j, (_, nxt, _, seen)) in zip(restarts, restarts[1:]):
        peeked = offered[:options.batch]
        left = [c for c in peeked if c not in seen]
        assert left == nxt[:len(left)] and len(left) >= len(nxt) // 2, i
        # then the first step from the batch's predicted best (evaluated ones passed over)
        step = next_step(space, Tracker(lambda c: None), predicted_best(batch, options), options,
                         skip=run.asked[i][3] | set(batch))
        assert offered[len(peeked):] == step


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


@pytest.mark.parametrize("strategy", ["model", "phased"])
def test_one_worker_never_works_out_what_to_offer_ahead(monkeypatch, strategy):
    """On one worker the guesses offered ahead (the next step's neighbourhood and its
    predictions, the next restart batch) are never computed: the search costs what it
    did.  On two they are."""
    from shadertune.search import local, model

    def unread(*a, **kw):
        raise AssertionError("an offer ahead was read")
        yield
    monkeypatch.setattr(local, "step_ahead", unread)
    monkeypatch.setattr(model, "step_ahead", unread)
    monkeypatch.setattr(local.FreshBatches, "peek", unread)
    be = FakeBackend(model=True)
    n = 150 if strategy == "model" else 400             # the phased plan: ~330 before its climbs
    budget = Budget(max_evals=n, spend_all=True)
    search = get_strategy(strategy)
    assert len(search(be.space(P), Evaluator(be, P, repeats=2, warmup=0), budget, fake_options(be))) == n
    with pytest.raises(AssertionError, match="an offer ahead was read"):
        search(be.space(P), Carrying(Evaluator(be, P, repeats=2, warmup=0), 2), budget, fake_options(be))
