"""The store's safety, on real files, real users, real symlinks and real locks:

- a store damaged where quick_check cannot see it (an index page gone) is refused before
  any write and before any reader answers from it (search, db best, auto);
- db check tells a busy store (WAL or delete journal, locked by another process) and a
  store it cannot read as it needs (a read-only folder or mount, another user's file)
  from a damaged one, with exit statuses of their own, and never advises deleting them;
- a saved model beside a shared store is data: another user's matmul and search never
  run code from it; an old pickled model is loaded only when it is the user's own;
- no output of any tool replaces a store: the one $SHADERTUNE_DB or the default location
  names, through a symlink, or any SQLite file;
- `db export -o - | db import -` through a real pipe.
"""
import contextlib
import io
import json
import os
import pathlib
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest
from subproc import child_env, popen_python, run_python
from fake_backend import FakeBackend

from shadertune.db import Store
from shadertune.db.errors import StoreBusy
from shadertune.cli.db import main as db_main
from shadertune.cli.report import main as report_main
from shadertune.cli.search import main as search_main

FAKE = "fake_backend:FakeBackend"
FIX = pathlib.Path(__file__).resolve().parent / "fixtures"
REPORT = FIX / "report_gl_llvmpipe.json"
NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="taking another uid needs root")


def search(db, *args):
    return search_main(["--backend", FAKE, "--db", str(db), "-q", "--repeats", "1",
                        "--budget", "15", *map(str, args)])


def exits(fn, argv) -> int:
    try:
        return fn(*argv) if fn is search else fn(argv)
    except SystemExit as e:
        return e.code


def one_line(err: str, *texts, tool="shadertune.search") -> str:
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"{tool}: error: "), err
    for t in texts:
        assert t in err, (t, err)
    return err


def pragma(db, name) -> str:
    c = sqlite3.connect(db)
    try:
        return c.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        c.close()


@pytest.fixture
def shared_dir():
    """A folder another user can enter (pytest's own tmp folders are private to root)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="shadertune-shared-"))
    os.chmod(d, 0o755)
    yield d
    for p in [d, *d.rglob("*")]:
        with contextlib.suppress(OSError):
            os.chmod(p, 0o777 if p.is_dir() else 0o666)
    shutil.rmtree(d, ignore_errors=True)


# --- a damaged store: refused before writes and reads ---------------------------------

def _index_damaged_copy(base: pathlib.Path, where: pathlib.Path) -> pathlib.Path:
    """A copy of `base` cut short where SQLite's quick_check still passes and its
    integrity_check does not (an index page gone: rows missing from results_ok)."""
    for cut in range(100, 8192, 100):
        shutil.copy(base, where)
        os.truncate(where, os.path.getsize(base) - cut)
        try:
            if pragma(where, "quick_check") == "ok" and pragma(where, "integrity_check") != "ok":
                return where
        except sqlite3.DatabaseError:
            continue
    pytest.fail("no cut of the store passes quick_check and fails integrity_check")


def test_a_store_damaged_past_quick_check_is_never_written_nor_answered_from(tmp_path, capsys):
    from shadertune.core.problem import Problem
    from shadertune.selection.chain import select
    base = tmp_path / "base.sqlite"
    assert search(base, "--size", "8") == 0
    db = _index_damaged_copy(base, tmp_path / "s.sqlite")
    before = db.read_bytes()
    capsys.readouterr()
    assert search(db, "--size", "8") == 1                       # refused before any work
    one_line(capsys.readouterr().err, f"store {db} is damaged", "missing from index", "check says more")
    assert search(db, "--size", "16") == 1                      # a new problem too
    capsys.readouterr()
    assert db.read_bytes() == before                            # nothing written
    assert db_main(["--db", str(db), "best"]) == 1               # best answers nothing from it
    one_line(capsys.readouterr().err, f"store {db} is damaged", tool="shadertune.db")
    assert db_main(["--db", str(db), "check"]) == 1
    assert "damaged" in capsys.readouterr().out
    with warnings.catch_warnings(record=True) as caught:         # auto: the default, and says why
        warnings.simplefilter("always")
        sel = select(FakeBackend(), Problem(8, 8, 8), db)
    assert sel.how == "default"
    assert any("ignoring the tuning store" in str(w.message) and "is damaged" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    assert db_main(["--db", str(db), "export", "-o", str(tmp_path / "rescued.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "warning: store" in err and "what can still be read" in err
    assert (tmp_path / "rescued.jsonl").read_text().count("\n") > 0


def test_the_health_check_is_kept_per_state_of_the_store(tmp_path):
    from shadertune.db import check
    db = tmp_path / "s.sqlite"
    assert search(db, "--size", "8") == 0
    with Store(db) as s:
        s.check_health()
        assert check._verified[os.path.realpath(db)] == check.verified_stamp(db)
    shutil.copy(_index_damaged_copy(db, tmp_path / "cut.sqlite"), db)   # the same name, damaged
    with Store(db, readonly=True) as s, pytest.raises(check.StoreDamaged):
        s.count()


# --- db check: busy and read-only are not damaged --------------------------------------

HOLD_LOCK = """
    import sqlite3, sys, time
    c = sqlite3.connect(sys.argv[1], isolation_level=None)
    if sys.argv[2] == "wal":                 # WAL: only an exclusive locking mode keeps readers out
        c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA locking_mode = EXCLUSIVE")
        c.execute("BEGIN EXCLUSIVE")
        c.execute("UPDATE results SET written = written WHERE rowid = 1")
        c.execute("COMMIT")
    else:                                    # a rollback journal: an exclusive lock held
        c.execute("PRAGMA journal_mode = DELETE")
        c.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.read()                         # held until the test closes our stdin
"""


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_check_of_a_locked_store_says_busy_not_damaged(tmp_path, capsys, journal):
    db = tmp_path / "s.sqlite"
    assert search(db, "--size", "8") == 0
    holder = popen_python(HOLD_LOCK, db, journal, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "locked"
        capsys.readouterr()
        assert db_main(["--db", str(db), "check", "--wait", "0.3"]) == 3
        out = capsys.readouterr().out
        assert out.startswith(f"store {db}: busy: another connection holds a lock on it"), out
        assert "damaged" not in out and "delete" not in out
        for readonly in (True, None):                            # opening it: busy, not unusable
            with pytest.raises(StoreBusy) as e:
                with Store(db, readonly=readonly, timeout=0.3) as s:
                    s.count()
            assert "is busy" in str(e.value) and "delete" not in str(e.value)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert db_main(["--db", str(db), "check"]) == 0              # free again: healthy
    assert "healthy" in capsys.readouterr().out


CHECK_AS_NOBODY = """
    import contextlib, io, os, sys
    from shadertune.cli.db import main
    warm = sys.argv[1]                       # every import check needs, while root may read them
    with contextlib.redirect_stdout(io.StringIO()):
        main(["--db", warm, "check"])
    os.setgroups([]); os.setgid(%d); os.setuid(%d)
    try:
        code = main(sys.argv[2:])
    except SystemExit as e:
        code = e.code
    print("exit", code)
""" % (NOBODY, NOBODY)


def check_as_nobody(warm, db) -> tuple[int, str]:
    r = run_python(CHECK_AS_NOBODY, warm, "--db", db, "check")
    assert r.stdout.strip().splitlines()[-1].startswith("exit "), (r.stdout, r.stderr)
    return int(r.stdout.split()[-1]), r.stdout + r.stderr


WAL_LEFT = """
    import os, sqlite3, sys
    c = sqlite3.connect(sys.argv[1], isolation_level=None)
    c.execute("PRAGMA wal_autocheckpoint = 0")
    c.execute("UPDATE results SET written = written + 1 WHERE rowid <= 3")
    os._exit(0)                              # its newest pages stay in the -wal file
"""


@root_only
def test_check_as_another_user_of_a_read_only_folder(shared_dir, tmp_path):
    warm = tmp_path / "warm.sqlite"
    assert search(warm, "--size", "8") == 0
    db = shared_dir / "s.sqlite"
    assert search(db, "--size", "8") == 0                        # closed cleanly: no -wal, no -shm
    assert not os.path.exists(f"{db}-wal") and not os.path.exists(f"{db}-shm")
    os.chmod(shared_dir, 0o555)
    code, out = check_as_nobody(warm, db)
    assert code == 0 and f"store {db}: healthy" in out, out     # read as immutable: whole
    os.chmod(shared_dir, 0o755)
    r = run_python(WAL_LEFT, db)
    assert r.returncode == 0 and os.path.getsize(f"{db}-wal") > 0, r.stderr
    os.unlink(f"{db}-shm")
    os.chmod(shared_dir, 0o555)
    code, out = check_as_nobody(warm, db)                        # its newest pages unreadable here
    assert code == 4 and f"store {db}: not checked: its write-ahead log" in out, out
    assert "damaged" not in out and "delete" not in out
    os.chmod(shared_dir, 0o755)
    os.chmod(db, 0o600)                                          # another user's private file
    code, out = check_as_nobody(warm, db)
    assert code == 4 and "not checked: this user cannot read it" in out, out
    assert "damaged" not in out and "delete" not in out


@root_only
def test_check_of_a_store_on_a_read_only_mount(tmp_path, capsys):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2048k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        db = mnt / "s.sqlite"
        assert search(db, "--size", "8") == 0
        r = subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        capsys.readouterr()
        assert db_main(["--db", str(db), "check"]) == 0
        assert f"store {db}: healthy" in capsys.readouterr().out
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# --- a saved model beside a shared store is data ---------------------------------------

class _Payload:
    """A pickle that makes a folder when it is loaded: proof that loading ran its code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _plant_pickle(model_file: pathlib.Path, marker: pathlib.Path) -> pathlib.Path:
    legacy = model_file.with_suffix(".pkl")       # where models were pickled
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_bytes(pickle.dumps(_Payload(marker)))
    os.chmod(legacy.parent, 0o755)
    os.chmod(legacy, 0o644)
    return legacy


MATMUL_AS_NOBODY = """
    import os, sys, warnings
    import numpy as np, shadertune
    store, warm = sys.argv[1], sys.argv[2]
    A, B = np.ones((5, 7), np.float32), np.ones((7, 3), np.float32)
    shadertune.matmul(A, B, db=warm)          # imports and the GL context, as root
    from shadertune.perfmodel import learners, saved
    learners.sklearn()                        # scikit-learn, read while root may
    import sklearn.ensemble, sklearn.linear_model, sklearn.neural_network, sklearn.pipeline
    os.setgroups([]); os.setgid(%d); os.setuid(%d)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        C = shadertune.matmul(A, B, db=store)
    print("sum", float(C.sum()))
    print("warnings", [str(w.message) for w in caught])
""" % (NOBODY, NOBODY)


@root_only
def test_another_users_matmul_never_runs_code_from_a_shared_store(shared_dir, tmp_path, gl):
    from shadertune.perfmodel import saved
    store = shared_dir / "s.sqlite"
    Store(store).close()                                         # a store without this shape
    marker = shared_dir / "work" / "ran"
    (shared_dir / "work").mkdir(mode=0o777)
    os.chmod(shared_dir / "work", 0o777)
    dev, th = gl.device().key, gl.template_hash()
    legacy = _plant_pickle(saved.model_path(store, "gl", dev, th), marker)
    os.chown(legacy, 1, 1)                                       # another user's file (uid 1)
    r = run_python(MATMUL_AS_NOBODY, store, tmp_path / "warm.sqlite")
    assert r.returncode == 0, r.stderr
    assert not marker.exists(), "loading the store's model ran its code"
    assert "sum 105.0" in r.stdout
    assert "ignoring the saved model" in r.stdout and "a pickle" in r.stdout, r.stdout


SEARCH_AS_NOBODY = """
    import contextlib, io, os, sys
    from shadertune.cli.search import main
    store, warm = sys.argv[1], sys.argv[2]
    argv = ["--backend", "fake_backend:FakeBackend", "--size", "8", "--budget", "3", "-q",
            "--strategy", "model"]
    with contextlib.redirect_stdout(io.StringIO()):
        main(argv + ["--db", warm])
    from shadertune.perfmodel import learners
    learners.sklearn()                        # scikit-learn, read while root may
    import sklearn.ensemble, sklearn.linear_model, sklearn.neural_network, sklearn.pipeline
    os.setgroups([]); os.setgid(%d); os.setuid(%d)
    try:
        code = main(argv + ["--db", store])
    except SystemExit as e:
        code = e.code
    print("exit", code)
""" % (NOBODY, NOBODY)


@root_only
def test_another_users_search_never_runs_code_from_a_shared_store(shared_dir, tmp_path):
    from shadertune.perfmodel import saved
    be = FakeBackend()
    store = shared_dir / "s.sqlite"
    assert search(store, "--size", "16") == 0
    (shared_dir / "work").mkdir()
    os.chmod(shared_dir / "work", 0o777)
    marker = shared_dir / "work" / "ran"
    legacy = _plant_pickle(saved.model_path(store, be.name, be.device().key, be.template_hash()), marker)
    os.chown(legacy, 1, 1)
    r = run_python(SEARCH_AS_NOBODY, store, tmp_path / "warm.sqlite")
    assert "exit" in r.stdout, r.stderr
    assert not marker.exists(), "loading the store's model ran its code"


def test_an_old_pickled_model_is_loaded_only_when_it_is_the_users_own(tmp_path):
    """A pickle that is this user's own and not writable by others still loads (and a
    writer saves it again as data); one owned by another user, or group- or
    world-writable, is ignored with one warning and never unpickled."""
    from shadertune.perfmodel import saved
    from shadertune.perfmodel.saved import model_for
    from shadertune.core.problem import Problem
    from perfmodel_synthetic import fill
    be = FakeBackend()
    with Store(tmp_path / "s.sqlite") as store:
        fill(store, [Problem(64, 16, 32), Problem(16, 64, 32), Problem(32, 32, 32)], per_problem=12)
        m, note = model_for(be, store)
        assert note == "trained"
        path = saved.model_path(store.path, be.name, be.device().key, be.template_hash())
        assert path.suffix == ".npz" and path.exists()
        with np.load(path, allow_pickle=False) as npz:           # data: no object arrays
            assert all(npz[k].dtype != object for k in npz.files)
        # the same model as the last pickled format saved it (format 7, a fitted estimator)
        from shadertune.perfmodel import learners
        from shadertune.perfmodel.data import training_data
        data = training_data(store, be.name, be.device().key, be.template_hash())
        X = m.featurizer.rows(list(zip(data.problems, data.configs)))
        fitted = learners.make(m.learner)
        fitted.fit(X, np.log(data.gflops()))
        old = saved.PerfModel(backend=m.backend, device=m.device, template_hash=m.template_hash,
                              limits=m.limits, learner=m.learner, target=m.target,
                              featurizer=m.featurizer, estimator=fitted,
                              meta={**m.meta, "format": 7}, verified=m.verified)
        path.unlink()
        legacy = saved.legacy_path(path)
        legacy.write_bytes(pickle.dumps(old))
        os.chmod(legacy, 0o644)
        saved.forget()
        got = saved.load(path)                                   # our own: loaded, as arrays
        assert got is not None and isinstance(got.estimator, saved.Estimator)
        p, cfgs = Problem(40, 20, 24), be.space(Problem(40, 20, 24)).configs()[:40]
        np.testing.assert_allclose(got.predict_gflops(p, cfgs),
                                   np.exp(fitted.predict(m.featurizer.transform(p, cfgs))), rtol=1e-12)
        assert model_for(be, store)[1] in ("loaded", "trained") and path.exists()   # saved as data
        path.unlink()
        os.chmod(legacy, 0o666)                                  # others may write it
        saved.forget()
        saved._warned.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert saved.load(path) is None
            assert saved.load(path) is None                      # one warning per file
        msgs = [str(w.message) for w in caught]
        assert len(msgs) == 1 and "ignoring the saved model" in msgs[0], msgs


def test_the_saved_estimator_predicts_as_scikit_learn_does(tmp_path):
    """Every learner learners.make builds, taken apart into arrays and rebuilt, predicts
    what the fitted scikit-learn estimator predicts; a file whose arrays point outside
    their trees is refused, never followed."""
    from shadertune.perfmodel import learners
    from shadertune.perfmodel.estimator_arrays import Estimator
    rng = np.random.default_rng(3)
    X = rng.random((160, 9))
    X[:, 3] = np.round(X[:, 3] * 4)                              # ties at thresholds
    y = np.sin(X @ rng.random(9) * 3)
    Xt = np.vstack([rng.random((70, 9)), X[:10]])
    for name in learners.NAMES:
        fitted = learners.make(name)
        with learners.one_thread():
            fitted.fit(X, y)
        est = Estimator.of(fitted, 9)
        np.testing.assert_allclose(est.predict(Xt), fitted.predict(Xt), rtol=1e-12, atol=1e-12,
                                   err_msg=name)
        rebuilt = Estimator(json.loads(json.dumps(est.spec)), dict(est.arrays), 9)
        np.testing.assert_array_equal(rebuilt.predict(Xt), est.predict(Xt))
    fitted = learners.make("extratrees")
    fitted.fit(X, y)
    est = Estimator.of(fitted, 9)
    ch = est.spec["children"]
    bad = dict(est.arrays)
    bad[ch] = bad[ch].copy()
    bad[ch][0] = 0                                               # the root its own left child
    with pytest.raises(ValueError, match="later nodes"):
        Estimator(est.spec, bad, 9)
    bad = dict(est.arrays)
    bad[est.spec["feature"]] = np.full_like(bad[est.spec["feature"]], 99)
    with pytest.raises(ValueError, match="feature"):
        Estimator(est.spec, bad, 9)


# --- no output replaces a store ---------------------------------------------------------

def _store(path) -> bytes:
    with Store(path) as s:
        s.write_rows([])
    return pathlib.Path(path).read_bytes()


def test_report_outputs_never_replace_the_store_the_environment_names(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    env_store = tmp_path / "env" / "tune.sqlite"
    env_store.parent.mkdir()
    monkeypatch.setenv("SHADERTUNE_DB", str(env_store))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    default_store = tmp_path / "cache" / "shadertune" / "tune.sqlite"
    default_store.parent.mkdir(parents=True)
    kept = {p: _store(p) for p in (env_store, default_store)}
    link = tmp_path / "plot.png"
    runs = [
        (["show", str(REPORT), "--plot", str(link)], env_store),
        (["show", str(REPORT), "--plot", str(link)], default_store),
        (["roofline", "--out", str(env_store)], None),
        (["roofline", "--out", f"{env_store}-wal"], None),
        (["roofline", "--out", str(tmp_path / "c.json")], "link-json"),
        (["compare", str(REPORT), str(REPORT), "--plot", str(link)], env_store),
        (["trajectory", str(REPORT), "--out", str(link)], default_store),
    ]
    for argv, target in runs:
        for p in (link, tmp_path / "c.json"):
            if p.is_symlink() or p.exists():
                p.unlink()
        if target == "link-json":
            (tmp_path / "c.json").symlink_to(env_store)
        elif target is not None:
            link.symlink_to(target)
        capsys.readouterr()
        assert exits(report_main, argv) == 2, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err and "tuning store's file" in err, (argv, err)
    for p, data in kept.items():
        assert p.read_bytes() == data and pragma(p, "integrity_check") == "ok"
    assert not link.exists() or link.is_symlink()


def test_no_output_replaces_any_sqlite_file(tmp_path, capsys):
    src = tmp_path / "s.sqlite"
    assert search(src, "--size", "8") == 0
    other = tmp_path / "other.sqlite"                           # a store named nowhere
    data = _store(other)
    capsys.readouterr()
    assert exits(db_main, ["--db", str(src), "export", "-o", str(other)]) == 2
    assert "is an SQLite database" in capsys.readouterr().err
    assert exits(search, [src, "--size", "8", "--report", str(other)]) == 2
    assert other.read_bytes() == data


# --- db export -o - | db import - ----------------------------------------------------------

def test_export_piped_into_import_through_standard_input(tmp_path):
    src, dst = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    assert search(src, "--size", "8") == 0
    env = child_env()
    exp = subprocess.Popen([sys.executable, "-m", "shadertune.db", "--db", str(src), "export", "-o", "-"],
                           stdout=subprocess.PIPE, env=env)
    imp = subprocess.run([sys.executable, "-m", "shadertune.db", "--db", str(dst), "import", "-"],
                         stdin=exp.stdout, capture_output=True, text=True, env=env, timeout=120)
    exp.stdout.close()
    assert exp.wait(timeout=60) == 0
    assert imp.returncode == 0, imp.stderr
    assert imp.stdout.startswith("15 added, 0 replaced"), imp.stdout
    rows = "SELECT backend, device, problem, config, template_hash, status, result FROM results ORDER BY config"
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        assert a.execute(rows).fetchall() == b.execute(rows).fetchall()
    again = subprocess.run([sys.executable, "-m", "shadertune.db", "--db", str(dst), "import", "-", "-"],
                           input="", capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 1 and "standard input ('-') can be imported once" in again.stderr
    store_in = subprocess.run([sys.executable, "-m", "shadertune.db", "--db", str(dst), "import", "-"],
                              stdin=open(src, "rb"), capture_output=True, text=True, env=env, timeout=60)
    assert store_in.returncode == 1 and "standard input is an SQLite store" in store_in.stderr
