"""Results that survive a driver update (issue 43 item 4): the same renderer's results
under another device key (driver version, GL profile) stand in where this key's give
nothing, flagged and verified against float64 on first use; the pre-tuned table
shipped with shadertune is the fallback below the user's store; `db export --best`
writes one row per problem with flat knob columns."""
import csv
import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from fake_backend import FakeBackend, is_wrong
from perfmodel_synthetic import DEVICE, TEMPLATES, put

from shadertune.selection import reverify, chain as sel
from shadertune.core.config import Config
from shadertune.db import Store, exchange, pretuned
from shadertune.cli.db import main as db_main
from shadertune.core.problem import Problem
from shadertune.core.result import Result

ROOT = Path(__file__).resolve().parent.parent
P = Problem(8, 8, 64)
GOOD = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
TRAP = Config(glsl="330", fetch="texelFetch", unroll=4, np=22, mc="2x2", mrt_h=2, mrt_w=2)  # wrong C


class NewDriver(FakeBackend):
    """The fake renderer after a driver update: another device key, the same renderer."""
    def device(self):
        d = super().device()
        return type(d)("fake", d.vendor, d.renderer, "2.0", d.limits)


@pytest.fixture(autouse=True)
def _fresh():
    sel.forget()
    yield
    pretuned.rows_for.cache_clear()
    sel.forget()


def _store(tmp_path, rows):
    path = tmp_path / "old-driver.sqlite"
    with Store(path) as s:
        for p, cfg, ms in rows:
            put(s, p, cfg, ms=ms)
    return path


def test_another_driver_s_exact_result_stands_in_and_is_verified_first(tmp_path):
    path = _store(tmp_path, [(P, GOOD, 0.1)])
    be = NewDriver()
    s = sel.select(be, P, path)
    assert (s.how, s.config, s.measured_on, s.recheck) == ("exact", GOOD, DEVICE, True)
    assert not s.pretuned and "another driver or profile" in s.reason
    text = str(s)
    assert f"measured on: {DEVICE}" in text and "on first use" in text
    assert reverify.known(be, P, GOOD) is None
    builds = len(be.builds)
    assert sel.select_config(be, P, path) == (GOOD, "exact")       # verified: one checked run
    assert len(be.builds) == builds + 1 and reverify.known(be, P, GOOD).ok
    assert sel.select_config(be, P, path) == (GOOD, "exact")       # kept: no second run
    assert len(be.builds) == builds + 1
    # the device's own results come first once it has them
    with Store(path) as st:
        st.put(Result("fake", be.device().key, P, TRAP.replace(glsl="450"), "ok", times_ms=[0.5],
                      error=1e-7), TEMPLATES)
    assert sel.select(be, P, path).measured_on is None


def test_a_config_that_fails_verification_here_is_not_run(tmp_path):
    assert is_wrong(TRAP)
    path = _store(tmp_path, [(P, TRAP, 0.01)])         # stored ok under the old driver
    be = NewDriver()
    assert sel.select(be, P, path).config == TRAP
    with pytest.warns(RuntimeWarning, match="failed verification on this device"):
        cfg, how = sel.select_config(be, P, path)
    assert (cfg, how) == (be.default_config(P), "default")
    assert reverify.known(be, P, TRAP).status == "wrong"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # the verdict is kept: warned once
        assert sel.select_config(be, P, path)[1] == "default"


def test_another_driver_s_nearest_problem_stands_in(tmp_path):
    path = _store(tmp_path, [(Problem(8, 8, 48), GOOD, 0.1)])
    s = sel.select(NewDriver(), P, path, use_model=False)
    assert (s.how, s.source, s.measured_on, s.recheck) == ("nearest", Problem(8, 8, 48), DEVICE, True)
    assert "under another driver or profile" in s.reason
    # another renderer's results never stand in
    class OtherRenderer(FakeBackend):
        def device(self):
            d = super().device()
            return type(d)("fake", d.vendor, "another renderer", "1.0", d.limits)
    assert sel.select(OtherRenderer(), P, path).how == "default"


# --- the pre-tuned table -------------------------------------------------------

def _table(monkeypatch, rows):
    """A pre-tuned table of these best rows (through the package's own parser)."""
    lines = [json.dumps(r) for r in rows]
    monkeypatch.setattr(pretuned, "table", lambda: tuple(pretuned.parse(lines)))
    pretuned.rows_for.cache_clear()
    sel.forget()                                   # selections read from the table before


def _row(p, cfg, device=DEVICE, th=TEMPLATES, gflops=5.0):
    return {"backend": "fake", "device": device, "template_hash": th, "problem": p.key, "M": p.M,
            "N": p.N, "K": p.K, "dtype": p.dtype, "trans_a": p.trans_a, "trans_b": p.trans_b,
            "batch": p.batch, "gflops": gflops, "median_ms": p.flops / (gflops * 1e6),
            "error": 1e-7, "measured": 0.0, "source": "test", **cfg.to_dict()}


def test_the_table_is_the_fallback_below_the_store(tmp_path, monkeypatch):
    _table(monkeypatch, [_row(P, GOOD), _row(Problem(64, 64, 64), GOOD.replace(np=32))])
    be = FakeBackend()
    missing = tmp_path / "none.sqlite"
    s = sel.select(be, P, missing)                    # no store at all
    assert (s.how, s.config, s.pretuned, s.recheck) == ("exact", GOOD, True, False)   # trusted
    assert "pre-tuned table shipped with shadertune" in str(s) and not missing.exists()
    s = sel.select(be, Problem(48, 64, 64), missing)
    assert (s.how, s.source, s.config["np"]) == ("nearest", Problem(64, 64, 64), 32)
    # another driver's row, or one without a template hash: verified on first use
    assert sel.select(NewDriver(), P, missing).recheck
    _table(monkeypatch, [_row(P, GOOD, th=None)])
    assert sel.select(be, P, missing).recheck and sel.select_config(be, P, missing) == (GOOD, "exact")
    # the user's store goes first
    path = _store(tmp_path, [(P, GOOD.replace(np=20), 0.1)])
    assert sel.select(be, P, path).config["np"] == 20 and not sel.select(be, P, path).pretuned


def test_the_shipped_table_reads_and_holds_only_valid_rows():
    rows = pretuned.table()
    assert rows, "shadertune/db/pretuned.jsonl is empty or unreadable"
    assert {r.backend for r in rows} <= {"gl", "cuda"}
    assert any(r.renderer.startswith("llvmpipe") for r in rows)
    for r in rows:
        assert r.gflops > 0 and r.config and r.problem.flops > 0


def test_the_shipped_table_serves_llvmpipe_without_a_store(gl, tmp_path):
    info = gl.device()
    mine = pretuned.rows_for("gl", info.renderer)
    if not mine:
        pytest.skip(f"the table has no rows for {info.renderer}")
    for r in mine:          # the llvmpipe rows are valid in today's space here
        assert gl.space(r.problem).why_invalid(r.config) is None, r
    import shadertune
    r = mine[0]
    a_shape, b_shape = r.problem.stored_shapes
    A = np.random.default_rng(0).random(a_shape, np.float32)
    B = np.random.default_rng(1).random(b_shape, np.float32)
    s = shadertune.explain(A, B, db=tmp_path / "none.sqlite")
    assert s.pretuned and s.how == "exact" and s.config == r.config
    C = shadertune.matmul(A, B, db=tmp_path / "none.sqlite")
    assert np.allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


# --- llvmpipe end to end: a store tuned under another profile ---------------------

def test_a_gl_store_of_another_profile_serves_auto_verified(gl, tmp_path, capsys, monkeypatch):
    import shadertune
    from shadertune.front import print_tuning
    old = tmp_path / "old.sqlite"
    r = shadertune.tune((24, 16, 40), evaluations=3, db=old, train=False, progress=False)
    assert r.config is not None
    # the same results as a store made under another profile and driver version
    key = gl.device().key
    other = f"{gl.device().renderer} | 9.9 (Other Profile) Mesa 99.0"
    lines = []
    with Store(old) as s:
        for rec in exchange.records(s):
            rec["device"] = other
            rec["result"]["device"] = other
            lines.append(json.dumps(rec))
    (tmp_path / "other.jsonl").write_text("\n".join(lines) + "\n")
    moved = tmp_path / "moved.sqlite"
    assert db_main(["--db", str(moved), "import", str(tmp_path / "other.jsonl")]) == 0
    capsys.readouterr()
    A = np.random.default_rng(0).random((24, 40), np.float32)
    B = np.random.default_rng(1).random((40, 16), np.float32)
    s = shadertune.explain(A, B, db=moved)
    assert (s.how, s.config, s.measured_on, s.recheck, s.rechecked) == ("exact", r.config, other, True, None)
    monkeypatch.setenv("SHADERTUNE_PRINT_TUNING", "1")
    print_tuning.reset()
    C = shadertune.matmul(A, B, db=moved)
    shadertune.matmul(A, B, db=moved)                   # the same key: said once
    print_tuning.reset()
    assert np.allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("shadertune: matmul 24x16x40 float32")]
    assert len(said) == 1 and f"measured on {other}" in said[0] and "verified: passed" in said[0]
    s = shadertune.explain(A, B, db=moved)
    assert s.rechecked.startswith("passed in this process") and "verified: passed" in str(s)
    assert key != other


# --- export --best ---------------------------------------------------------------

def test_export_best_writes_one_row_per_problem_with_flat_knobs(tmp_path, capsys):
    path = _store(tmp_path, [(P, GOOD, 0.1), (P, GOOD.replace(np=20), 0.2),
                             (Problem(16, 8, 64, trans_b=True), GOOD, 0.3)])
    with Store(path) as s:
        put(s, P, GOOD.replace(np=18), status="wrong")
    out = tmp_path / "best.csv"
    assert db_main(["--db", str(path), "export", "--best", "-o", str(out)]) == 0
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert [r["problem"] for r in rows] == ["16x8x64:float32:NT", "8x8x64:float32:NN"]
    assert list(rows[0])[:len(exchange.BEST_FIELDS)] == list(exchange.BEST_FIELDS)
    r = rows[1]
    assert {k: r[k] for k in GOOD} == {k: str(v) for k, v in GOOD.items()}
    assert float(r["median_ms"]) == pytest.approx(0.1) and r["trans_b"] == "False"
    assert db_main(["--db", str(path), "export", "--best", "--format", "jsonl"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 and all(set(x) == set(lines[0]) for x in lines)
    assert Config({k: lines[1][k] for k in GOOD}) == GOOD and lines[1]["gflops"] > 0
    # the pre-tuned table's reader takes it as it is
    assert [x.config for x in pretuned.parse(json.dumps(x) for x in lines)] == [GOOD, GOOD]
    for bad in (["--best", "--status", "ok"], ["--tolerance", "1e-3"]):
        with pytest.raises(SystemExit) as e:
            db_main(["--db", str(path), "export", *bad])
        assert e.value.code == 2


def _pretuned_script(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "pretuned"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_scripts_pretuned_regenerates_a_table_from_stores_reports_and_tables(tmp_path):
    from shadertune.search.__main__ import main as search_main
    path = _store(tmp_path, [(P, GOOD, 0.1), (P, GOOD.replace(np=20), 0.05),
                             (Problem(32, 8, 64), GOOD, 0.2)])
    out = tmp_path / "table.jsonl"
    r = _pretuned_script("--out", out, path)
    assert r.returncode == 0, r.stderr
    rows = pretuned.parse(out.read_text().splitlines())
    assert [(x.problem, x.config["np"]) for x in rows] == [(P, 20), (Problem(32, 8, 64), 22)]
    assert all(x.device == DEVICE and x.template_hash == TEMPLATES and x.source for x in rows)
    assert "2 rows" in r.stderr
    # a folder of search reports (no template hash on record) joins the table
    runs = tmp_path / "runs"
    assert search_main(["--backend", "fake_backend:FakeBackend", "--size", "16x8x64", "--budget", "3",
                        "--db", str(tmp_path / "r.sqlite"), "--report", str(runs / "r.json"), "-q"]) == 0
    (runs / "notes.json").write_text('{"not": "a source"}')
    r = _pretuned_script("--dry-run", out, runs)
    assert r.returncode == 0 and "3 rows" in r.stderr and "1 best rows" in r.stderr, r.stderr
    r = _pretuned_script("--out", out, out, runs)              # in place: the table and the runs
    assert r.returncode == 0, r.stderr
    rows = pretuned.parse(out.read_text().splitlines())
    assert len(rows) == 3 and [x.template_hash for x in rows if x.problem == Problem(16, 8, 64)] == [None]
    assert _pretuned_script("--dry-run", tmp_path / "missing.sqlite").returncode == 1


def test_scripts_pretuned_reads_a_store_kept_compressed(tmp_path):
    # benchmarks/ keeps its stores as .sqlite.xz: read through a temporary copy, the rows
    # name the compressed file
    import lzma
    path = _store(tmp_path, [(P, GOOD, 0.1), (Problem(32, 8, 64), GOOD, 0.2)])
    xz = tmp_path / "kept.sqlite.xz"
    xz.write_bytes(lzma.compress(path.read_bytes()))
    out = tmp_path / "table.jsonl"
    r = _pretuned_script("--out", out, xz)
    assert r.returncode == 0, r.stderr
    rows = pretuned.parse(out.read_text().splitlines())
    assert len(rows) == 2 and {x.source for x in rows} == {"kept.sqlite.xz"}
    assert not list(tmp_path.glob("kept.sqlite")) and "kept.sqlite.xz: 2 best rows" in r.stderr
