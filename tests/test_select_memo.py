"""auto's selection kept while the store is unchanged, and seen again after any write;
the tolerance in force throughout the chain."""

import pathlib

import pytest
from subproc import run_python
from fake_backend import FakeBackend
from perfmodel_synthetic import DEVICE, TEMPLATES, TRAIN, fill, put

from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.perfmodel import model_for
from shadertune.core.problem import Problem
from shadertune.core.result import Result
from shadertune.selection.chain import select, select_config

P = Problem(8, 8, 64)


def cfg(np_=22, mc="1x4"):
    return Config(glsl="450", fetch="texelFetch", unroll=4, np=np_, mc=mc, mrt_h=2, mrt_w=2)


@pytest.fixture
def reads(monkeypatch):
    """How many times a store is asked for ranked results (the real queries run)."""
    count = [0]
    ranked = Store.ranked

    def counted(self, *a, **kw):
        count[0] += 1
        return ranked(self, *a, **kw)
    monkeypatch.setattr(Store, "ranked", counted)
    return count


def test_a_kept_selection_reads_no_store(tmp_path, reads):
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        put(s, P, cfg(), ms=1.0)
    be = FakeBackend()
    assert select_config(be, P, path) == (cfg(), "exact")
    n = reads[0]
    assert n >= 1
    for _ in range(3):
        assert select_config(be, P, path) == (cfg(), "exact")
    assert reads[0] == n
    select_config(be, P, path, tolerance=1e-3)            # another tolerance: another selection
    assert reads[0] > n


@pytest.fixture
def one(tmp_path):
    """A store holding one result of P, whose selection is kept."""
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        put(s, P, cfg(), ms=1.0)
    assert select_config(FakeBackend(), P, path) == (cfg(), "exact")
    return path


def test_a_write_through_another_connection_is_seen(one):
    path, be = one, FakeBackend()
    with Store(path) as s:
        put(s, P, cfg(24), ms=0.5)                         # faster, written by this connection
        assert select_config(be, P, path) == (cfg(24), "exact")
        assert select_config(be, P, s) == (cfg(24), "exact")   # the Store itself as db
        put(s, P, cfg(26), ms=0.25)
        assert select_config(be, P, s) == (cfg(26), "exact")


def test_a_write_by_another_process_is_seen(one):
    path, be = one, FakeBackend()
    code = ("import sys; from perfmodel_synthetic import put; "
            "from shadertune.db import Store; from shadertune.core.problem import Problem; "
            "from shadertune.core.config import Config; s = Store(sys.argv[1]); "
            "put(s, Problem(8, 8, 64), Config(glsl='450', fetch='texelFetch', unroll=4, np=30, "
            "mc='1x4', mrt_h=2, mrt_w=2), ms=0.1); s.close()")
    r = run_python(code, path)
    assert r.returncode == 0, r.stderr
    assert select_config(be, P, path) == (cfg(30), "exact")


def test_a_store_made_again_is_seen(tmp_path):
    path = tmp_path / "s.sqlite"
    be = FakeBackend()
    assert select_config(be, P, path)[1] == "default"      # no store yet
    with Store(path) as s:
        put(s, P, cfg(), ms=1.0)
    assert select_config(be, P, path) == (cfg(), "exact")   # seen once made
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"s.sqlite{suffix}").unlink(missing_ok=True)
    with Store(path) as s:
        put(s, P, cfg(28), ms=1.0)
    assert select_config(be, P, path) == (cfg(28), "exact")


def test_a_store_replaced_on_disk_is_read_as_it_is_now(tmp_path):
    """Keeping selections holds no connection open: a store replaced by another file
    (mv) is read with its own content, never with the old file's write-ahead log."""
    path, other = tmp_path / "s.sqlite", tmp_path / "new.sqlite"
    be = FakeBackend()
    with Store(path) as s:
        put(s, P, cfg(), ms=1.0)
        assert select_config(be, P, path) == (cfg(), "exact")   # kept, with the store open
        with Store(other) as t:
            put(t, P, cfg(28), ms=1.0)
        put(s, P, cfg(24), ms=0.5)                               # a write left in the old log
    assert not (tmp_path / "s.sqlite-wal").exists()              # the last writer cleaned up
    (tmp_path / "new.sqlite").replace(path)
    assert select_config(be, P, path) == (cfg(28), "exact")
    with Store(path) as s:
        assert [r.config for r in s.ranked("fake", DEVICE, P, TEMPLATES)] == [cfg(28)]


def test_the_tolerance_is_in_force_in_every_rule(tmp_path):
    """A result within the float32 default (1e-5) but over a stricter tolerance is not
    correct there: not exact, not nearest, not among the model's candidates."""
    be = FakeBackend()
    loose = cfg(24, "2x2")
    with Store(tmp_path / "s.sqlite") as s:
        fill(s, TRAIN, per_problem=20)
        for p in (P, *TRAIN):
            s.put(Result("fake", DEVICE, p, loose, "ok", times_ms=[1e-4], error=5e-6), TEMPLATES)
        model_for(be, s)                 # the writer trains the model; auto only reads it
        assert select(be, P, s).config == loose
        strict = select(be, P, s, tolerance=1e-6)
        assert strict.how == "model" and strict.config != loose
        near = select(be, Problem(8, 8, 60), s, use_model=False)
        assert near.how == "nearest" and near.config == loose
        strict = select(be, Problem(8, 8, 60), s, tolerance=1e-6, use_model=False)
        assert strict.how == "nearest" and strict.config != loose
        model = select(be, Problem(150, 20, 40), s)
        assert model.how == "model" and model.config == loose            # the fastest everywhere
        strict = select(be, Problem(150, 20, 40), s, tolerance=1e-6)
        assert strict.how == "model" and loose not in [c for _, c in strict.ranked]


# --- the store's change counter (db/changes.py) -------------------------------------

def test_every_write_counts_whoever_writes(tmp_path):
    """The counter is kept by triggers in the file: a write through another connection
    (an older shadertune, the sqlite3 shell) counts as one of ours; a store made again
    is another store."""
    import sqlite3
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        put(s, P, cfg(), ms=1.0)
        put(s, P, cfg(24), ms=0.5)
        sid, n = s.changes()
    assert n == 2
    raw = sqlite3.connect(path)
    raw.execute("UPDATE results SET median_ms = 0.25 WHERE config = ?", [cfg(24).key])
    raw.execute("DELETE FROM results WHERE config = ?", [cfg().key])
    raw.commit()
    raw.close()
    from shadertune.db import changes
    assert changes.counter(str(path)) == (sid, 4)
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"s.sqlite{suffix}").unlink(missing_ok=True)
    with Store(path) as s:
        put(s, P, cfg(), ms=1.0)
        assert s.changes()[0] != sid


def test_a_stamp_moved_by_no_result_keeps_the_selection(one, reads, monkeypatch):
    """A write that is not a result (a cached space size) moves the stamp; the counter
    says the results are the same, so the store is not read again."""
    from shadertune.db import changes
    monkeypatch.setattr(changes, "FRESH", 0.0)
    be = FakeBackend()
    assert select_config(be, P, one) == (cfg(), "exact")
    n = reads[0]
    with Store(one) as s:
        s.keep_space_size("fake", DEVICE, TEMPLATES, P.key, "fingerprint", 10, 20)
    assert select_config(be, P, one) == (cfg(), "exact") and reads[0] == n


def test_a_write_the_stamp_cannot_see_is_seen_while_fresh(one, monkeypatch):
    """A commit by another process within the file system's clock tick can leave size
    and time as they were: while the files are that young, the counter decides."""
    from shadertune.db import changes
    be = FakeBackend()
    frozen = changes.stamp(str(one))
    monkeypatch.setattr(changes, "stamp", lambda path: frozen)      # as if nothing moved
    monkeypatch.setattr(changes, "fresh", lambda stamp, now=None: True)
    assert select_config(be, P, one) == (cfg(), "exact")
    code = ("import sys; sys.path.insert(0, 'tests'); from perfmodel_synthetic import put; "
            "from shadertune.db import Store; from shadertune.core.problem import Problem; "
            "from shadertune.core.config import Config; s = Store(sys.argv[1]); "
            "put(s, Problem(8, 8, 64), Config(glsl='450', fetch='texelFetch', unroll=4, np=30, "
            "mc='1x4', mrt_h=2, mrt_w=2), ms=0.1); s.close()")
    r = run_python(code, str(one), cwd=pathlib.Path(__file__).parent.parent)
    assert r.returncode == 0, r.stderr
    assert select_config(be, P, one) == (cfg(30), "exact")
