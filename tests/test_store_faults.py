"""The store under faults, end to end (issue 14 items 4-6): a full disk, read-only and odd
stores, through `python -m shadertune.search` and matmul(config="auto")."""
import json
import os
import sqlite3
import warnings

import numpy as np
import pytest
from subproc import run_python
from test_db import as_another_user, shared_dir  # noqa: F401  (a fixture)

import shadertune
from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.core.result import Result
from shadertune.cli.search import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = "fake_backend:FakeBackend"
DEV = "fake renderer | 1.0"


def search(db, *args):
    return main(["--backend", FAKE, "--db", str(db), "-q", "--repeats", "1", "--budget", "15", *args])


def one_error_line(err: str, text: str) -> None:
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("shadertune.search: error: ") and text in last, err


def stored_keys(db):
    c = sqlite3.connect(db)
    try:
        return {(p, cfg) for p, cfg in c.execute("SELECT problem, config FROM results")}
    finally:
        c.close()


# --- a full disk -----------------------------------------------------------------

def test_a_full_disk_stops_the_search_in_one_line_and_loses_nothing(tmp_path):
    db, rep = tmp_path / "t.sqlite", tmp_path / "r.json"
    assert search(db, "--size", "8") == 0
    before = stored_keys(db)
    # A real full file system for the child: files may not grow past 48 KiB (RLIMIT_FSIZE;
    # Python ignores SIGXFSZ, so a write past it fails with EFBIG or is cut short).  The
    # store's write-ahead log then fails to grow while problem 2 is searched.
    code = ("import resource, sys; "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (48 << 10, 48 << 10)); "
            "from shadertune.cli.search import main; "
            "sys.exit(main(['--backend', {fake!r}, '--db', {db!r}, '-q', '--repeats', '1', "
            "'--budget', '15', '--sizes', '8,16', '--report', {rep!r}]))").format(
        fake=FAKE, db=str(db), rep=str(rep))
    p = run_python(code)
    assert p.returncode == 1, p.stderr
    one_error_line(p.stderr, f"store {db}")
    assert "kept" in p.stderr.strip().splitlines()[-1]
    doc = json.loads(rep.read_text())                 # the report of what finished
    first, second = doc["problems"]
    assert (first["M"], first["cached"], first["best"] is not None) == (8, 15, True)
    assert second["M"] == 16 and second["incomplete"] is True
    c = sqlite3.connect(db)                           # nothing stored before is lost
    assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    c.close()
    after = stored_keys(db)
    assert before <= after and len(after - before) == second["measured"] > 0


# --- read-only stores ----------------------------------------------------------------

def test_a_read_only_store_is_replayed_and_refuses_new_measurements_in_one_line(shared_dir, capsys):
    db = shared_dir / "t.sqlite"
    out = shared_dir / "out"
    out.mkdir(mode=0o777)
    os.chmod(out, 0o777)
    assert search(db, "--size", "8") == 0
    before = stored_keys(db)
    os.chmod(db, 0o444)
    capsys.readouterr()
    with as_another_user():
        assert search(db, "--size", "8", "--report", str(out / "a.json")) == 0    # all replayed
        _, err = capsys.readouterr()
        assert err == ""
        assert search(db, "--sizes", "8,16", "--report", str(out / "b.json")) == 1
        _, err = capsys.readouterr()
    one_error_line(err, "is read-only")
    assert "python -m shadertune.db import" in err
    doc = json.loads((out / "b.json").read_text())
    assert [p["cached"] for p in doc["problems"]] == [15]    # 16: nothing measured and kept
    assert stored_keys(db) == before


def test_matmul_auto_uses_a_read_only_store(shared_dir, gl_backend):
    from shadertune.search import Budget, tune
    db = shared_dir / "t.sqlite"
    p = Problem(24, 16, 32)
    with Store(db) as s:
        tune(gl_backend, p, store=s, budget=Budget(max_evals=4), repeats=1, warmup=0)
        best = s.best("gl", gl_backend.device().key, p, gl_backend.template_hash())
    assert best is not None
    os.chmod(db, 0o444)
    from shadertune.selection.chain import select_config
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((24, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    with as_another_user():
        with warnings.catch_warnings():
            warnings.simplefilter("error")            # used, not ignored with a warning
            assert select_config(gl_backend, p, db) == (best.config, "exact")
            C = shadertune.matmul(A, B, db=db)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    assert stored_keys(db) and not os.path.exists(f"{db}-wal")


# --- odd stores ------------------------------------------------------------------

ODD = {
    "no results table": "CREATE TABLE other (x); PRAGMA user_version = 2;",
    "lacks the columns": "CREATE TABLE results (backend, device, problem); PRAGMA user_version = 3;",
}


@pytest.mark.parametrize("text", sorted(ODD) + ["cannot be decoded"])
def test_odd_stores_warn_in_auto_and_fail_search_in_one_line(tmp_path, capsys, text, gl_backend):
    db = tmp_path / "odd.sqlite"
    if text in ODD:
        c = sqlite3.connect(db)
        c.executescript(ODD[text])
        c.close()
    else:
        assert search(db, "--size", "8") == 0
        p = Problem(8, 8, 8)                      # and a GL result for matmul to meet
        with Store(db) as s:
            s.put(Result("gl", gl_backend.device().key, p, gl_backend.default_config(p), "ok",
                         times_ms=[1.0], error=1e-7), gl_backend.template_hash())
        c = sqlite3.connect(db)
        c.execute("UPDATE results SET result = '{\"backend\": '")
        c.commit()
        c.close()
    A = np.ones((8, 8), np.float32)
    with pytest.warns(RuntimeWarning, match=f"ignoring the tuning store.*{text}"):
        C = shadertune.matmul(A, A, db=db)
    np.testing.assert_allclose(C, 8.0)
    if text == "cannot be decoded":              # replaying the search meets the bad rows
        with pytest.warns(RuntimeWarning, match=text):
            from fake_backend import FakeBackend
            from shadertune.selection.chain import select_config
            assert select_config(FakeBackend(), Problem(8, 8, 8), db)[1] == "default"
    capsys.readouterr()
    assert search(db, "--size", "8") == 1
    one_error_line(capsys.readouterr().err, text)
