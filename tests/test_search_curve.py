"""The best-so-far curve bench-cuda and search-quality report."""
from fake_backend import FakeBackend

from shadertune.core.problem import Problem
from shadertune.search import Budget, tune
from shadertune.search.curve import best_so_far, best_within


def r(ts, status="ok", times=(1.0,)):
    return {"timestamp": ts, "status": status, "times_ms": list(times)}


def test_points_where_the_best_improves():
    results = [r(100.0, times=(3.0, 5.0, 4.0)), r(101.0, "wrong", (0.5,)), r(102.5, times=(4.5,)),
               r(103.0, times=(2.0,)), r(104.0, "compile_failed", ())]
    curve = best_so_far(results)
    assert curve == [{"evals": 1, "seconds": 0.0, "best_ms": 4.0},
                     {"evals": 4, "seconds": 3.0, "best_ms": 2.0}]
    assert best_so_far(results, t0=99.0)[0]["seconds"] == 1.0
    assert best_so_far(results, t0=200.0)[0]["seconds"] == 0.0     # replayed from the store
    assert best_within(curve, 3) == 4.0 and best_within(curve, 4) == 2.0 and best_within(curve, 0) is None
    assert best_so_far([]) == []


def test_curve_of_a_search_ends_at_its_best():
    e = tune(FakeBackend(), Problem(8, 8, 64), budget=Budget(max_evals=40), repeats=1, warmup=0)
    curve = best_so_far(e["results"])
    assert curve[-1]["best_ms"] == e["best"]["median_ms"] and curve[-1]["evals"] <= 40
    assert [p["best_ms"] for p in curve] == sorted((p["best_ms"] for p in curve), reverse=True)
