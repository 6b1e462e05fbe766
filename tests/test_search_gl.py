"""End to end on the real GL backend (llvmpipe in CI) at a tiny, ragged shape."""
import json

from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.search import Budget, tune
from shadertune.cli.search import main
from shadertune.search.report_json import check_report
from shadertune.search.restrict import RestrictedBackend
from shadertune.selection.chain import select_config

P = Problem(16, 24, 20)


def test_phased_search_on_gl_verifies_times_stores_and_resumes(gl, tmp_path):
    jiang = RestrictedBackend(gl, {"family": ("fragment",)})          # Jiang's phases (--fix family=fragment)
    with Store(tmp_path / "t.sqlite") as s:
        e = tune(jiang, P, strategy="phased", budget=Budget(max_evals=12), store=s, repeats=3)
        assert e["evaluated"] == e["measured"] == 12 and e["cached"] == 0
        assert e["space_size"] < e["full_space_size"]               # pruned before compiling
        ok = [r for r in e["results"] if r["status"] == "ok"]
        assert ok, [r["message"] for r in e["results"]]
        # 3 timed runs (1 when the checked run was very slow: a loaded CI box)
        assert all(1 <= len(r["times_ms"]) <= 3 and r["error"] < 1e-5 for r in ok)
        assert any(len(r["times_ms"]) == 3 for r in ok)
        assert e["best"]["gflops"] > 0 and e["best"]["error"] < 1e-5
        # the first configs are Jiang's np phase: powers of two at the start point
        nps = [r["config"]["np"] for r in e["results"][:3]]
        assert nps == sorted(nps) and all(n & (n - 1) == 0 for n in nps)
        again = tune(jiang, P, strategy="phased", budget=Budget(max_evals=12), store=s, repeats=3)
        assert again["measured"] == 0 and again["cached"] == 12
        assert again["best"]["config"] == e["best"]["config"]
        cfg, how = select_config(gl, P, s)
        assert how == "exact" and cfg.to_dict() == e["best"]["config"]


def test_cli_on_gl(gl, tmp_path, capsys):
    rep = tmp_path / "r.json"
    assert main(["--backend", "gl", "--m", "16", "--n", "24", "--k", "20", "--strategy", "random",
                 "--budget", "4", "--repeats", "2", "--db", str(tmp_path / "t.sqlite"),
                 "--report", str(rep)]) == 0
    doc = json.loads(rep.read_text())
    check_report(doc)
    assert doc["backend"] == "gl" and doc["device"]["renderer"]
    assert doc["problems"][0]["evaluated"] == 4
    assert "| 16x24x20 float32" in capsys.readouterr().out
