"""One way to write a problem (Problem.label) in every table, report and message, and
configs printed with the knobs that act on them, every knob with --full-config, in each
command that prints configs (search, db best, report show, perfmodel explain)."""
import pytest

from shadertune.cli.db import main as db_main
from shadertune.cli.perfmodel import main as perfmodel_main
from shadertune.core.problem import Problem
from shadertune.cli.report import main as report_main
from shadertune.report.schema import problem_label
from shadertune.report.sources import parse_problem
from shadertune.search.__main__ import main as search_main


@pytest.mark.parametrize("p, text", [
    (Problem(64, 48, 32), "64x48x32 float32"),
    (Problem(64, 48, 32, "float64", trans_b=True), "64x48x32 float64 NT"),
    (Problem(8, 8, 8, trans_a=True, trans_b=True, batch=5), "5x8x8x8 float32 TT"),
])
def test_a_problem_is_written_one_way_and_read_back(p, text):
    assert p.label == text == problem_label(p.to_dict())
    # the label names the problem to the tools that take one
    want = {"M": p.M, "N": p.N, "K": p.K, "dtype": p.dtype, "trans_a": p.trans_a,
            "trans_b": p.trans_b, **({"batch": p.batch} if p.batch > 1 else {})}
    assert parse_problem(text) == want


@pytest.fixture(scope="module")
def searched(gl, tmp_path_factory):
    d = tmp_path_factory.mktemp("printing")
    db, report = d / "t.sqlite", d / "r.json"
    assert search_main(["--backend", "gl", "--size", "16x16x24", "--budget", "2", "--db", str(db),
                        "--report", str(report), "-q", "--fix", "family=fragment"]) == 0
    return db, report


def _runs(capsys, main, args) -> tuple[str, str]:
    assert main(args) == 0
    brief = capsys.readouterr().out
    assert main(args + ["--full-config"]) == 0
    return brief, capsys.readouterr().out


@pytest.mark.parametrize("tool", ["search", "db best", "report show", "perfmodel explain"])
def test_configs_show_the_knobs_that_act_and_full_config_every_knob(searched, capsys, tool):
    db, report = searched
    main, args = {
        "search": (search_main, ["--backend", "gl", "--size", "16x16x24", "--budget", "2", "--db",
                                 str(db), "-q", "--fix", "family=fragment"]),
        "db best": (db_main, ["--db", str(db), "best"]),
        "report show": (report_main, ["show", str(report)]),
        "perfmodel explain": (perfmodel_main, ["explain", "--backend", "gl", "--db", str(db),
                                               "--size", "16x16x24"]),
    }[tool]
    brief, full = _runs(capsys, main, args)
    assert "16x16x24 float32" in brief and "16x16x24:float32" not in brief
    assert "np=" in brief and "family=fragment" in brief
    assert "bm=" not in brief and "tn=" not in brief          # the compute family's knobs
    assert "bm=0" in full and "tn=0" in full


def test_export_best_of_a_gl_store(searched, capsys):
    import json
    db, _ = searched
    assert db_main(["--db", str(db), "export", "--best", "--format", "jsonl", "--backend", "gl"]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (row["M"], row["N"], row["K"], row["family"]) == (16, 16, 24, "fragment") and "bm" in row
