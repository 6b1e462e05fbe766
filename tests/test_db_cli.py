"""python -m shadertune.db: listings, export/import/merge round trips, prune (issue 15 item 8)."""
import json
import sqlite3
import time

import pytest
from md_table import cells
from test_db import DEV, P, TH, old_store, res

from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.cli.db import main
from shadertune.core.problem import Problem
from shadertune.core.result import Result

OTHER = "other gpu | 2.0"


def fill(path, device=DEV, ms=1.0, t0=1000.0):
    """A store with ok, wrong (by error and by NaN), failed, float64 and transposed results."""
    rows = [res(np_=2, ms=3 * ms), res(np_=4, ms=ms), res(np_=8, ms=0.5, status="wrong", error=0.5),
            res(np_=10, status="wrong", message="3 of 64 output elements are NaN/Inf"),
            res(np_=16, status="compile_failed", message="no"),
            res(np_=2, ms=2.0, problem=Problem(8, 8, 64, "float64", True), error=1e-14)]
    with Store(path) as s:
        for i, r in enumerate(rows):
            r.timestamp = t0 + i
            r.device = device
            s.put(r, TH, seconds=0.25 * (i + 1), seed=3)
    return rows


def all_rows(path):
    with Store(path, readonly=True) as s:
        return sorted((r for r in s.rows()), key=lambda r: (r["device"], r["problem"], r["config"]))


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_then_import_is_a_round_trip(tmp_path, capsys, fmt):
    src, dst, f = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / f"x.{fmt}"
    fill(src)
    code, _, err = run(capsys, "--db", src, "export", "-o", f)     # the format from the extension
    assert code == 0 and f"6 results written to {f} ({fmt})" in err
    if fmt == "jsonl":
        recs = [json.loads(ln) for ln in f.read_text().splitlines()]
        assert len(recs) == 6 and recs[0]["config"] == {"np": 2, "mc": "1x1"}
        assert recs[0]["result"]["times_ms"] == [3.0, 3.3000000000000003, 2.7]
    else:
        assert f.read_text().splitlines()[0].startswith("backend,device,problem,config,template_hash")
    code, out, _ = run(capsys, "--db", dst, "import", f)
    assert code == 0 and out.startswith("6 added, 0 replaced")
    assert all_rows(dst) == all_rows(src)                        # every column, written too
    with Store(dst) as s:
        assert s.best("fake", DEV, P, TH).config["np"] == 4
        assert s.measured_seconds("fake", DEV, P, TH, [Config(np=2, mc="1x1")]) == (0.25, 0)


def test_merging_stores_keeps_devices_apart_and_the_newer_measurement(tmp_path, capsys):
    a, b, c = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "c.sqlite"
    fill(a, ms=1.0, t0=1000.0)
    fill(b, device=OTHER, ms=5.0, t0=1000.0)      # another machine's GPU
    fill(c, ms=0.1, t0=2000.0)                    # the same device, measured later
    code, out, _ = run(capsys, "--db", a, "import", b)
    assert code == 0 and out.startswith("6 added, 0 replaced by newer measurements, 0 kept")
    with Store(a) as s:
        assert s.best("fake", DEV, P, TH).median_ms == 1.0
        assert s.best("fake", OTHER, P, TH).median_ms == 5.0
    code, out, _ = run(capsys, "--db", a, "import", c, b)     # c newer: replaces; b again: kept
    assert out.startswith("0 added, 6 replaced by newer measurements, 6 kept")
    with Store(a) as s:
        assert s.best("fake", DEV, P, TH).median_ms == pytest.approx(0.1)
        assert s.best("fake", OTHER, P, TH).median_ms == 5.0
        assert s.count() == 12
    code, out, _ = run(capsys, "--db", c, "import", a)        # older ones never replace newer
    assert out.startswith("6 added, 0 replaced by newer measurements, 6 kept")
    with Store(c) as s:
        assert s.best("fake", DEV, P, TH).median_ms == pytest.approx(0.1)


def test_an_old_store_is_imported_and_not_changed(tmp_path, capsys):
    old, dst = tmp_path / "v2.sqlite", tmp_path / "new.sqlite"
    old_store(old, 2, [res(np_=2, ms=3.0), res(np_=4, ms=1.0)])
    code, out, _ = run(capsys, "--db", dst, "import", old)
    assert code == 0 and out.startswith("2 added")
    with Store(dst) as s:
        assert s.best("fake", DEV, P, TH).config["np"] == 4
    con = sqlite3.connect(old)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2


@pytest.mark.parametrize("text, where", [
    ("not json at all\n", "no template_hash, written, result column"),
    ('{"backend": "fake"}\n', "line 1: not a shadertune result record (KeyError"),
    ("GOOD\n{broken\n", "line 2: not JSON"),
    ("GOOD\nBADCONFIG\n", "line 2: its config"),
    ("GOOD\nNEWER\n", "line 2: written by a newer shadertune"),
])
def test_a_bad_record_imports_nothing_and_names_its_line(tmp_path, capsys, text, where):
    src, dst, f = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "x.jsonl"
    fill(src)
    run(capsys, "--db", src, "export", "-o", f)
    good = f.read_text().splitlines()[0]
    rec = json.loads(good)
    text = (text.replace("GOOD", good)
            .replace("BADCONFIG", json.dumps({**rec, "config": {"np": 99, "mc": "1x1"}}))
            .replace("NEWER", json.dumps({**rec, "schema": 99})))
    f.write_text(text)
    fill(dst, device=OTHER)
    before = all_rows(dst)
    code, _, err = run(capsys, "--db", dst, "import", f)
    assert code == 1 and err.count("\n") == 1 and where in err, err
    assert all_rows(dst) == before


def test_importing_a_store_into_itself_is_refused(tmp_path, capsys):
    fill(tmp_path / "a.sqlite")
    code, _, err = run(capsys, "--db", tmp_path / "a.sqlite", "import", tmp_path / "a.sqlite")
    assert code == 1 and "is the store itself" in err


def test_listings(tmp_path, capsys):
    db = tmp_path / "a.sqlite"
    fill(db)
    fill(db, device=OTHER, ms=5.0)
    code, out, _ = run(capsys, "--db", db, "devices")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4
    assert cells(lines[2])[:6] == ["fake", "fake renderer \\| 1.0", "6", "3", "2", "1"]
    code, out, _ = run(capsys, "--db", db, "problems", "--device", "other")
    assert [ln.count("other gpu") for ln in out.splitlines()[2:]] == [1, 1]
    code, out, _ = run(capsys, "--db", db, "best", "--device", "fake renderer", "--problem", "8,8,64")
    rows = out.splitlines()[2:]
    assert len(rows) == 2 and "mc=1x1 np=4" in rows[0] and "8x8x64 float32 " in rows[0]
    assert "8x8x64 float64 TN" in rows[1] and "np=2" in rows[1]
    code, out, _ = run(capsys, "--db", db, "best", "--tolerance", "1e-20")
    assert out.count("(none correct)") == 4
    code, _, err = run(capsys, "--db", tmp_path / "none.sqlite", "devices")
    assert code == 1 and "does not exist" in err and not (tmp_path / "none.sqlite").exists()


def test_listing_a_version_2_store_reads_it_where_it_is(tmp_path, capsys):
    db = tmp_path / "v2.sqlite"
    old_store(db, 2, [res(np_=4, ms=1.0)])
    code, out, _ = run(capsys, "--db", db, "best")
    assert code == 0 and "np=4" in out
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 2


def test_prune(tmp_path, capsys, gl_backend):
    db = tmp_path / "a.sqlite"
    fill(db)
    with pytest.raises(SystemExit) as e:                       # never everything by accident
        main(["--db", str(db), "prune"])
    assert e.value.code == 2 and "at least one filter" in capsys.readouterr().err
    code, out, _ = run(capsys, "--db", db, "prune", "--status", "wrong", "--dry-run")
    assert out.startswith("2 results would be deleted") and len(all_rows(db)) == 6
    code, out, _ = run(capsys, "--db", db, "prune", "--status", "wrong")
    assert out.startswith("2 results deleted") and len(all_rows(db)) == 4
    code, out, _ = run(capsys, "--db", db, "prune", "--older-than", "1")
    assert out.startswith("0 results deleted")
    con = sqlite3.connect(db)
    con.execute("UPDATE results SET written = ? WHERE config = ?",
                (time.time() - 3 * 86400, Config(np=16, mc="1x1").key))
    con.commit()
    code, out, _ = run(capsys, "--db", db, "prune", "--older-than", "2")
    assert out.startswith("1 results deleted") and len(all_rows(db)) == 3
    # results of kernels this shadertune no longer has, for backends it knows
    p = Problem(8, 8, 8)
    with Store(db) as s:
        for th in (gl_backend.template_hash(), "an-old-template"):
            s.put(Result("gl", gl_backend.device().key, p, gl_backend.default_config(p), "ok",
                         times_ms=[1.0], error=1e-7), th)
    code, out, err = run(capsys, "--db", db, "prune", "--stale-templates")
    assert out.startswith("1 results deleted") and "'fake' is not known here" in err
    assert {(r["backend"], r["template_hash"]) for r in all_rows(db)} == \
        {("fake", TH), ("gl", gl_backend.template_hash())}



def test_prune_of_a_store_that_is_not_there_makes_none(tmp_path, capsys):
    db = tmp_path / "none.sqlite"
    code, _, err = run(capsys, "--db", db, "prune", "--status", "wrong")
    assert code == 1 and f"store {db} does not exist" in err and not db.exists()
