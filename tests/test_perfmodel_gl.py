"""Data generation, first-use tuning and explanations on the real GL backend (llvmpipe here)."""
import numpy as np
import pytest

import shadertune
from shadertune.db import Store
from shadertune.perfmodel import FirstUse, model_for
from shadertune.front.first_use import first_use_configs
from shadertune.perfmodel.sample import generate, log_uniform_problems
from shadertune.core.problem import Problem
from shadertune import explain
from shadertune.selection.chain import select


def test_log_uniform_problems_cover_the_range_and_layouts():
    ps = log_uniform_problems(200, 16, 512, seed=3)
    dims = np.array([(p.M, p.N, p.K) for p in ps])
    assert dims.min() >= 16 and dims.max() <= 512
    assert np.median(dims) < 120                       # log-uniform: the geometric middle is ~90
    assert {(p.trans_a, p.trans_b) for p in ps} == {(False, False), (False, True), (True, False), (True, True)}
    assert ps == log_uniform_problems(200, 16, 512, seed=3)
    assert {(p.trans_a, p.trans_b) for p in log_uniform_problems(20, 8, 9, layouts=["NT"])} == {(False, True)}
    with pytest.raises(ValueError, match="layouts"):
        log_uniform_problems(2, 8, 16, layouts=["XX"])
    with pytest.raises(ValueError, match="lo <= hi"):
        log_uniform_problems(2, 16, 8)


@pytest.fixture(scope="module")
def sampled(gl_backend, tmp_path_factory):
    """Four small problems, six configs each, sampled into a store on the GL backend."""
    path = tmp_path_factory.mktemp("glmodel") / "gl.sqlite"
    problems = [Problem(24, 16, 20), Problem(12, 28, 16, trans_b=True), Problem(32, 8, 24, trans_a=True),
                Problem(16, 20, 32)]
    with Store(path) as s:
        done = generate(gl_backend, s, problems, configs=6, repeats=2, warmup=0, seed=1)
    return path, done


def test_sampling_fills_the_store_with_verified_results(gl_backend, sampled):
    path, done = sampled
    assert done["problems"] == 4 and done["evaluated"] == 24 and done["ok"] >= 20
    with Store(path) as s:
        dev, th = gl_backend.device().key, gl_backend.template_hash()
        assert len(s.tuned_problems("gl", dev, th)) == 4
        for p in s.tuned_problems("gl", dev, th):
            assert s.ranked("gl", dev, p, th)[0].error <= 1e-5     # verified against float64


def test_sampling_is_model_guided_once_a_model_exists(gl_backend, sampled, tmp_path):
    import shutil
    path = tmp_path / "more.sqlite"
    shutil.copy(sampled[0], path)
    with Store(path) as s:
        assert model_for(gl_backend, s)[0] is not None
        done = generate(gl_backend, s, [Problem(20, 20, 12)], configs=5, repeats=1, warmup=0)
        assert done["evaluated"] == 5 and done["guided"] >= 1
        assert generate(gl_backend, s, [Problem(9, 9, 9)], configs=5, seconds=0)["evaluated"] == 0


def test_first_use_tunes_once_then_hits_the_store(gl_backend, sampled, tmp_path, rng):
    import shutil
    path = tmp_path / "fu.sqlite"
    shutil.copy(sampled[0], path)
    shutil.copytree(f"{sampled[0]}.models", f"{path}.models")    # the model sampling trained
    A = rng.standard_normal((18, 22)).astype(np.float32)
    B = rng.standard_normal((22, 14)).astype(np.float32)
    p = Problem(18, 14, 22)
    dev, th = gl_backend.device().key, gl_backend.template_hash()
    with Store(path) as s:
        assert select(gl_backend, p, s).how == "model"
        assert len(first_use_configs(gl_backend, p, s, 3)) == 3
        before = s.count()
    C = shadertune.matmul(A, B, db=path, tune=FirstUse(k=3, seconds=60))
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)
    with Store(path) as s:
        added = s.count() - before
        assert 1 <= added <= 3                                   # at most k configs timed
        assert len(s.results("gl", dev, p, th)) == added
        assert select(gl_backend, p, s).how == "exact"
    C2 = shadertune.matmul(A, B, db=path, tune="first-use")      # a cache hit: nothing measured
    np.testing.assert_allclose(C2, C, rtol=0, atol=0)
    with Store(path) as s:
        assert s.count() - before == added


def test_first_use_on_an_empty_store_times_the_default_and_samples(gl_backend, tmp_path):
    path = tmp_path / "empty.sqlite"
    A = np.ones((5, 7), np.float32)
    C = shadertune.matmul(A, A.T, db=path, tune=FirstUse(k=2, seconds=60))
    np.testing.assert_allclose(C, A @ A.T)
    with Store(path) as s:
        assert select(gl_backend, Problem(5, 5, 7), s).how == "exact"
        assert s.count() == 2


@pytest.mark.parametrize("backend", ["gl", "cuda"])
def test_tune_argument_errors(tmp_path, backend):
    """The same checks on both backends, before any device work (CUDA needs no GPU here)."""
    A = np.ones((3, 3), np.float32)
    with pytest.raises(ValueError, match="tune must be None, 'first-use'"):
        shadertune.matmul(A, A, backend=backend, db=tmp_path / "x.sqlite", tune="always")
    with pytest.raises(ValueError, match="needs config='auto'"):
        shadertune.matmul(A, A, backend=backend, db=tmp_path / "x.sqlite", config="default",
                          tune="first-use")
    with pytest.raises(ValueError, match="FirstUse.k"):
        FirstUse(k=0)
    assert not (tmp_path / "x.sqlite").exists()


def test_explain_for_operands(gl_backend, sampled):
    path, _ = sampled
    A, B = np.ones((24, 20)), np.ones((20, 16))
    s = explain(A, B, db=path)
    assert s.problem == Problem(24, 16, 20) and s.how == "exact" and "GFLOP/s measured" in s.reason
    s = explain(np.ones(20), B, db=path)                            # 1-D A: a row vector
    assert s.problem == Problem(1, 16, 20) and s.how in ("model", "nearest", "default")
    with pytest.raises(ValueError, match="not aligned"):
        explain(A, np.ones((21, 3)), db=path)


def test_first_use_on_a_read_only_store_warns_and_tunes_nothing(gl_backend, sampled):
    path, _ = sampled
    A = np.ones((9, 11), np.float32)
    with Store(path, readonly=True) as ro:
        before = ro.count()
        with pytest.warns(RuntimeWarning, match="needs a writable store.*9x7x11"):
            C = shadertune.matmul(A, np.ones((11, 7), np.float32), db=ro, tune="first-use")
        assert ro.count() == before
    np.testing.assert_allclose(C, 11.0)



def refuse_fitting(monkeypatch) -> None:
    """From here on, every scikit-learn regressor's fit and the project's training entry
    (PerfModel.train, learners.make) raise."""
    from sklearn.utils import all_estimators

    from shadertune.perfmodel import learners
    from shadertune.perfmodel.model import PerfModel

    def refuse(*a, **k):
        raise AssertionError("a model was fitted while auto read the store")
    for _, cls in all_estimators(type_filter="regressor"):
        monkeypatch.setattr(cls, "fit", refuse)
    monkeypatch.setattr(PerfModel, "train", classmethod(refuse))
    monkeypatch.setattr(learners, "make", refuse)


def test_auto_on_an_unseen_shape_fits_no_estimator(gl_backend, sampled, tmp_path, rng, monkeypatch):
    """Auto reads, tuning writes: with a store that holds enough verified results to
    train a model, matmul(config="auto") on a shape never tuned trains nothing, whether
    the store has outgrown its saved model (auto once retrained it in the call) or has
    none saved (auto once trained one, with cross-validation, in the call)."""
    import shutil

    from shadertune.selection import chain as selection
    from shadertune.perfmodel import saved
    from shadertune.perfmodel.measure import measure
    from shadertune.search import Budget
    path = tmp_path / "reads.sqlite"
    shutil.copy(sampled[0], path)
    with Store(path) as s:
        model, _ = model_for(gl_backend, s)            # what a search's end leaves beside the store
        assert model is not None and len(model.problems) == 4
        more = Problem(20, 24, 28)                     # the store outgrows it: one problem more
        measure(gl_backend, more, [gl_backend.default_config(more)], s, budget=Budget(max_evals=1),
                repeats=1, warmup=0)
        assert saved.is_stale(model, {p.key for p in s.tuned_problems(
            "gl", gl_backend.device().key, gl_backend.template_hash())}, model.meta["rows"] + 1)
    model_file = saved.model_path(path, "gl", gl_backend.device().key, gl_backend.template_hash())
    refuse_fitting(monkeypatch)
    A = rng.standard_normal((18, 22)).astype(np.float32)       # 18x14x22: never tuned
    B = rng.standard_normal((22, 14)).astype(np.float32)
    for has_model in (True, False):
        if not has_model:
            model_file.unlink()                        # enough results to train, no model saved
        saved.forget()
        selection.forget()
        C = shadertune.matmul(A, B, db=path)
        np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
        s = explain(A, B, db=path)
        assert s.how == ("model" if has_model else "nearest"), s
        if not has_model:
            assert any("no learned model saved" in w for w in s.passed_over)
        assert model_file.exists() == has_model        # nothing trained, nothing saved
