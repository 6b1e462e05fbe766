"""Auto-selection: exact stored best, else nearest tuned shape, else the default."""
import pytest
from fake_backend import FakeBackend

from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.search import Budget, tune
from shadertune.selection.chain import select_config, shape_distance


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A store with 8x8x64 and 64x64x64 tuned (phased) on the fake backend."""
    path = tmp_path_factory.mktemp("sel") / "t.sqlite"
    be = FakeBackend()
    with Store(path) as s:
        for p in (Problem(8, 8, 64), Problem(64, 64, 64)):
            tune(be, p, store=s, repeats=1, warmup=0, budget=Budget(max_evals=120))
    return path


def test_no_store_gives_the_default_and_creates_nothing(tmp_path):
    be = FakeBackend()
    cfg, how = select_config(be, Problem(8, 8, 64), tmp_path / "none.sqlite")
    assert how == "default" and cfg == be.default_config(Problem(8, 8, 64))
    assert not (tmp_path / "none.sqlite").exists()


def test_default_store_location_is_used(tmp_path, monkeypatch, tuned):
    monkeypatch.setenv("SHADERTUNE_DB", str(tuned))
    assert select_config(FakeBackend(), Problem(8, 8, 64))[1] == "exact"


def test_exact_match_is_the_stored_best(tuned):
    be = FakeBackend()
    p = Problem(8, 8, 64)
    cfg, how = select_config(be, p, tuned)
    with Store(tuned) as s:
        assert s.best("fake", be.device().key, p, be.template_hash()).config == cfg
        cfg2, how2 = select_config(be, p, s)              # an open Store works too
    assert how == how2 == "exact" and cfg2 == cfg


def test_nearest_shape_by_log2_distance(tuned):
    be = FakeBackend()
    with Store(tuned) as s:
        best_small = s.best("fake", be.device().key, Problem(8, 8, 64), be.template_hash()).config
        best_big = s.best("fake", be.device().key, Problem(64, 64, 64), be.template_hash()).config
    cfg, how = select_config(be, Problem(12, 8, 64), tuned)       # d = 0.58 vs 5.4
    assert how == "nearest" and cfg == best_small
    cfg, how = select_config(be, Problem(40, 64, 64), tuned)      # d = 2.3 vs 0.68
    assert how == "nearest" and cfg == best_big


def test_nearest_only_takes_configs_valid_for_the_new_problem(tuned):
    be = FakeBackend()
    p = Problem(8, 8, 16)                   # np <= 16 here; the tuned bests have np = 22
    cfg, how = select_config(be, p, tuned)
    assert how == "nearest" and cfg["np"] <= 16
    assert be.space(p).why_invalid(cfg) is None


def test_other_dtype_trans_or_device_fall_back_to_default(tuned):
    be = FakeBackend()
    for p in (Problem(8, 8, 64, "float64"), Problem(8, 8, 64, trans_b=True)):
        assert select_config(be, p, tuned) == (be.default_config(p), "default")

    class OtherRenderer(FakeBackend):
        def device(self):
            d = super().device()
            return type(d)("fake", "x", "another GPU", d.driver, d.limits)
    assert select_config(OtherRenderer(), Problem(8, 8, 64), tuned)[1] == "default"
    # the same renderer under another driver version: its results stand in
    # (tests/test_results_survive.py)


def test_an_unusable_store_warns_and_gives_the_default(tmp_path):
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"junk" * 1000)
    with pytest.warns(RuntimeWarning, match="ignoring the tuning store"):
        assert select_config(FakeBackend(), Problem(8, 8, 64), path)[1] == "default"


def test_shape_distance():
    assert shape_distance(Problem(8, 8, 8), Problem(8, 8, 8)) == 0
    assert shape_distance(Problem(16, 4, 8), Problem(8, 8, 8)) == pytest.approx(2.0)
    assert shape_distance(Problem(0, 1, 1), Problem(1, 1, 1)) == 0
