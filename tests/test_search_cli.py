"""python -m shadertune.search end to end on the fake backend: report, store, resume, errors."""
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from shadertune.db import Store
from shadertune.problem import Problem
from shadertune.search.cli import main
from shadertune.search.progress import Progress
from shadertune.search.report_json import check_report

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAKE = "fake_backend:FakeBackend"
SIZE = ["--m", "8", "--n", "8", "--k", "64"]


def cli(tmp_path, *args):
    return main(["--backend", FAKE, "--db", str(tmp_path / "t.sqlite"), *args])


def test_help_is_complete(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--backend", "--size", "--m", "--n", "--k", "--sizes", "--strategy", "--budget",
                 "--time-limit", "--db", "--report", "-q", "--retune", "--dtype", "--trans-a",
                 "--trans-b", "--repeats", "--seed", "phased", "exhaustive", "random",
                 "SHADERTUNE_DB", "exit status"):
        assert flag in out, flag


def test_search_writes_the_report_and_the_table(tmp_path, capsys):
    rep = tmp_path / "r" / "report.json"
    assert cli(tmp_path, *SIZE, "--budget", "40", "--report", str(rep), "--repeats", "3") == 0
    out, err = capsys.readouterr()
    assert err == ""                                    # no progress bar off a terminal
    assert "| 8x8x64 float32" in out and "40 (40/0)" in out and "/18432" in out
    doc = json.loads(rep.read_text())
    check_report(doc)
    pytest.importorskip("shadertune.report.schema").validate(doc, str(rep))   # what reports read
    assert doc["schema"] == 1 and doc["backend"] == "fake" and doc["strategy"] == "phased"
    assert doc["device"]["renderer"] == "fake renderer"
    (p,) = doc["problems"]
    assert (p["M"], p["N"], p["K"], p["dtype"], p["trans_a"], p["trans_b"]) == (8, 8, 64, "float32", False, False)
    assert p["evaluated"] == 40 == p["measured"] and p["cached"] == 0 and len(p["results"]) == 40
    assert p["space_size"] == 14336 and p["full_space_size"] == 18432 and p["seconds"] > 0
    assert set(p["best"]) == {"config", "median_ms", "gflops", "error"} and p["best"]["gflops"] > 0
    assert all(len(r["times_ms"]) == 3 for r in p["results"] if r["status"] == "ok")


def test_second_run_replays_the_store_and_retune_measures_afresh(tmp_path, capsys):
    rep = tmp_path / "r.json"
    assert cli(tmp_path, *SIZE, "--budget", "25", "-q") == 0
    assert cli(tmp_path, *SIZE, "--budget", "30", "-q", "--report", str(rep)) == 0
    p = json.loads(rep.read_text())["problems"][0]
    assert (p["evaluated"], p["cached"], p["measured"]) == (30, 25, 5)
    assert cli(tmp_path, *SIZE, "--budget", "30", "-q", "--retune", "--report", str(rep)) == 0
    p = json.loads(rep.read_text())["problems"][0]
    assert (p["cached"], p["measured"]) == (0, 30)


def test_sizes_table_and_transposes(tmp_path, capsys):
    rep = tmp_path / "r.json"
    assert cli(tmp_path, "--sizes", "8,12", "--budget", "10", "--dtype", "float64", "--trans-a",
               "--strategy", "random", "--seed", "3", "--report", str(rep)) == 0
    doc = json.loads(rep.read_text())
    assert [(p["M"], p["K"], p["dtype"], p["trans_a"], p["trans_b"]) for p in doc["problems"]] == \
        [(8, 8, "float64", True, False), (12, 12, "float64", True, False)]
    with Store(tmp_path / "t.sqlite") as s:
        assert {p.M for p in s.tuned_problems("fake", "fake renderer | 1.0", "fake-templates-1")} == {8, 12}


@pytest.mark.parametrize("args, text", [
    ([], "exactly one of"),
    (["--size", "8", "--sizes", "8,16"], "exactly one of"),
    (["--m", "8", "--n", "8"], "go together"),
    (["--size", "0"], "positive"),
    (["--sizes", "8,x"], "size must be"),
    (["--size", "8", "--strategy", "beam"], "invalid choice"),
    (["--size", "8", "--budget", "0"], "at least 1"),
])
def test_bad_arguments_fail_in_one_line(tmp_path, capsys, args, text):
    with pytest.raises(SystemExit) as e:
        cli(tmp_path, *args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("shadertune.search: error: ") and text in err and err.count("\n") == 1


@pytest.mark.parametrize("backend, text", [
    ("fake_backend:NoContextBackend", "no GL context"),
    ("no_such_module:X", "cannot load backend"),
    ("vulkan", "unknown backend"),
])
def test_failures_exit_non_zero_with_one_line(tmp_path, capsys, backend, text):
    assert main(["--backend", backend, "--size", "8", "--db", str(tmp_path / "t.sqlite")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shadertune.search: error: ") and text in err and err.count("\n") == 1


def test_unusable_store_fails_in_one_line(tmp_path, capsys):
    (tmp_path / "t.sqlite").write_bytes(b"junk" * 1000)
    assert cli(tmp_path, "--size", "8") == 1
    assert "not a usable shadertune store" in capsys.readouterr().err


def test_nothing_verified_is_a_failure_but_the_report_is_written(tmp_path, capsys):
    rep = tmp_path / "r.json"
    assert main(["--backend", "fake_backend:AllWrongBackend", *SIZE, "--budget", "5",
                 "--db", str(tmp_path / "t.sqlite"), "--report", str(rep)]) == 1
    assert "no config passed verification for 8x8x64" in capsys.readouterr().err
    p = json.loads(rep.read_text())["problems"][0]
    assert p["best"] is None and {r["status"] for r in p["results"]} == {"wrong"}


def test_progress_bar_line():
    s = io.StringIO()
    bar = Progress("16x16x16", total=4, stream=s, enabled=True)
    from fake_backend import FakeBackend
    from shadertune.search import Evaluator
    from fake_backend import best_correct
    be = FakeBackend()
    r = Evaluator(be, Problem(8, 8, 64))(best_correct(be.space(Problem(8, 8, 64))))
    bar.update(r)
    bar.update(r, cached=True)
    bar.close()
    text = s.getvalue()
    assert "16x16x16 [############............] 2/4 (1 cached)  best" in text and "GFLOP/s" in text
    assert text.endswith("\n")
    quiet = io.StringIO()
    Progress("x", stream=quiet).close()              # StringIO is not a terminal
    assert quiet.getvalue() == ""


def _run_cli(tmp_path, env_extra, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]), **env_extra)
    return subprocess.Popen([sys.executable, "-m", "shadertune.search", "--backend", FAKE, *SIZE,
                             "--db", str(tmp_path / "t.sqlite"), "-q", "--repeats", "2", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _log(path):
    lines = path.read_text().splitlines() if path.exists() else []
    return [ln.split(" ", 1) for ln in lines]


def test_a_killed_search_resumes_with_nothing_lost_and_nothing_measured_twice(tmp_path):
    log1, log2 = tmp_path / "log1", tmp_path / "log2"
    hang = 60
    p = _run_cli(tmp_path, {"FAKE_LOG": str(log1), "FAKE_HANG_AT": str(hang)})
    deadline = time.monotonic() + 60
    while sum(1 for w, _ in _log(log1) if w == "start") < hang:
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the search never reached the hanging build"
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)                    # killed in the middle of build #60
    p.wait()
    first = _log(log1)
    hung_key = first[-1][1]
    with Store(tmp_path / "t.sqlite") as s:
        kept = {r.config.key for r in s.results("fake", "fake renderer | 1.0", Problem(8, 8, 64))}
    assert len(kept) == hang - 1 and hung_key not in kept     # nothing lost but the one in flight

    rep = tmp_path / "r.json"
    p = _run_cli(tmp_path, {"FAKE_LOG": str(log2)}, "--report", str(rep))
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    rebuilt = [k for w, k in _log(log2) if w == "start"]
    assert hung_key in rebuilt and not kept & set(rebuilt)    # nothing measured twice
    doc = json.loads(rep.read_text())["problems"][0]
    assert doc["cached"] == hang - 1 and doc["measured"] == doc["evaluated"] - (hang - 1)

    # the same results as a search never interrupted
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    rep2 = tmp_path / "r2.json"
    p = _run_cli(fresh, {}, "--report", str(rep2))
    assert p.wait(timeout=120) == 0
    doc2 = json.loads(rep2.read_text())["problems"][0]
    assert [r["config"] for r in doc["results"]] == [r["config"] for r in doc2["results"]]
    assert doc["best"]["config"] == doc2["best"]["config"]
