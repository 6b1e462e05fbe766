"""The model strategy ranks a space in a child process where the backend offers a host
predictor (search/ranking.py): the same list, the same search, the lock left free."""
import importlib

import pytest

from fake_backend import FakeBackend
from shadertune.backends.cuda import CUDABackend
from shadertune.core.problem import Problem
from shadertune.search import Budget, tune
from shadertune.search import ranking
from shadertune.search.model import ranked_configs
from shadertune.search.options import SearchOptions

pytest.importorskip("cloudpickle")


def test_a_child_ranks_a_cuda_space_as_the_search_would_here():
    be, p = CUDABackend(), Problem(32, 48, 40)
    space = be.space(p)
    here = ranked_configs(space, SearchOptions(cost_model=lambda cs: be.predict_ms(p, cs)))
    child = ranking.child_ranker(p, be.host_predictor, 0, SearchOptions.rank_limit)(space)
    assert child == here and len(here) > 10


def test_the_model_search_is_the_same_with_its_ranking_in_a_child(monkeypatch):
    p = Problem(16, 16, 96)
    in_child = FakeBackend(model=True)
    a = tune(in_child, p, strategy="model", budget=Budget(40), repeats=2)
    monkeypatch.setattr(importlib.import_module("shadertune.search.tune"), "child_ranker",
                        lambda *a, **k: None)
    here = FakeBackend(model=True)
    b = tune(here, p, strategy="model", budget=Budget(40), repeats=2)
    assert [r["config"] for r in a["results"]] == [r["config"] for r in b["results"]]
    assert here.predicted > in_child.predicted + 1000      # the space was predicted elsewhere


def test_a_child_that_cannot_rank_leaves_the_ranking_here():
    p = Problem(16, 16, 96)
    be = FakeBackend(model=True)
    # a predictor that fails in the child (its error comes back): the caller ranks
    broken = ranking.child_ranker(p, lambda: (lambda problem, configs: 1 / 0), 0, 10)
    assert broken(be.space(p)) is None


def test_the_child_starts_ranking_when_the_search_begins(monkeypatch):
    """The ranking is sent to the child before the first evaluation and waited for only
    when the search first needs a ranked config: the child ranks while configs are timed."""
    events = []
    real_start = ranking.ChildRanker.start

    def start(self, space):
        events.append("start")
        wait = real_start(self, space)

        def waited():
            events.append("wait")
            return wait()
        return waited
    monkeypatch.setattr(ranking.ChildRanker, "start", start)

    class Listed(FakeBackend):      # a candidate list that fills the first batch, as CUDA's does
        def candidates(self, problem, n):
            return self.space(problem).configs()[:n]
    p = Problem(16, 16, 96)
    out = tune(Listed(model=True), p, strategy="model", budget=Budget(200), repeats=2,
               on_result=lambda *a: events.append("result"))
    assert out["results"]
    assert events[0] == "start" and events.count("start") == 1
    assert "wait" in events and events.index("wait") > events.index("result")


def test_a_budget_without_room_for_a_restart_ranks_only_if_asked(monkeypatch):
    # a first use's few evaluations: no child is set ranking for a restart that never comes
    started = []
    real_start = ranking.ChildRanker.start
    monkeypatch.setattr(ranking.ChildRanker, "start",
                        lambda self, space: started.append(1) or real_start(self, space))

    class Listed(FakeBackend):
        def candidates(self, problem, n):
            return self.space(problem).configs()[:n]
    p = Problem(16, 16, 96)
    most = SearchOptions.top + SearchOptions.step_evals
    tune(Listed(model=True), p, strategy="model", budget=Budget(most), repeats=2)
    assert started == []
    tune(Listed(model=True), p, strategy="model", budget=Budget(most + 1), repeats=2)
    assert started == [1]
