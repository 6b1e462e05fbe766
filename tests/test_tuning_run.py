"""Tune, then train the model (perfmodel/tuning_run.py): the one way the search command
line, shadertune.tune(), the demo and `perfmodel sample` write results and have the
learned model follow; a run that stops with an error, into a read-only store, or with
train=False trains nothing.  On the fake backend (instant) and a real store."""
import ast
import pathlib

import pytest

from fake_backend import FakeBackend
from shadertune.core.problem import Problem
from shadertune.db import Store
from shadertune.perfmodel import saved
from shadertune.perfmodel.tuning_run import TuningRun
from shadertune.search import Budget

pytest.importorskip("sklearn")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROBLEMS = [Problem(8, 8, 8), Problem(16, 8, 8), Problem(8, 16, 8), Problem(16, 16, 16)]


def model_file(backend, store) -> pathlib.Path:
    return saved.model_path(store.path, backend.name, backend.device().key, backend.template_hash())


def tune_all(run):
    for p in PROBLEMS:
        run.search(p, budget=Budget(8), repeats=1, warmup=0)


def test_the_model_is_trained_once_the_run_ends(tmp_path):
    be = FakeBackend()
    saved.forget()
    with Store(tmp_path / "t.sqlite") as store:
        with TuningRun(be, store) as run:
            tune_all(run)
            assert not model_file(be, store).exists()        # nothing trains while it runs
        assert run.evaluated == 4 * 8
        assert model_file(be, store).exists()


def test_a_run_that_fails_trains_nothing_and_keeps_what_it_measured(tmp_path):
    be = FakeBackend()
    saved.forget()
    with Store(tmp_path / "t.sqlite") as store:
        with pytest.raises(KeyboardInterrupt):
            with TuningRun(be, store) as run:
                tune_all(run)
                raise KeyboardInterrupt
        assert not model_file(be, store).exists()
        assert store.count_rows("1", []) == 4 * 8


def test_train_false_and_a_read_only_store_train_nothing(tmp_path):
    be = FakeBackend()
    saved.forget()
    with Store(tmp_path / "t.sqlite") as store:
        with TuningRun(be, store, train=False) as run:
            tune_all(run)
        assert not model_file(be, store).exists()
    with Store(tmp_path / "t.sqlite", readonly=True) as store:
        with TuningRun(be, store) as run:
            tune_all(run)                                    # every result replayed
        assert run.evaluated == 4 * 8 and run.finish() is None
        assert not model_file(be, store).exists()


def test_measure_counts_and_trains_as_a_search_does(tmp_path):
    be = FakeBackend()
    saved.forget()
    with Store(tmp_path / "t.sqlite") as store:
        with TuningRun(be, store) as run:
            for p in PROBLEMS:
                configs = list(be.space(p).configs())[:6]
                assert len(run.measure(p, configs, budget=Budget(6), repeats=1, warmup=0)) == 6
        assert run.evaluated == 24 and model_file(be, store).exists()


def test_only_a_tuning_run_trains_at_the_end_of_tuning():
    """The four places that tune and then train call TuningRun, and nothing else in the
    library calls train_if_stale (first-use tuning and `perfmodel train` train through
    model_for, on purpose: they train before they rank or to validate)."""
    callers = {}
    for f in (ROOT / "shadertune").rglob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                if name in ("train_if_stale", "TuningRun"):
                    callers.setdefault(name, set()).add(str(f.relative_to(ROOT)))
    assert callers["train_if_stale"] == {"shadertune/perfmodel/tuning_run.py"}
    assert callers["TuningRun"] == {"shadertune/cli/search.py", "shadertune/front/tuning.py",
                                    "shadertune/cli/demo.py", "shadertune/perfmodel/sample.py"}
