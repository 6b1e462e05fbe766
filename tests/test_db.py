"""The SQLite store: round trips, keys, location, schema versions, concurrency."""
import os
import pathlib
import sqlite3
import subprocess

import pytest
from subproc import popen_python

from shadertune.db import schema as dbschema
from shadertune.core.config import Config
from shadertune.db import SCHEMA_VERSION, Store, StoreError, default_path
from shadertune.core.problem import Problem
from shadertune.core.result import Result

P = Problem(8, 8, 64)
DEV = "fake renderer | 1.0"
TH = "th1"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def res(np_=2, ms=1.0, status="ok", problem=P, device=DEV, **kw):
    """A result; an ok one has a float32-sized error unless given one."""
    cfg = Config(np=np_, mc="1x1")
    if status == "ok":
        kw.setdefault("error", 1e-7)
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
    monkeypatch.setattr(dbschema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(dbschema, "MIGRATIONS", {
        SCHEMA_VERSION: lambda c: c.execute(f"UPDATE results SET schema = {SCHEMA_VERSION + 1}")})
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert s.get("fake", DEV, P, Config(np=2, mc="1x1"), TH).median_ms == 2.0


def test_a_version_1_store_is_migrated_with_its_results(tmp_path):
    path = tmp_path / "v1.sqlite"
    old_store(path, 1, [res(ms=2.0)])
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert s.get("fake", DEV, P, Config(np=2, mc="1x1"), TH).median_ms == 2.0


def test_not_a_database_is_refused_clearly(tmp_path):
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable shadertune store"):
        Store(path)


def test_two_processes_writing_at_once_corrupt_nothing(tmp_path):
    path = tmp_path / "shared.sqlite"               # both also race to create it
    code = "from fake_backend import write_many; write_many({path!r}, {tag!r}, 150)"
    procs = [popen_python(code.format(path=str(path), tag=tag), stderr=subprocess.PIPE)
             for tag in ("a", "b", "c")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    c = sqlite3.connect(path)
    assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert c.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 450
    with Store(path) as s:
        assert len(s.results("fake", DEV, P)) == 450


def test_threads_creating_one_new_store_at_once_all_open_it(tmp_path):
    # SQLite refuses a connection's switch to WAL at once (no busy wait) while another
    # is creating the same new file: a table of searches on a cluster opens one store
    # per search thread at the same moment
    import threading
    failures = []

    def open_close(path):
        try:
            Store(path).close()
        except StoreError as e:
            failures.append(str(e))
    for trial in range(60):
        path = tmp_path / f"new-{trial}.sqlite"
        threads = [threading.Thread(target=open_close, args=(path,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []


# --- the store as versions before 3 wrote it --------------------------------------------

V2_SCHEMA = """CREATE TABLE results (
    backend TEXT NOT NULL, device TEXT NOT NULL, problem TEXT NOT NULL, config TEXT NOT NULL,
    template_hash TEXT NOT NULL, schema INTEGER NOT NULL,
    M INTEGER NOT NULL, N INTEGER NOT NULL, K INTEGER NOT NULL,
    dtype TEXT NOT NULL, trans_a INTEGER NOT NULL, trans_b INTEGER NOT NULL,
    status TEXT NOT NULL, median_ms REAL, gflops REAL, error REAL, result TEXT NOT NULL,
    written REAL NOT NULL,
    PRIMARY KEY (backend, device, problem, config, template_hash, schema))"""


def old_store(path, version, results, journal="wal"):
    """A store as shadertune with schema `version` (1 or 2) wrote it."""
    import json
    c = sqlite3.connect(str(path))
    c.execute(f"PRAGMA journal_mode = {journal}")
    c.execute(V2_SCHEMA)
    for i, r in enumerate(results):
        p = r.problem
        c.execute("INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  (r.backend, r.device, p.key, r.config.key, TH, version, p.M, p.N, p.K, p.dtype,
                   int(p.trans_a), int(p.trans_b), r.status, r.median_ms, r.gflops, r.error,
                   json.dumps(r.to_dict()), 1000.0 + i))
    c.execute(f"PRAGMA user_version = {version}")
    c.commit()
    c.close()


def test_a_version_2_store_is_migrated_keeping_everything(tmp_path):
    path = tmp_path / "v2.sqlite"
    stored = [res(np_=2, ms=3.0), res(np_=4, ms=1.0), res(np_=8, status="wrong", error=0.5)]
    old_store(path, 2, stored)
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [r.to_dict() for r in s.results("fake", DEV, P)] == [r.to_dict() for r in stored]
        assert s.best("fake", DEV, P, TH).config["np"] == 4
        assert s.measured_seconds("fake", DEV, P, TH, [r.config for r in stored]) == (0.0, 3)
        s.put(res(np_=16, ms=0.5), TH, seconds=2.5, seed=7)      # a version 3 row beside them
        row = next(s.rows("config = ?", [Config(np=16, mc="1x1").key]))
        assert (row["seconds"], row["seed"]) == (2.5, 7)


def test_seconds_of_stored_measurements(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        s.put(res(np_=2), TH, seconds=1.5)
        s.put(res(np_=4), TH, seconds=2.0)
        s.put(res(np_=8), TH)
        cfgs = [Config(np=n, mc="1x1") for n in (2, 4, 8, 32)]
        assert s.measured_seconds("fake", DEV, P, TH, cfgs) == (3.5, 1)


# --- verdicts judged against the tolerance in force -------------------------------------

def test_ranked_judges_stored_errors_against_the_tolerance_in_force(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        s.put(res(np_=2, ms=3.0, error=1e-7), TH)
        s.put(res(np_=4, ms=1.0, error=4e-4), TH)      # ok under a run with tolerance 1e-3
        s.put(res(np_=8, ms=0.5, status="wrong", error=2e-6), TH)   # wrong under 1e-6
        assert [r.config["np"] for r in s.ranked("fake", DEV, P, TH)] == [2]   # float32: 1e-5
        assert [r.config["np"] for r in s.ranked("fake", DEV, P, TH, tolerance=1e-3)] == [4, 2]
        assert s.ranked("fake", DEV, P, TH, tolerance=1e-8) == []
        assert s.tuned_problems("fake", DEV, TH, tolerance=1e-8) == []
        assert s.best("fake", DEV, P, TH).config["np"] == 2


# --- read-only stores ---------------------------------------------------------------

@pytest.fixture
def shared_dir():
    """A folder another user can enter (pytest's own tmp folders are private to root)."""
    import shutil
    import tempfile
    d = pathlib.Path(tempfile.mkdtemp(prefix="shadertune-shared-"))
    os.chmod(d, 0o755)
    yield d
    os.chmod(d, 0o755)
    shutil.rmtree(d)


class as_another_user:
    """File modes apply: root (as CI runs) takes the effective uid of nobody meanwhile."""

    def __enter__(self):
        self.root = os.geteuid() == 0
        if self.root:
            os.seteuid(65534)

    def __exit__(self, *exc):
        if self.root:
            os.seteuid(0)


def _tuned_store(path, **kw):
    with Store(path, **kw) as s:
        s.put(res(np_=2, ms=3.0), TH)
        s.put(res(np_=4, ms=1.0), TH)


def test_a_read_only_store_file_is_read_and_refuses_writes_in_one_line(shared_dir):
    path = shared_dir / "t.sqlite"
    _tuned_store(path)
    os.chmod(path, 0o444)
    with as_another_user():
        with Store(path) as s:
            assert s.readonly
            assert s.best("fake", DEV, P, TH).config["np"] == 4
            with pytest.raises(StoreError, match="is read-only .*writable --db") as e:
                s.put(res(np_=8), TH)
            assert "\n" not in str(e.value)
    with Store(path, readonly=True) as s:
        assert s.count() == 2


def test_a_store_in_a_read_only_folder_is_read(shared_dir):
    path = shared_dir / "t.sqlite"
    _tuned_store(path)                       # WAL mode, closed cleanly: no -shm left
    assert not (shared_dir / "t.sqlite-shm").exists()
    os.chmod(shared_dir, 0o555)
    with as_another_user():
        with Store(path) as s:
            assert s.readonly and s.best("fake", DEV, P, TH).config["np"] == 4


def test_a_read_only_open_switches_nothing(tmp_path):
    path = tmp_path / "t.sqlite"
    old_store(path, 2, [res(np_=4, ms=1.0)], journal="delete")
    with Store(path, readonly=True) as s:
        assert s.version == 2 and s.best("fake", DEV, P, TH).config["np"] == 4
        assert s.measured_seconds("fake", DEV, P, TH, [Config(np=4, mc="1x1")]) == (0.0, 1)
    c = sqlite3.connect(path)                # not migrated, not switched to WAL
    assert c.execute("PRAGMA user_version").fetchone()[0] == 2
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [r[1] for r in c.execute("PRAGMA table_info(results)")][-1] == "written"


def test_a_read_only_version_2_store_is_read_without_migrating(shared_dir):
    path = shared_dir / "t.sqlite"
    old_store(path, 2, [res(np_=2, ms=3.0), res(np_=4, ms=1.0)])
    os.chmod(path, 0o444)
    with as_another_user():
        with Store(path) as s:
            assert s.readonly and s.version == 2
            assert s.best("fake", DEV, P, TH).config["np"] == 4
            assert [r.config["np"] for r in s.ranked("fake", DEV, P, TH)] == [4, 2]


# --- odd stores: one line, never a traceback ------------------------------------------

def _odd(path, sql):
    c = sqlite3.connect(path)
    c.executescript(sql)
    c.commit()
    c.close()


@pytest.mark.parametrize("sql, text", [
    ("CREATE TABLE other (x); PRAGMA user_version = 2;", "has no results table"),
    ("CREATE TABLE other (x); PRAGMA user_version = 3;", "has no results table"),
    ("CREATE TABLE results (backend, device); PRAGMA user_version = 3;",
     "lacks the columns problem, config"),
    ("CREATE TABLE results (backend, device); PRAGMA user_version = 2;", "lacks the columns"),
])
def test_odd_stores_are_refused_in_one_line(tmp_path, sql, text):
    path = tmp_path / "odd.sqlite"
    _odd(path, sql)
    for readonly in (None, True):
        with pytest.raises(StoreError, match=text) as e:
            Store(path, readonly=readonly)
        assert "\n" not in str(e.value) and str(path) in str(e.value)


@pytest.mark.parametrize("text", ["{not json", '{"backend": "fake"}', "[1, 2]",
                                  '{"backend":"fake","device":"d","problem":{"M":1,"N":1,"K":1},'
                                  '"config":{},"status":"bogus"}'])
def test_an_undecodable_result_is_one_line(tmp_path, text):
    path = tmp_path / "t.sqlite"
    _tuned_store(path)
    c = sqlite3.connect(path)
    c.execute("UPDATE results SET result = ?", (text,))
    c.commit()
    c.close()
    with Store(path) as s:
        for read in (lambda: s.best("fake", DEV, P, TH), lambda: s.results("fake", DEV, P),
                     lambda: s.get("fake", DEV, P, Config(np=2, mc="1x1"), TH)):
            with pytest.raises(StoreError, match="cannot be decoded") as e:
                read()
            assert "\n" not in str(e.value)


# --- a full disk ------------------------------------------------------------------

def test_a_full_store_fails_in_one_line_and_keeps_what_it_had(tmp_path):
    path = tmp_path / "t.sqlite"
    _tuned_store(path)
    with Store(path) as s:
        pages = s.conn.execute("PRAGMA page_count").fetchone()[0]
        s.conn.execute(f"PRAGMA max_page_count = {pages}")     # SQLite's own SQLITE_FULL
        with pytest.raises(StoreError, match="disk is full.*stored before is kept") as e:
            for i in range(1000):
                s.put(res(np_=100 + 2 * i, message="x" * 2000), TH)
        assert "\n" not in str(e.value)
    with Store(path) as s:
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        kept = {r.config["np"]: r.median_ms for r in s.results("fake", DEV, P)}
        assert kept[2] == 3.0 and kept[4] == 1.0


# --- cached space sizes ------------------------------------------------------------

def test_space_sizes_are_counted_once_per_definition(tmp_path):
    from fake_backend import FakeBackend, make_space
    from shadertune.db import space_sizes
    counted = []
    small, other = Problem(8, 8, 8), Problem(8, 8, 4)
    sizes = {p: len(make_space(p)) for p in (small, other)}

    def counting(problem):
        space = make_space(problem)
        n = len(space)

        class Counting(type(space)):
            def __len__(self):
                counted.append(problem)
                return n
        space.__class__ = Counting
        return space

    be = FakeBackend()
    with Store(tmp_path / "t.sqlite") as s:
        first = space_sizes(s, be, small, counting(small))
        assert first == (sizes[small], make_space(small).full_size) and counted == [small]
        assert space_sizes(s, be, small, counting(small)) == first and counted == [small]
        # other constants (K): counted anew
        assert space_sizes(s, be, other, counting(other))[0] == sizes[other]
        assert counted == [small, other]
    with Store(tmp_path / "t.sqlite", readonly=True) as s:
        assert space_sizes(s, be, small, counting(small)) == first and counted == [small, other]


def test_a_space_fingerprint_follows_its_definition():
    from shadertune.db.spaces import fingerprint
    from shadertune.core.space import Space

    def below(limit):
        return lambda cfg: cfg["x"] <= limit
    prints = [fingerprint(s) for s in (
        Space({"x": (1, 2, 3)}, ["x <= lim"], {"lim": 2}),
        Space({"x": (1, 2, 3)}, ["x <= lim"], {"lim": 3}),        # a constant
        Space({"x": (1, 2, 3, 4)}, ["x <= lim"], {"lim": 2}),     # a domain
        Space({"x": (1, 2, 3)}, ["x < lim"], {"lim": 2}),         # an expression
        Space({"x": (1, 2, 3)}, [below(2)]),                      # a captured value
        Space({"x": (1, 2, 3)}, [below(3)]))]
    assert len(set(prints)) == len(prints)
    assert fingerprint(Space({"x": (1, 2, 3)}, ["x <= lim"], {"lim": 2})) == prints[0]


def test_a_store_is_made_in_a_folder_that_is_there_and_only_the_default_folder_is_made(
        tmp_path, monkeypatch):
    """A mistyped --db path is refused with the folder it lacks, and nothing is made on
    the way; the default location (a cache folder nobody named) is made when missing."""
    missing = tmp_path / "no" / "such" / "t.sqlite"
    with pytest.raises(StoreError, match="the folder .*no/such is not there"):
        Store(missing)
    assert not (tmp_path / "no").exists()
    monkeypatch.setenv("SHADERTUNE_DB", str(missing))       # a path the user gave, by environment
    with pytest.raises(StoreError, match="is not there"):
        Store()
    monkeypatch.delenv("SHADERTUNE_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with Store() as s:
        assert s.path.parent.is_dir() and str(s.path).startswith(str(tmp_path / "cache"))
