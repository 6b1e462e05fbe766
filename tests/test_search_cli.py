"""python -m shadertune.search end to end on the fake backend: report, store, resume, errors."""
import io
import json
import pathlib
import signal
import subprocess
import time

import pytest
from subproc import popen_python

from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.search import Budget
from shadertune.cli.search import main
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
    # off a terminal: plain lines, when the problem starts and when it ends
    assert err.splitlines() == ["shadertune.search: tuning on the fake backend: renderer fake "
                                "renderer (vendor shadertune), driver 1.0",
                                "shadertune.search: 8x8x64 float32: searching (budget 40 evaluations)",
                                err.splitlines()[2]]
    assert err.splitlines()[2].startswith("shadertune.search: 8x8x64 float32: done: 40 evaluations in ")
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
    (["--size=-4"], "sizes must be positive, got '-4'"),
    (["--sizes", "8,8x-2x8"], "sizes must be positive, got '8x-2x8'"),
    (["--size", "8", "--backend", "vulkan"], "argument --backend: unknown backend 'vulkan'"),
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
])
def test_failures_exit_non_zero_with_one_line(tmp_path, capsys, backend, text):
    assert main(["--backend", backend, "--size", "8", "--db", str(tmp_path / "t.sqlite")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shadertune.search: error: ") and text in err and err.count("\n") == 1


def test_a_dtype_the_backend_does_not_compute_is_an_argument_error(tmp_path, capsys):
    """GL computes in float32 only: --dtype float64 is refused before the device or the
    store is touched (it was a search that opened the store, started and stopped, exit 1)."""
    db = tmp_path / "t.sqlite"
    with pytest.raises(SystemExit) as e:
        main(["--backend", "gl", "--size", "8", "--dtype", "float64", "--db", str(db)])
    assert e.value.code == 2 and not db.exists()
    assert capsys.readouterr().err == ("shadertune.search: error: --dtype float64: the gl backend "
                                       "computes in float32 only\n")


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


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _ok_result():
    from fake_backend import FakeBackend, best_correct
    from shadertune.search import Evaluator
    be = FakeBackend()
    return Evaluator(be, Problem(8, 8, 64), repeats=1, warmup=0)(best_correct(be.space(Problem(8, 8, 64))))


def test_progress_lines_off_a_terminal():
    s, clock, r = io.StringIO(), Clock(), _ok_result()
    bar = Progress("16x16x16", index=2, count=3, total=40, time_limit=60, stream=s, clock=clock,
                   interval=10)
    bar.phase("glsl=330 fetch=texture unroll=4")
    bar.update(r, cached=True)
    clock.t += 10                                     # a line every 10 s
    bar.update(r)
    bar.update(r)                                     # not yet another
    clock.t += 5
    bar.close()
    lines = s.getvalue().splitlines()
    assert lines[0] == ("shadertune.search: 2/3 16x16x16: searching (budget 40 evaluations, "
                        "time limit 01:00)")
    # 10 s for 2 evaluations: 38 more at that rate is 190 s, but the limit leaves 50 s
    assert lines[1] == (f"shadertune.search: 2/3 16x16x16: 2/40 evaluations (1 cached), best "
                        f"{r.gflops:.2f} GFLOP/s, phase glsl=330 fetch=texture unroll=4, 00:10, "
                        f"about 00:50 left")
    assert lines[2] == f"shadertune.search: 2/3 16x16x16: done: 3 evaluations (1 cached) in 00:15, best {r.gflops:.2f} GFLOP/s"
    assert len(lines) == 3


def test_progress_bar_on_a_terminal():
    s, r = io.StringIO(), _ok_result()
    bar = Progress("16x16x16", index=2, count=3, total=4, stream=s, mode="bar")
    bar.phase("glsl=450 fetch=texelFetch unroll=1")
    bar.update(r)
    bar.update(r, cached=True)
    bar.close()
    text = s.getvalue()
    assert "2/3 16x16x16" in text and "2/4" in text and "1 cached" in text
    assert f"best {r.gflops:.2f} GFLOP/s" in text and "glsl=450 fetch=texelFetch unroll=1" in text
    timed = io.StringIO()                             # a time limit alone: the bar is the time
    bar = Progress("x", time_limit=30, stream=timed, mode="bar")
    bar.update(r)
    bar.close()
    assert "<00:" in timed.getvalue() and "1 evals" in timed.getvalue()
    quiet = io.StringIO()
    bar = Progress("x", stream=quiet, mode="off")
    bar.update(r)
    bar.close()
    assert quiet.getvalue() == ""


def _run_cli(tmp_path, env_extra, *args, argv_size=SIZE):
    return popen_python(None, "-m", "shadertune.search", "--backend", FAKE, *argv_size,
                        "--db", tmp_path / "t.sqlite", "-q", "--repeats", "2", *args,
                        env=env_extra, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


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


# --- options, duplicates, backends, the report path (issues 14 and 15) -------------------

def test_version(capsys):
    from shadertune import __version__
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip().endswith(__version__)


def test_repeated_sizes_are_tuned_once(tmp_path, capsys):
    rep = tmp_path / "r.json"
    assert cli(tmp_path, "--sizes", "8,12,8x8x8,8", "--budget", "5", "-q", "--report", str(rep)) == 0
    assert [(p["M"], p["N"], p["K"]) for p in json.loads(rep.read_text())["problems"]] == \
        [(8, 8, 8), (12, 12, 12)]
    assert capsys.readouterr().out.count("| 8x8x8 float32") == 1


def test_cached_problems_count_no_space_and_make_no_inputs(tmp_path, capsys, monkeypatch):
    from shadertune.search import evaluate
    from shadertune.core.space import Space
    sizes = ["--sizes", "8,12,16", "--budget", "10", "-q"]
    assert cli(tmp_path, *sizes) == 0
    counted, made = [], []
    configs, make_inputs = Space.configs, evaluate.make_inputs
    monkeypatch.setattr(Space, "configs", lambda self: counted.append(1) or configs(self))
    monkeypatch.setattr(evaluate, "make_inputs", lambda *a, **k: made.append(1) or make_inputs(*a, **k))
    rep = tmp_path / "r.json"
    assert cli(tmp_path, *sizes, "--report", str(rep)) == 0
    assert counted == [] and made == []
    doc = json.loads(rep.read_text())["problems"]
    assert [p["cached"] for p in doc] == [10, 10, 10] and all(p["space_size"] > 0 for p in doc)


@pytest.mark.parametrize("backend, text", [
    ("os:system", "os.system is not a shadertune Backend class"),
    ("fake_backend:best_correct", "is not a shadertune Backend class"),
    ("subprocess:Popen", "is not a shadertune Backend class"),
    ("fake_backend:Nothing", "cannot load backend"),
])
def test_a_backend_that_is_not_a_backend_is_one_line(tmp_path, capsys, backend, text):
    assert main(["--backend", backend, "--size", "8", "--db", str(tmp_path / "t.sqlite")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shadertune.search: error: ") and text in err and err.count("\n") == 1


def test_the_report_may_not_be_the_store(tmp_path, capsys, monkeypatch):
    db = tmp_path / "t.sqlite"
    assert cli(tmp_path, *SIZE, "--budget", "5", "-q") == 0
    before = db.read_bytes()
    (tmp_path / "link.sqlite").symlink_to(db)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    for report in (str(db), str(tmp_path / "link.sqlite"), "../t.sqlite", f"{db}-wal"):
        with pytest.raises(SystemExit) as e:
            cli(tmp_path, *SIZE, "--budget", "5", "-q", "--report", report)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "is the store's file" in err and err.count("\n") == 1
    monkeypatch.setenv("SHADERTUNE_DB", str(db))          # the default store too
    with pytest.raises(SystemExit):
        main(["--backend", FAKE, *SIZE, "--report", "../link.sqlite"])
    assert db.read_bytes() == before


def test_seconds_of_a_replayed_search_are_the_original_ones(tmp_path):
    r1, r2 = tmp_path / "r1.json", tmp_path / "r2.json"
    assert cli(tmp_path, *SIZE, "--budget", "20", "-q", "--report", str(r1)) == 0
    assert cli(tmp_path, *SIZE, "--budget", "20", "-q", "--report", str(r2)) == 0
    p1, p2 = (json.loads(r.read_text())["problems"][0] for r in (r1, r2))
    with Store(tmp_path / "t.sqlite") as s:
        stored = [row["seconds"] for row in s.rows()]
    assert len(stored) == 20 and all(x > 0 for x in stored)
    assert p1["seconds"] == p1["run_seconds"] >= sum(stored) * 0.999
    assert p2["cached"] == 20 and p2["seconds"] == pytest.approx(p2["run_seconds"] + sum(stored), abs=2e-6)


class SoftwareBackend(__import__("fake_backend").FakeBackend):
    """The fake on a CPU renderer (as llvmpipe says it is)."""

    def device(self):
        d = super().device()
        return type(d)(d.backend, d.vendor, "fake llvmpipe", d.driver,
                       {**d.limits, "software_renderer": True})


def test_a_software_renderer_gets_a_time_limit_unless_told(tmp_path, capsys):
    from shadertune.cli.search import build_parser
    from shadertune.cli.search_runs import SOFTWARE_TIME_LIMIT, search_budget as _budget
    dev, gpu = SoftwareBackend().device(), __import__("fake_backend").FakeBackend().device()
    parse = lambda *a: build_parser().parse_args(["--size", "8", *a])
    assert _budget(parse(), dev) == Budget(None, SOFTWARE_TIME_LIMIT)
    assert _budget(parse("--time-limit", "0"), dev) == Budget(None, None)
    assert _budget(parse("--budget", "7"), dev) == Budget(7, None)
    assert _budget(parse(), gpu) == Budget(None, None)
    assert main(["--backend", "test_search_cli:SoftwareBackend", *SIZE, "--db",
                 str(tmp_path / "t.sqlite"), "--repeats", "1"]) == 0
    err = capsys.readouterr().err
    assert f"software renderer: each problem stops starting evaluations after {SOFTWARE_TIME_LIMIT:g} s" in err
    assert f"time limit {int(SOFTWARE_TIME_LIMIT) // 60:02d}:{int(SOFTWARE_TIME_LIMIT) % 60:02d}" in err
    with pytest.raises(SystemExit):
        main(["--help"])
    assert f"a software renderer\n(device limit software_renderer" in capsys.readouterr().out


def test_quiet_is_silent_and_verbose_logs_each_evaluation(tmp_path, capsys):
    assert cli(tmp_path, *SIZE, "--budget", "5", "-q") == 0
    assert capsys.readouterr().err == ""
    assert cli(tmp_path, *SIZE, "--budget", "6", "-v") == 0
    err = capsys.readouterr().err.splitlines()
    evals = [ln for ln in err if ln.startswith("shadertune.search: 8x8x64 float32 ")]
    assert len(evals) == 6 and sum(ln.endswith("(cached)") for ln in evals) == 5
    assert any(": ok: " in ln and "GFLOP/s" in ln for ln in evals)


def test_interrupted_search_reports_what_finished_and_the_problem_in_progress(tmp_path):
    rep = tmp_path / "r.json"
    log = tmp_path / "log"
    p = _run_cli(tmp_path, {"FAKE_LOG": str(log), "FAKE_HANG_AT": "45"}, "--budget", "30",
                 "--report", str(rep), "--sizes", "8x8x64,12x8x64", argv_size=[])
    deadline = time.monotonic() + 60
    while sum(1 for w, _ in _log(log) if w == "start") < 45:
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("shadertune.search: error: interrupted")
    assert "Traceback" not in err
    doc = json.loads(rep.read_text())
    first, second = doc["problems"]
    assert first["M"] == 8 and first["evaluated"] == 30 and not first.get("incomplete")
    assert second["M"] == 12 and second["incomplete"] is True and second["evaluated"] == 14
    assert "(incomplete)" in out
    pytest.importorskip("shadertune.report.schema").validate(doc, str(rep))
