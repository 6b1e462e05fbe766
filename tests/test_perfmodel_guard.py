"""auto's candidates (verified configs and the backend's analytical list), the guard
(the learned model against the backend's analytical model, validated when trained),
and the residual target; synthetic stores (tests/perfmodel_synthetic.py), no GPU."""
import json
import math
import pickle
import shutil

import numpy as np
import pytest
from fake_backend import FakeBackend
from perfmodel_synthetic import DEVICE, TEMPLATES, TRAIN, fill, put, true_gflops, true_ms

from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.perfmodel import PerfModel, model_for, saved
from shadertune.cli.perfmodel import main as perfmodel_main
from shadertune.perfmodel.data import TrainingData, training_data
from shadertune.perfmodel.features import BASELINES, DERIVED, Featurizer, register_derived
from shadertune.perfmodel.first_use_plan import ranked_space
from shadertune.perfmodel.guided import learned_cost_model
from shadertune.perfmodel.model import default_target, targets_for
from shadertune.perfmodel.validate import guard_of, validate
from shadertune.core.problem import Problem
from shadertune.selection.chain import analytical_candidates, select

NEW = Problem(150, 20, 40)             # no TRAIN problem


class ListedBackend(FakeBackend):
    """The fake with an analytical candidate list: the 3 truly fastest configs of the
    space (as a good cost model would list them), never measured in the stores here."""

    def candidates(self, problem, n=24):
        cfgs = self.space(problem).configs()
        return sorted(cfgs, key=lambda c: -true_gflops(problem, c))[:min(n, 3)]


class PerfectCostBackend(FakeBackend):
    """A cost model that is the synthetic truth: it validates at 100%, above any learner."""

    def predict_ms(self, problem, configs):
        return [true_ms(problem, c) for c in configs]


class InvertedCostBackend(FakeBackend):
    """A cost model that ranks the slowest config first: any learner validates above it."""

    def predict_ms(self, problem, configs):
        return [1.0 / true_ms(problem, c) for c in configs]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("guard") / "template.sqlite"
    with Store(path) as s:
        fill(s, TRAIN)
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture
def store(template, tmp_path):
    """A copy per test: each backend here trains (and saves) its own model."""
    path = tmp_path / "s.sqlite"
    shutil.copy(template, path)
    saved.forget()
    with Store(path) as s:
        yield s
    saved.forget()


# --- the candidates: verified configs and the analytical list -----------------------

def test_auto_ranks_verified_configs_and_the_analytical_list(store):
    be = ListedBackend()
    model, _ = model_for(be, store)
    listed = be.candidates(NEW)
    verified = [c for c in model.verified_configs("float32") if be.space(NEW).why_invalid(c) is None]
    assert not set(listed) & set(verified)                   # the list is new to the store
    assert analytical_candidates(be, NEW) == listed
    sel = select(be, NEW, store)
    union = list(dict.fromkeys(verified + listed))
    assert sel.how == "model" and sel.config == model.rank(NEW, union)[0][1]
    assert (f"among the {len(union)} candidates valid here ({len(verified)} verified on stored "
            f"problems, 3 more from the backend's analytical candidate list)") in sel.reason
    # the model ranks all of them: the list's configs are among its predictions
    preds = {c: g for g, c in model.rank(NEW, union)}
    assert sel.predicted_gflops == pytest.approx(max(preds.values()))
    # under a tolerance no stored result meets, the analytical list alone is ranked
    strict = select(be, NEW, store, tolerance=1e-9)
    assert strict.how == "model" and strict.config in listed
    assert "(0 verified on stored problems, 3 more" in strict.reason
    assert "comes from the analytical list" in strict.reason


def test_without_a_listed_candidate_or_a_verified_one_the_chain_goes_on(store):
    class Unlisted(FakeBackend):
        def candidates(self, problem, n=24):
            return []
    model_for(Unlisted(), store)                     # the writer trains; auto only reads
    sel = select(Unlisted(), NEW, store, tolerance=1e-9)
    assert sel.how == "default"
    assert any("none of the" in w and "the backend lists no candidate" in w for w in sel.passed_over)


def test_the_backend_default_joins_the_candidates_of_a_backend_without_a_list(store):
    """The base Backend's list is its default config: auto may take it, as
    config='default' would run it."""
    be = FakeBackend()
    model_for(be, store)                             # the writer trains; auto only reads
    sel = select(be, NEW, store, tolerance=1e-9)     # nothing verified within 1e-9
    assert sel.how == "model" and sel.config == be.default_config(NEW)


def test_first_use_ranks_a_space_seeded_with_the_analytical_list(store, monkeypatch):
    from shadertune.perfmodel import candidates
    monkeypatch.setattr(candidates, "ENUMERATE_UP_TO", 0)    # a sample, not all 11,520 configs
    be = ListedBackend()
    order = ranked_space(be, NEW, store)
    assert len(order) < len(be.space(NEW).configs()) / 2 and set(be.candidates(NEW)) <= set(order)


# --- the guard -----------------------------------------------------------------------

@pytest.mark.slow
def test_guard_falls_back_to_the_default_where_auto_loses_to_it_on_held_out_problems(store):
    """The guard judges auto's picks (the fold's model over auto's candidates) against
    the default config on held-out problems (the default's own measurement, else the
    cost model's pick in its place): a perfect cost model's pick beats them, so auto
    takes the default config."""
    be = PerfectCostBackend()
    model, note = model_for(be, store)
    assert note == "trained"
    g, v = model.guard, model.meta["validation"]
    assert g["analytical"] == pytest.approx(1.0) and g["learned"] < 1.0
    assert g["use"] == "analytical" and model.prefers_analytical()
    assert g["problems"] == len(TRAIN) and g["folds"] == 5
    assert g["scored"] == v["auto_scored"] >= 2 and g["vs_default_min"] < 1 - 0.03
    assert (g["learned"], g["analytical"]) == (v["auto"], v["default"])
    for r in v["per_problem"]:                # each held-out problem's pick is one auto may take
        if r["auto"] is not None:
            assert r["auto_vs_default"] == pytest.approx(r["auto"] / r["default"])
    sel = select(be, NEW, store)
    assert sel.how == "analytical" and sel.guard == g
    assert sel.config == be.default_config(NEW)              # what config="default" runs
    assert sel.predicted_gflops == pytest.approx(true_gflops(NEW, sel.config))
    assert "the backend's default config (its analytical model's pick" in sel.reason
    assert (f"{g['vs_default_mean']:.3f}x the default on average, {g['vs_default_min']:.3f}x at least, "
            f"on {g['scored']} held-out problems") in sel.reason
    text = str(sel)
    assert "config (analytical):" in text
    assert (f"guard: leave-problems-out top-1 on {len(TRAIN)} stored problems (5-fold): learned model "
            f"{100 * g['learned']:.1f}%, analytical model 100.0%: the default config") in text
    assert "auto takes the default config" in sel.model
    d = json.loads(json.dumps(sel.to_dict()))
    assert d["how"] == "analytical" and d["guard"]["use"] == "analytical"
    # a search and first use do not rank by it either
    assert learned_cost_model(be, store, NEW) is None
    order = ranked_space(be, NEW, store)
    assert order[0] == min(order, key=lambda c: true_ms(NEW, c))


@pytest.mark.slow
def test_guard_keeps_the_learned_model_where_it_validates_better(store):
    be = InvertedCostBackend()
    model, _ = model_for(be, store)
    g = model.guard
    assert g["use"] == "learned" and g["learned"] > g["analytical"] and not model.prefers_analytical()
    assert g["vs_default_mean"] >= 1 and g["vs_default_min"] >= 1 - 0.03
    sel = select(be, NEW, store)
    assert sel.how == "model" and sel.guard == g and "by the learned model" in sel.reason
    text = str(sel)
    assert "config (model):" in text and "ranked by the model" in text
    assert "ranked by the learned model" in text and "guard: leave-problems-out top-1" in text
    assert learned_cost_model(be, store, NEW) == model.predict_ms


def test_no_guard_without_an_analytical_model(store):
    be = FakeBackend()                        # predict_ms: None
    model, _ = model_for(be, store)
    assert model.guard is None and "validation" not in model.meta and not model.prefers_analytical()
    sel = select(be, NEW, store)
    assert sel.how == "model" and sel.guard is None and "guard:" not in str(sel)


@pytest.mark.slow
def test_guard_is_saved_with_the_model_and_reloaded(store):
    be = PerfectCostBackend()
    m1, _ = model_for(be, store)
    saved.forget()
    m2, note = model_for(be, store)
    assert note == "loaded" and m2 is not m1 and m2.guard == m1.guard and m2.prefers_analytical()
    path = saved.model_path(store.path, "fake", DEVICE, TEMPLATES)
    assert saved.load(path).guard == m1.guard
    # a model saved before the guard existed (format 5) is retrained, not used without one
    m1.meta["format"] = 5
    del m1.meta["guard"]
    path.unlink()
    saved.legacy_path(path).write_bytes(pickle.dumps(m1))
    saved.forget()
    m3, note = model_for(be, store)
    assert note == "trained" and m3.guard is not None


def test_guard_of_a_validation():
    v = {"problems": 6, "folds": 3, "top1": 0.9, "top8": 0.99, "cost_model": 0.93,
         "learner": "hgb", "target": "log_gflops"}
    assert guard_of(v)["use"] == "analytical"
    assert guard_of(dict(v, top1=0.93))["use"] == "learned"      # a tie keeps the learned model
    assert guard_of(dict(v, cost_model=None)) is None
    assert guard_of({"problems": 0}) is None
    # validated against the default config: better on average and within noise on each problem
    d = dict(v, auto_scored=5, auto=0.95, default=0.9, auto_vs_default_mean=1.06, auto_vs_default_min=0.98)
    assert guard_of(d)["use"] == "learned" and guard_of(d)["learned"] == 0.95
    assert guard_of(dict(d, auto_vs_default_min=0.96))["use"] == "analytical"   # one problem lost
    assert guard_of(dict(d, auto_vs_default_mean=0.99))["use"] == "analytical"  # worse on average
    assert guard_of(dict(d, auto_vs_default_mean=1.0, auto_vs_default_min=0.97))["use"] == "learned"
    assert guard_of(dict(d, auto_scored=1))["use"] == "analytical"              # nothing validated


def test_a_store_with_no_verified_results_takes_the_default(tmp_path):
    be = PerfectCostBackend()
    with Store(tmp_path / "bad.sqlite") as s:
        for p in TRAIN:
            for c in be.space(p).configs()[:5]:
                put(s, p, c, status="wrong")
        sel = select(be, NEW, s)
        assert sel.how == "default" and sel.config == be.default_config(NEW) and sel.guard is None
        assert any("0 verified results of 0 problems" in w for w in sel.passed_over)


def test_train_cli_writes_the_guard(store, tmp_path, capsys):
    out = tmp_path / "v.json"
    assert perfmodel_main(["train", "--backend", "test_perfmodel_guard:PerfectCostBackend",
                           "--db", str(store.path), "--folds", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "the backend's analytical model's top-1 at 100.0%" in text
    doc = json.loads(out.read_text())
    assert doc["guard"]["use"] == "analytical" and doc["guard"]["folds"] == 3


# --- the residual target ---------------------------------------------------------------

def test_residual_target_corrects_the_analytical_model():
    """A backend whose derived features carry its analytical model (here: log2 of the
    synthetic truth's time, off by a factor per mc packing): the residual the trees
    learn is that factor, and the model predicts the truth on a new shape."""
    name = "fake-residual"
    miss = {"1x4": 2.0, "2x2": 1.0, "1x2": 0.7, "1x1": 1.5}

    @register_derived(name, baseline="log2_analytical")
    def feats(p, cfg, limits):
        return {"log2_analytical": math.log2(true_ms(p, cfg) * 1e6 * miss[cfg["mc"]])}
    try:
        assert targets_for(name) == ("log_gflops", "log_ms", "residual")
        assert default_target(name) == "residual" and default_target("fake") == "log_gflops"
        be = FakeBackend()
        data = TrainingData(name, DEVICE, TEMPLATES)
        for p in TRAIN:
            for c in be.space(p).configs()[::7]:
                data.problems.append(p)
                data.configs.append(c)
                data.ms.append(true_ms(p, c))
                data.errors.append(1e-7)
        model = PerfModel.train(data)
        assert model.target == "residual" and "over the analytical model's" in model.summary()
        cfgs = be.space(NEW).configs()[::5]
        pred = model.predict_gflops(NEW, cfgs)
        truth = np.array([true_gflops(NEW, c) for c in cfgs])
        assert np.median(np.abs(np.log(pred / truth))) < 0.1
        best = max(cfgs, key=lambda c: true_gflops(NEW, c))
        assert true_gflops(NEW, model.rank(NEW, cfgs)[0][1]) >= 0.95 * true_gflops(NEW, best)
        X = model.featurizer.transform(NEW, cfgs[:3])
        assert model.featurizer.baseline_log_gflops(X) is not None
    finally:
        DERIVED.pop(name)
        BASELINES.pop(name)


def test_residual_target_needs_an_analytical_model(template):
    assert "residual" not in targets_for("fake") and "residual" in targets_for("cuda")
    assert default_target("cuda") == "residual"
    with Store(template) as s:
        data = training_data(s, "fake", DEVICE, TEMPLATES)
    with pytest.raises(ValueError, match="residual target needs an analytical model"):
        PerfModel.train(data, target="residual")
    assert Featurizer("fake").fit([(NEW, Config(glsl="450", np=8))]).baseline_log_gflops(
        np.zeros((1, 11))) is None
    v = validate(data, target="log_ms", folds=3)
    assert v["target"] == "log_ms" and v["problems"] == len(TRAIN)
