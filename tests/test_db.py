"""The SQLite store: round trips, keys, location, schema versions, concurrency."""
import os
import pathlib
import sqlite3
import subprocess
import sys

import pytest

from shadertune import db as dbmod
from shadertune.config import Config
from shadertune.db import SCHEMA_VERSION, Store, StoreError, default_path
from shadertune.problem import Problem
from shadertune.result import Result

P = Problem(8, 8, 64)
DEV = "fake renderer | 1.0"
TH = "th1"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def res(np_=2, ms=1.0, status="ok", problem=P, device=DEV, **kw):
    cfg = Config(np=np_, mc="1x1")
    return Result("fake", device, problem, cfg, status,
                  times_ms=[ms, ms * 1.1, ms * 0.9] if status == "ok" else [], **kw)


def test_round_trip_keeps_everything(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        r = res(error=1e-7, compile_ms=3.5, message="")
        s.put(r, TH)
        got = s.get("fake", DEV, P, r.config, TH)
    assert got.to_dict() == r.to_dict()


def test_keys_separate_backend_device_problem_config_and_templates(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        s.put(res(), TH)
        assert s.get("fake", DEV, P, Config(np=2, mc="1x1"), TH) is not None
        assert s.get("other", DEV, P, Config(np=2, mc="1x1"), TH) is None
        assert s.get("fake", "other | 2", P, Config(np=2, mc="1x1"), TH) is None
        assert s.get("fake", DEV, Problem(8, 8, 32), Config(np=2, mc="1x1"), TH) is None
        assert s.get("fake", DEV, P, Config(np=4, mc="1x1"), TH) is None
        assert s.get("fake", DEV, P, Config(np=2, mc="1x1"), "th2") is None
        assert s.get("fake", DEV, Problem(8, 8, 64, trans_a=True), Config(np=2, mc="1x1"), TH) is None


def test_a_new_measurement_replaces_the_old(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        s.put(res(ms=5.0), TH)
        s.put(res(ms=2.0), TH)
        assert s.count() == 1
        assert s.get("fake", DEV, P, Config(np=2, mc="1x1"), TH).median_ms == 2.0


def test_best_and_ranked_never_return_wrong_or_failed(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        s.put(res(np_=2, ms=3.0), TH)
        s.put(res(np_=4, ms=1.0), TH)
        s.put(res(np_=8, ms=0.1, status="wrong", error=0.5), TH)
        s.put(res(np_=16, status="compile_failed", message="no"), TH)
        assert [r.config["np"] for r in s.ranked("fake", DEV, P, TH)] == [4, 2]
        assert s.best("fake", DEV, P, TH).config["np"] == 4
        assert len(s.results("fake", DEV, P)) == 4
        assert s.best("fake", DEV, P, "th2") is None
        assert s.tuned_problems("fake", DEV, TH) == [P]


def test_wal_mode(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_default_path_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SHADERTUNE_DB", str(tmp_path / "x.sqlite"))
    assert default_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("SHADERTUNE_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_path() == tmp_path / "cache" / "shadertune" / "tune.sqlite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / ".cache" / "shadertune" / "tune.sqlite"
    with Store() as s:                           # creates the folders
        s.put(res(), TH)
    assert (tmp_path / "home" / ".cache" / "shadertune" / "tune.sqlite").exists()


def test_an_older_unversioned_store_is_refused_clearly(tmp_path):
    path = tmp_path / "old.sqlite"
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE results (key TEXT PRIMARY KEY, gflops REAL)")   # a pre-versioning layout
    c.execute("INSERT INTO results VALUES ('gl|x|1', 3.0)")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="older than schema version .* delete it") as e:
        Store(path)
    assert str(path) in str(e.value)
    c = sqlite3.connect(path)                    # refused, not damaged
    assert c.execute("SELECT * FROM results").fetchall() == [("gl|x|1", 3.0)]


def test_a_newer_store_is_refused_clearly(tmp_path):
    path = tmp_path / "new.sqlite"
    Store(path).close()
    c = sqlite3.connect(path)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.close()
    with pytest.raises(StoreError, match="newer than this shadertune"):
        Store(path)


def test_an_older_store_with_a_migration_is_migrated(tmp_path, monkeypatch):
    path = tmp_path / "v1.sqlite"
    with Store(path) as s:
        s.put(res(ms=2.0), TH)
    # pretend the current schema is one newer, with a migration from ours
    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(dbmod, "MIGRATIONS", {
        SCHEMA_VERSION: lambda c: c.execute(f"UPDATE results SET schema = {SCHEMA_VERSION + 1}")})
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert s.get("fake", DEV, P, Config(np=2, mc="1x1"), TH).median_ms == 2.0


def test_a_version_1_store_is_migrated_with_its_results(tmp_path):
    path = tmp_path / "v1.sqlite"
    with Store(path) as s:
        s.put(res(ms=2.0), TH)
    c = sqlite3.connect(str(path))              # what version 1 wrote: the same rows
    c.execute("UPDATE results SET schema = 1")
    c.execute("PRAGMA user_version = 1")
    c.commit()
    c.close()
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == 2
        assert s.get("fake", DEV, P, Config(np=2, mc="1x1"), TH).median_ms == 2.0


def test_not_a_database_is_refused_clearly(tmp_path):
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable shadertune store"):
        Store(path)


def test_two_processes_writing_at_once_corrupt_nothing(tmp_path):
    path = tmp_path / "shared.sqlite"               # both also race to create it
    code = ("import sys; sys.path[:0] = [{root!r}, {tests!r}]; from fake_backend import write_many; "
            "write_many({path!r}, {tag!r}, 150)")
    procs = [subprocess.Popen([sys.executable, "-c", code.format(
        root=str(ROOT), tests=str(ROOT / "tests"), path=str(path), tag=tag)],
        stderr=subprocess.PIPE, text=True) for tag in ("a", "b", "c")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    c = sqlite3.connect(path)
    assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert c.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 450
    with Store(path) as s:
        assert len(s.results("fake", DEV, P)) == 450
