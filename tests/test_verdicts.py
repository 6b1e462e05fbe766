"""Stored verdicts judged against the tolerance in force (issue 14 item 3), and the seed."""
import json

import numpy as np
import pytest
from fake_backend import FakeBackend, is_unwritten, is_wrong

from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.search import Evaluator
from shadertune.cli.search import main
from shadertune.selection.chain import select_config

FAKE = "fake_backend:FakeBackend"
P = Problem(8, 8, 64)
SIZE = ["--m", "8", "--n", "8", "--k", "64"]
BASE = dict(glsl="450", fetch="texelFetch", unroll=1, np=22)
OK_CFG = Config(BASE, mc="1x2", mrt_h=2, mrt_w=2)
WRONG_CFG = Config(BASE, glsl="330", mc="2x2", mrt_h=2, mrt_w=2)      # C off by 1%
NAN_CFG = Config(BASE, mc="1x4", mrt_h=4, mrt_w=2)                    # C unwritten


def cli(tmp_path, *args):
    return main(["--backend", FAKE, "--db", str(tmp_path / "t.sqlite"), "-q", "--repeats", "2",
                 *SIZE, "--budget", "30", *args])


def report(path):
    return json.loads(path.read_text())["problems"][0]


def test_a_strict_run_does_not_fail_a_later_default_run(tmp_path, capsys):
    assert cli(tmp_path, "--tolerance", "1e-12") == 1            # float32 cannot reach it
    assert "no config passed verification" in capsys.readouterr().err
    rep = tmp_path / "r.json"
    assert cli(tmp_path, "--report", str(rep)) == 0
    p = report(rep)
    assert p["best"] is not None and p["best"]["error"] <= 1e-5
    assert p["measured"] > 0                 # the strict run's correct kernels were timed now


def test_a_strict_run_on_a_tuned_store_is_not_a_success(tmp_path, capsys):
    assert cli(tmp_path) == 0
    rep = tmp_path / "r.json"
    assert cli(tmp_path, "--tolerance", "1e-12", "--report", str(rep)) == 1
    assert "no config passed verification" in capsys.readouterr().err
    p = report(rep)
    assert p["best"] is None and p["cached"] > 0   # its path differs once all are wrong
    ok_then = [r for r in p["results"] if r["error"] is not None and r["error"] < 1e-5]
    assert ok_then and all(r["status"] == "wrong" and "tolerance 1e-12" in r["message"]
                           for r in ok_then)


def test_auto_never_picks_a_result_over_the_default_tolerance(tmp_path):
    # with tolerance 2%, the 1%-wrong trap configs (timed fastest) are stored as ok
    assert cli(tmp_path, "--tolerance", "0.02", "--strategy", "exhaustive", "--budget", "400") == 0
    be = FakeBackend()
    with Store(tmp_path / "t.sqlite") as s:
        loose = s.best("fake", be.device().key, P, be.template_hash(), tolerance=0.02)
    assert is_wrong(loose.config)                         # the loose run's best is a trap
    cfg, how = select_config(be, P, tmp_path / "t.sqlite")
    assert how == "exact" and not is_wrong(cfg) and not is_unwritten(cfg)


def test_the_evaluator_judges_stored_verdicts_again(tmp_path):
    be = FakeBackend()
    with Store(tmp_path / "t.sqlite") as s:
        ev = Evaluator(be, P, store=s, repeats=1, warmup=0)
        first = {c: ev(c) for c in (OK_CFG, WRONG_CFG, NAN_CFG)}
        assert [r.status for r in first.values()] == ["ok", "wrong", "wrong"]
        assert first[NAN_CFG].error is None and first[WRONG_CFG].error == pytest.approx(0.01, rel=0.01)

        loose = Evaluator(be, P, store=s, repeats=1, warmup=0, tolerance=0.5)
        again = {c: loose(c) for c in (OK_CFG, WRONG_CFG, NAN_CFG)}
        # wrong on its error alone: within 0.5, never timed, so measured now; NaN stays wrong
        assert (loose.measured, loose.cached) == (1, 2)
        assert [r.status for r in again.values()] == ["ok", "ok", "wrong"]
        assert again[NAN_CFG].to_dict() == first[NAN_CFG].to_dict()

        strict = Evaluator(be, P, store=s, repeats=1, warmup=0, tolerance=1e-9)
        r = strict(OK_CFG)
        assert (strict.measured, strict.cached) == (0, 1)
        assert r.status == "wrong" and "tolerance 1e-09" in r.message and r.times_ms
        # nothing stored was changed by judging it: ok where the default tolerance rules
        assert s.get("fake", be.device().key, P, OK_CFG, be.template_hash()).status == "ok"


def test_another_seed_replays_the_stored_verdicts(tmp_path):
    rep = tmp_path / "r.json"
    assert cli(tmp_path, "--seed", "0") == 0
    assert cli(tmp_path, "--seed", "5", "--report", str(rep)) == 0
    p = report(rep)
    assert p["measured"] == 0 and p["cached"] == p["evaluated"] == 30
    with Store(tmp_path / "t.sqlite") as s:
        assert {row["seed"] for row in s.rows()} == {0}


def test_a_kernels_error_differs_little_between_seeds(gl_backend):
    """What lets the seed stay out of the store's key (shadertune.core.verdict)."""
    p = Problem(16, 16, 64)
    ev = [Evaluator(gl_backend, p, seed=s, repeats=1, warmup=0) for s in range(4)]
    cfg = gl_backend.default_config(p)
    errors = np.array([e(cfg).error for e in ev])
    assert np.all(errors < 1e-5) and errors.max() < 3 * errors.min()
