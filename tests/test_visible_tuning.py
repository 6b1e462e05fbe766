"""Visible tuning (issue 43 item 1): tune() shows the search's progress unless
progress=False and logs each shape's start and end with the device; the search CLI
starts by naming the backend, the device and its renderer; SHADERTUNE_PRINT_TUNING=1
makes matmul say which config it runs and why, once per call key."""
import io
import logging

import numpy as np
import pytest
from fake_backend import FakeBackend
from tqdm import tqdm

import shadertune
from shadertune.front import print_tuning
from shadertune.selection import chain as sel
from shadertune.search import progress as progress_mod
from shadertune.search.__main__ import main as search_main

DEVICE = "fake renderer | 1.0"


def test_tune_shows_progress_and_logs_each_shape_with_the_device(tmp_path, capsys, caplog):
    be = FakeBackend()
    with caplog.at_level(logging.INFO, logger="shadertune"):
        rs = shadertune.tune([(8, 8, 64), (16, 8, 64)], backend=be, evaluations=3,
                             db=tmp_path / "t.sqlite", train=False)
    assert [r.evaluated for r in rs] == [3, 3]
    err = capsys.readouterr().err           # not a terminal: the progress's plain lines
    assert "1/2 8x8x64 float32: searching (budget 3 evaluations)" in err
    assert "2/2 16x8x64 float32: done: 3 evaluations" in err
    lines = [r.getMessage() for r in caplog.records if r.name == "shadertune.tuning"]
    assert len(lines) == 4
    assert lines[0].startswith(f"tuning 8x8x64 float32 on fake ({DEVICE}): at most 3 evaluations")
    assert lines[1].startswith(f"tuned 8x8x64 float32 on fake ({DEVICE}): ")
    assert "GFLOP/s" in lines[1] and "3 configs in" in lines[1]


def test_progress_false_shows_none(tmp_path, capsys):
    shadertune.tune((8, 8, 64), backend=FakeBackend(), evaluations=2, db=tmp_path / "t.sqlite",
                    train=False, progress=False)
    assert capsys.readouterr().err == ""


def test_outside_a_notebook_there_is_no_widget():
    assert progress_mod.notebook_bar() is None


def test_in_a_notebook_the_bar_is_tqdm_auto_s_widget(monkeypatch, capsys):
    """A Jupyter kernel does not run here: its widget class is stood in for by a tqdm
    that records what it was given (the choice of class is what is tested)."""
    made = []

    class Widget(tqdm):
        def __init__(self, *a, **kw):
            made.append(kw)
            super().__init__(*a, file=io.StringIO(), **kw)
    monkeypatch.setattr(progress_mod, "notebook_bar", lambda: Widget)
    bar = progress_mod.Progress("8x8x64 float32", total=3)
    bar.update(type("R", (), {"gflops": 2.0})())
    bar.close()
    assert bar.mode == "off" and len(made) == 1 and made[0]["total"] == 3
    assert "file" not in made[0] and capsys.readouterr().err == ""


def test_the_search_cli_names_backend_device_and_renderer(tmp_path, capsys):
    args = ["--backend", "fake_backend:FakeBackend", "--size", "8x8x64", "--budget", "2",
            "--db", str(tmp_path / "t.sqlite")]
    assert search_main(args) == 0
    head = capsys.readouterr().err.splitlines()[0]
    assert head == ("shadertune.search: tuning on the fake backend: renderer fake renderer "
                    "(vendor shadertune), driver 1.0")
    assert search_main(args + ["-q"]) == 0
    assert "tuning on" not in capsys.readouterr().err


# --- SHADERTUNE_PRINT_TUNING ------------------------------------------------------

@pytest.fixture
def printing(monkeypatch):
    monkeypatch.setenv(print_tuning.ENV, "1")
    print_tuning.reset()
    sel.forget()
    yield
    monkeypatch.delenv(print_tuning.ENV)
    print_tuning.reset()


def _said(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("shadertune: matmul")]


def test_print_tuning_says_each_choice_once_per_key(printing, tmp_path, capsys):
    be = FakeBackend()
    A, B = np.ones((8, 64), np.float32), np.ones((64, 8), np.float32)
    db = tmp_path / "none.sqlite"
    for _ in range(3):
        C = shadertune.matmul(A, B, backend=be, db=db)
    assert np.all(C == 64)
    (line,) = _said(capsys)
    assert line.startswith(f"shadertune: matmul 8x8x64 float32 on fake ({DEVICE}): config ")
    assert "auto (default): the backend's default config" in line
    shadertune.matmul(A, B, backend=be, config="fast", db=db)
    shadertune.matmul(A, B, backend=be, config={"np": 4}, db=db)
    shadertune.matmul(A, B, backend=be, config="default", db=db)
    shadertune.matmul(np.ones((4, 64), np.float32), B, backend=be, config="default", db=db)
    said = _said(capsys)
    assert len(said) == 4
    assert "preset 'fast' (the default config" in said[0]
    assert "np=4" in said[1] and "the knobs given (np=4); the others from the default config" in said[1]
    assert "config='default'" in said[2] and "4x8x64 float32" in said[3]


def test_print_tuning_is_off_unless_set_and_read_once(monkeypatch, tmp_path, capsys):
    be = FakeBackend()
    A, B = np.ones((8, 64), np.float32), np.ones((64, 8), np.float32)
    monkeypatch.delenv(print_tuning.ENV, raising=False)
    print_tuning.reset()
    shadertune.matmul(A, B, backend=be, db=tmp_path / "none.sqlite")
    monkeypatch.setenv(print_tuning.ENV, "1")         # read once: no effect until reset()
    shadertune.matmul(A, B, backend=be, config="default", db=tmp_path / "none.sqlite")
    assert _said(capsys) == []
    monkeypatch.setenv(print_tuning.ENV, "0")
    print_tuning.reset()
    shadertune.matmul(A, B, backend=be, config="fast", db=tmp_path / "none.sqlite")
    assert _said(capsys) == []
    print_tuning.reset()


def test_print_tuning_goes_to_the_logger_where_logging_shows_it(printing, tmp_path, capsys, caplog):
    be = FakeBackend()
    with caplog.at_level(logging.INFO, logger="shadertune.print_tuning"):
        shadertune.matmul(np.ones((8, 64), np.float32), np.ones((64, 8), np.float32), backend=be,
                          config="default", db=tmp_path / "none.sqlite")
    assert _said(capsys) == []
    assert [r.getMessage() for r in caplog.records if r.name == "shadertune.print_tuning"][0].startswith(
        "shadertune: matmul 8x8x64 float32 on fake")
