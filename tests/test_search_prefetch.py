"""Phased search announces each phase's configs so a backend can compile them in parallel."""
from fake_backend import FakeBackend

from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.search import Budget, Evaluator, get_strategy

PROBLEM = Problem(8, 8, 64)


class PrecompilingBackend(FakeBackend):
    def __init__(self, fail=False):
        super().__init__()
        self.batches, self.fail = [], fail

    def precompile(self, problem, configs):
        self.batches.append(list(configs))
        if self.fail:
            raise RuntimeError("compiler crashed")


def run(be, store=None, budget=None):
    space = be.space(PROBLEM)
    ev = Evaluator(be, PROBLEM, store=store, repeats=1, warmup=0)
    return get_strategy("phased")(space, ev, budget or Budget(max_evals=60)), space


def test_each_phase_is_announced_before_it_is_evaluated():
    be = PrecompilingBackend()
    results, space = run(be)
    assert be.batches, "no phase was announced"
    evaluated = {r.config for r in results}
    announced = [c for batch in be.batches for c in batch]
    assert all(c in space for c in announced)
    assert len(announced) == len(set(announced))          # nothing announced twice
    # what was built was announced first (except the start point and refinement steps)
    assert len(evaluated & set(announced)) >= len(evaluated) // 2


def test_configs_in_the_store_are_not_compiled_again(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        run(PrecompilingBackend(), store=s)
        be = PrecompilingBackend()
        run(be, store=s)
        assert be.batches == []                          # every config replayed: nothing to compile


def test_a_failing_precompile_never_stops_the_search():
    be = PrecompilingBackend(fail=True)
    results, _ = run(be)
    assert be.batches and any(r.ok for r in results)
