"""The learned performance model on synthetic stores: features, training, saving,
reloading, retraining on growth, the selection chain, explanations, no data."""
import json
import os
import random
import shutil
import sys

import numpy as np
import pytest
from subproc import run_python
from fake_backend import FakeBackend
from perfmodel_synthetic import DEVICE, TEMPLATES, TRAIN, fill, put, true_gflops

from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.perfmodel import Featurizer, PerfModel, model_for, saved
from shadertune.cli.perfmodel import main as perfmodel_main
from shadertune.perfmodel.data import TrainingData, training_data
from shadertune.perfmodel.validate import validate
from shadertune.core.problem import Problem
from shadertune.perfmodel.guided import tune
from shadertune.search import Budget
from shadertune.selection.chain import select, select_config

# 20 shapes none of TRAIN has: tall and wide, small and large K
_rng = random.Random(5)
HELDOUT = [Problem(_rng.randint(8, 200), _rng.randint(8, 200), _rng.randint(8, 100)) for _ in range(20)]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The synthetic training store, filled once: 60 configs of each TRAIN problem."""
    path = tmp_path_factory.mktemp("synthetic") / "template.sqlite"
    with Store(path) as s:
        fill(s, TRAIN)
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")    # all of it in the one file
    return path


@pytest.fixture
def store(template, tmp_path):
    """A copy of the template for a test that writes or retrains (a model per path)."""
    path = tmp_path / "s.sqlite"
    shutil.copy(template, path)
    with Store(path) as s:
        yield s


@pytest.fixture(scope="module")
def shared(template):
    """The template itself, for tests that only read: one model for all of them (trained
    here, as a search's end would: auto only reads it)."""
    with Store(template) as s:
        model_for(FakeBackend(), s)
        yield s


# --- features --------------------------------------------------------------

def test_features_encode_numbers_text_and_mixed_knobs():
    p = Problem(64, 32, 16, trans_b=True)
    train = [Config(glsl="330", mc="1x4", unroll=4, np=8), Config(glsl="450", mc="2x2", unroll="full", np=16)]
    f = Featurizer("fake").fit([(p, c) for c in train])
    assert "knob:glsl" in f.names and "knob:mc=1x4" in f.names and "knob:unroll=full" in f.names
    assert "knob:mc" not in f.names              # text only: indicators, no numeric column
    row = dict(zip(f.names, f.transform(p, [Config(glsl="450", mc="1x2", unroll="full", np=8)])[0]))
    assert row["knob:glsl"] == 450 and row["knob:np"] == 8
    assert row["knob:unroll"] == 0 and row["knob:unroll=full"] == 1     # mixed knob: both columns
    assert row["knob:mc=1x4"] == row["knob:mc=2x2"] == 0                 # unseen text: no indicator
    assert row["trans_b"] == 1 and row["log2_M"] == 6 and row["log2_M_over_N"] == 1
    missing = dict(zip(f.names, f.transform(p, [Config(glsl="330", mc="1x4", unroll=1)])[0]))
    assert missing["knob:np"] == -1


def test_a_config_the_backend_cannot_describe_keeps_its_knob_features():
    from shadertune.perfmodel.features import DERIVED, MISSING, register_derived
    p = Problem(64, 32, 16)
    cfgs = [Config(a=1), Config(a=2), Config(a=0)]

    @register_derived("strict")
    def strict(problem, cfg, limits):
        return {"inverse": 1.0 / cfg["a"]}         # a = 0: ZeroDivisionError
    try:
        f = Featurizer("strict").fit([(p, c) for c in cfgs])
        rows = [dict(zip(f.names, r)) for r in f.transform(p, cfgs)]
        assert [r["derived:missing"] for r in rows] == [0, 0, 1]
        assert rows[2]["derived:inverse"] == MISSING and rows[2]["knob:a"] == 0
        assert rows[0]["derived:inverse"] == 1 and rows[1]["derived:inverse"] == 0.5
        data = TrainingData("strict", "dev", "th")
        for q in (Problem(8, 8, 8), Problem(16, 16, 16), Problem(32, 32, 32)):
            for a in range(4):
                data.problems.append(q)
                data.configs.append(Config(a=a))
                data.ms.append(0.001 * (a + 1))     # a = 0 is the fastest
                data.errors.append(1e-7)
        model = PerfModel.train(data)
        assert model.rank(p, cfgs)[0][1] == Config(a=0)     # learnt from its knob and the marker
    finally:
        DERIVED.pop("strict")


def test_gl_and_cuda_derived_features_need_no_gpu_context():
    from shadertune.backends.gl.space import gl_space
    from shadertune.backends.cuda.features import cuda_features
    from shadertune.backends.gl.features import gl_features
    p = Problem(100, 60, 70)
    space = gl_space(p, {"gl_version": 450, "image_store": True, "fbo_no_attachments": True,
                         "max_image_units": 8, "max_fragment_image_uniforms": 8})
    mrt = space.phases.plan_for("fragment").start
    image = next(c for c in space.configs() if c["out"] == "image" and c["block_h"] == 8)
    compute = gl_space(p, {"gl_version": 450, "compute": True, "max_compute_shared_bytes": 49152,
                           "max_compute_invocations": 1024, "max_ssbo_bytes": 1 << 30,
                           "compute_units": 8}).phases.plan_for("compute").start
    g, i, c = (gl_features(p, cfg, {}) for cfg in (mrt, image, compute))
    assert list(g) == list(i) == list(c)                         # the same names on both families
    assert c["compute"] == 1 and g["compute"] == 0 and c["threads"] >= 32 and c["outputs_per_fragment"] == 0
    assert g["padding"] >= 1 and g["log2_passes"] >= 0 and g["outputs_per_fragment"] == 32
    assert i["padding"] >= 1 and i["outputs_per_fragment"] == 8 * image["block_w"]
    # an FFMA, a split-K and a warpgroup-MMA config (run V's bests); sm_90 limits without a GPU
    base = dict(BK=32, BM=128, BN=64, DB=1, KG=1, KL=1, KR=0, MMA=4, PAD=4, ST=3, TM=4, TN=4, VEC=4,
                WM=64, WN=64, trans=1)
    cfgs = [Config(base), Config(base, MMA=0, ST=2, TM=8, TN=8, WM=32, WN=64, KL=2),
            Config(base, MMA=3, WN=32, KG=8, KR=1)]
    from shadertune.backends.cuda.device import DEFAULT_LIMITS
    feats = [cuda_features(Problem(2048, 64, 2048), c, DEFAULT_LIMITS) for c in cfgs]
    assert len({tuple(f) for f in feats}) == 1                  # the same names for every config
    assert all(f["waves"] > 0 and 0 < f["wave_efficiency"] <= 1 for f in feats)
    assert len({f["log2_model_cycles"] for f in feats}) > 1      # the analytical model is an input


# --- training, saving, reloading, retraining -----------------------------------

def test_trains_saves_next_to_the_store_and_predicts(store):
    be = FakeBackend()
    model, note = model_for(be, store)
    assert note == "trained" and model.meta["rows"] == 480 and len(model.problems) == len(TRAIN)
    path = saved.model_path(store.path, "fake", DEVICE, TEMPLATES)
    assert path.exists() and path.parent == store.path.parent / "s.sqlite.models"
    p = Problem(150, 20, 40)
    cfgs = be.space(p).configs()[:400]
    ms = model.predict_ms(p, cfgs)
    assert len(ms) == len(cfgs) and all(m > 0 for m in ms)
    truth = [true_gflops(p, c) for c in cfgs]
    pred = model.predict_gflops(p, cfgs)
    rho = np.corrcoef(np.argsort(np.argsort(truth)), np.argsort(np.argsort(pred)))[0, 1]
    assert rho > 0.8                                             # rank correlation on an unseen shape


@pytest.mark.slow
def test_a_saved_model_is_usable_by_another_process(store, tmp_path):
    """Configs in a saved model are looked up by hash in the process that loads it
    (string hashes differ between processes)."""
    be = FakeBackend()
    model, _ = model_for(be, store)
    path = saved.model_path(store.path, "fake", DEVICE, TEMPLATES)
    code = ("import sys; from shadertune.core.config import Config; from shadertune.perfmodel import saved; "
            "m = saved.load(sys.argv[1]); c = m.verified_configs('float32')[0]; "
            "assert Config(c.to_dict()) in {c: 1}, 'stale hash'")
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"      # not this process's
    r = run_python(code, path, env={"PYTHONHASHSEED": seed})
    assert r.returncode == 0, r.stderr


def test_reload_from_file_gives_the_same_predictions(store):
    be = FakeBackend()
    m1, _ = model_for(be, store)
    saved.forget()
    m2, note = model_for(be, store)
    assert note == "loaded" and m2 is not m1
    p, cfgs = Problem(40, 30, 10), be.space(Problem(40, 30, 10)).configs()[:50]
    assert m1.predict_ms(p, cfgs) == m2.predict_ms(p, cfgs)


@pytest.mark.slow
def test_a_corrupt_or_foreign_model_file_is_retrained(store):
    be = FakeBackend()
    model, _ = model_for(be, store)
    path = saved.model_path(store.path, "fake", DEVICE, TEMPLATES)
    path.write_bytes(b"not a model")
    saved.forget()
    assert model_for(be, store)[1] == "trained"
    model.meta["sklearn"] = "0.0-other"           # saved by another scikit-learn
    saved.save(model, path)
    saved.forget()
    assert model_for(be, store)[1] == "trained"


@pytest.mark.slow
def test_retrained_when_the_store_grows(store):
    be = FakeBackend()
    m1, _ = model_for(be, store)
    put(store, Problem(128, 16, 64), be.space(Problem(128, 16, 64)).configs()[-1])  # one more row
    m2, note = model_for(be, store)
    assert note == "loaded" and m2 is m1                         # under the growth threshold
    fill(store, [Problem(50, 50, 50)], per_problem=10, seed=3)   # a new problem
    m3, note = model_for(be, store)
    assert note == "trained" and "50x50x50:float32:NN" in m3.problems
    fill(store, [Problem(128, 16, 64)], per_problem=200, seed=9)  # many more rows, known problems
    m4, note = model_for(be, store)
    assert note == "trained" and m4.meta["rows"] > m3.meta["rows"] * 1.1
    assert model_for(be, store)[1] == "loaded"                   # unchanged store: one count query


def test_a_store_without_verified_results_has_no_model(tmp_path, capsys):
    be = FakeBackend()
    with Store(tmp_path / "bad.sqlite") as s:
        for p in TRAIN:
            for c in be.space(p).configs()[:5]:
                put(s, p, c, status="wrong")
        model, note = model_for(be, s)
        assert model is None and "0 verified results of 0 problems" in note
        sel = select(be, TRAIN[0], s)
        assert sel.how == "default" and any("model: no learned model" in w for w in sel.passed_over)
    code = perfmodel_main(["train", "--backend", "fake_backend:FakeBackend", "--db", str(tmp_path / "bad.sqlite")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "a model needs 3 problems" in err[0]


def test_without_scikit_learn_auto_takes_the_nearest_rule(store, monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)     # as if the `model` extra were not installed
    sel = select(FakeBackend(), Problem(150, 20, 40), store)
    assert sel.how == "nearest"
    assert any("pip install shadertune[model]" in w for w in sel.passed_over)


def test_validation_scores_held_out_problems(shared):
    data = training_data(shared, "fake", DEVICE, TEMPLATES)
    v = validate(data, folds=4)
    assert v["problems"] == len(TRAIN) and v["folds"] == 4
    assert 0.8 < v["top1"] <= 1 and v["top1"] <= v["top8"] <= 1
    assert all(r["top1"] <= 1 for r in v["per_problem"])


# --- the selection chain ---------------------------------------------------------

def test_chain_exact_then_model_then_nearest_then_default(shared, tmp_path):
    be = FakeBackend()
    p = TRAIN[0]
    assert select_config(be, p, shared)[1] == "exact"
    sel = select(be, Problem(150, 20, 40), shared)
    assert sel.how == "model" and sel.predicted_gflops > 0 and len(sel.ranked) == 5
    model, _ = model_for(be, shared)
    # auto runs only configs verified somewhere or of the backend's list (the fake's: its default)
    assert sel.config in model.verified_configs("float32") + [be.default_config(Problem(150, 20, 40))]
    assert select(be, Problem(150, 20, 40), shared, use_model=False).how == "nearest"
    # a layout no stored problem has: the model still ranks (the layout is a feature)
    assert select(be, Problem(150, 20, 40, trans_a=True), shared).how == "model"
    # another element type is another regime: no model trained on it, no nearest shape
    sel = select(be, Problem(150, 20, 40, "float64"), shared)
    assert sel.how == "default" and "model: trained on no float64 problem" in sel.passed_over
    # with too few tuned problems for a model, the nearest rule
    with Store(tmp_path / "two.sqlite") as s2:
        fill(s2, TRAIN[:2])
        sel = select(be, Problem(150, 20, 40), s2)
        assert sel.how == "nearest" and "a model needs 3 problems" in " ".join(sel.passed_over)
        assert select(be, Problem(150, 20, 40, trans_a=True), s2).how == "default"


def test_model_beats_the_nearest_rule_on_held_out_shapes(shared):
    be = FakeBackend()
    model, _ = model_for(be, shared)
    got, near = [], []
    for p in HELDOUT:
        valid = [c for c in model.verified_configs(p.dtype) if be.space(p).why_invalid(c) is None]
        best = max(true_gflops(p, c) for c in valid)
        got.append(true_gflops(p, select(be, p, shared).config) / best)
        near.append(true_gflops(p, select(be, p, shared, use_model=False).config) / best)
    # the measured means: model 0.88, nearest 0.80 (a random pick among the same configs: 0.26)
    assert np.mean(got) >= 0.85 and np.mean(got) > np.mean(near) + 0.04


def test_explanation_says_which_rule_and_why(shared):
    be = FakeBackend()
    sel = select(be, Problem(150, 20, 40), shared)
    text = str(sel)
    assert "config (model):" in text and "predicted fastest" in text and "GFLOP/s" in text
    assert "ranked by the model" in text and "passed over: exact: no verified result" in text
    d = json.loads(json.dumps(sel.to_dict()))
    assert d["how"] == "model" and d["predicted_gflops"] == pytest.approx(sel.predicted_gflops)
    assert len(d["ranked"]) == 5 and d["config"] == sel.config.to_dict()
    exact = str(select(be, TRAIN[0], shared))
    assert "config (exact):" in exact and "GFLOP/s measured" in exact


def test_explain_cli(shared, capsys):
    args = ["explain", "--backend", "fake_backend:FakeBackend", "--db", str(shared.path)]
    assert perfmodel_main(args + ["--m", "150", "--n", "20", "--k", "40"]) == 0
    assert "config (model):" in capsys.readouterr().out
    assert perfmodel_main(args + ["--size", "40", "--no-model", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["how"] == "nearest"
    with pytest.raises(SystemExit) as e:
        perfmodel_main(args + ["--m", "150", "--n", "20"])
    assert e.value.code == 2 and "give --size N or --m M --n N --k K" in capsys.readouterr().err


def test_explain_cli_with_no_store_creates_none(tmp_path, capsys):
    db = tmp_path / "none.sqlite"
    assert perfmodel_main(["explain", "--backend", "fake_backend:FakeBackend", "--db", str(db),
                           "--size", "16"]) == 0
    assert "config (default):" in capsys.readouterr().out and not db.exists()


def test_train_cli_makes_no_store(tmp_path, capsys):
    db = tmp_path / "none.sqlite"
    assert perfmodel_main(["train", "--backend", "fake_backend:FakeBackend", "--db", str(db)]) == 1
    assert "no store at" in capsys.readouterr().err and not db.exists()


@pytest.mark.slow
def test_train_cli_reports_validation(store, capsys, tmp_path):
    out = tmp_path / "v.json"
    assert perfmodel_main(["train", "--backend", "fake_backend:FakeBackend", "--db", str(store.path),
                           "--folds", "2", "--json", str(out), "--compare"]) == 0
    text = capsys.readouterr().out
    assert "held-out problems (8, 2-fold): top-1 at" in text and "saved to" in text
    assert text.startswith("| learner ")                 # --compare (docs/perfmodel.md): every learner first
    doc = json.loads(out.read_text())
    assert doc["validation"]["problems"] == 8 and len(doc["compare"]) > 1


# --- the learned model as a search's cost model ------------------------------------

def test_tune_ranks_by_the_saved_learned_model(store):
    """The fake backend has no cost model of its own: without a saved model the model
    strategy starts from random draws; with one, it times the model's best guess right
    after the backend's candidates."""
    be = FakeBackend()
    p, q = Problem(150, 20, 40), Problem(140, 24, 36)
    entry = tune(be, p, strategy="model", store=store, repeats=1, warmup=0, budget=Budget(max_evals=3))
    assert entry["cost_model"] == "backend"
    model, note = model_for(be, store)              # trains and saves it
    assert note == "trained"
    saved.forget()                                  # tune() loads it from the file
    entry = tune(be, q, strategy="model", store=store, repeats=1, warmup=0, budget=Budget(max_evals=3))
    assert entry["cost_model"] == "learned"
    seeds = be.candidates(q, 24)
    best_guess = next(c for _, c in model.rank(q, be.space(q).configs()) if c not in seeds)
    assert [r["config"] for r in entry["results"]][len(seeds)] == best_guess.to_dict()


def test_no_learned_model_for_another_dtype(store):
    be = FakeBackend()
    model_for(be, store)
    from shadertune.perfmodel.guided import learned_cost_model
    assert learned_cost_model(be, store, Problem(150, 20, 40)) == model_for(be, store)[0].predict_ms
    assert learned_cost_model(be, store, Problem(150, 20, 40, "float64")) is None
