"""scripts/lu-gl and scripts/bench-gl-arrays on llvmpipe at tiny sizes: the LU client on GL
arrays factors a diagonally dominant matrix to numpy's error and numpy's factors, both
clients and scipy's lu_factor side by side; the GPU batch's every stage runs to its JSON
and table.  No timing decides anything here; the GPU run is the lead's (notes/gl-arrays.md)."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
import bench_gl_arrays  # noqa: E402
import lu_gl  # noqa: E402

from subproc import ROOT as _ROOT, child_env  # noqa: E402

ROOT = pathlib.Path(_ROOT)

COMPUTE = '{"family": "compute"}'


def test_lu_on_gl_arrays_matches_numpy(gl):
    A0 = lu_gl.test_matrix(96, seed=3)
    got = lu_gl.lu_gl(A0.copy(), 32, config={"family": "compute"})
    want = lu_gl.lu_numpy(A0.copy(), 32)
    assert lu_gl.residual(A0, got) < 1e-6
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5
    # a block that does not divide n, and the fragment family (packed on the GPU)
    got = lu_gl.lu_gl(A0[:90, :90].copy(), 32, config="jiang")
    assert lu_gl.residual(A0[:90, :90], got) < 1e-6


def test_the_numpy_panel_factorisation_agrees_with_lapack(monkeypatch):
    A0 = lu_gl.test_matrix(80, seed=1)
    with_lapack = lu_gl.lu_numpy(A0.copy(), 48)
    monkeypatch.setattr(lu_gl, "_sla", None)           # as without scipy
    without = lu_gl.lu_numpy(A0.copy(), 48)
    assert np.linalg.norm(without - with_lapack) / np.linalg.norm(with_lapack) < 1e-5
    assert lu_gl.residual(A0, without) < 1e-6


def test_a_matrix_that_needs_pivoting_is_refused():
    A = np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)
    with pytest.raises(ValueError, match="row exchanges|zero pivot"):
        lu_gl.lu_numpy(A, 2)


def test_lu_gl_command_line(gl, tmp_path):
    out = tmp_path / "lu.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lu-gl"), "--size", "64,96", "--block", "32",
                        "--config", COMPUTE, "--repeats", "1", "--seed", "2", "--db", str(tmp_path / "s.sqlite"),
                        "--json", str(out)],
                       cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [x["n"] for x in rows] == [64, 96] and all(x["gl_residual"] < 1e-6 for x in rows)
    assert all(x["gl_vs_numpy_factors"] < 1e-5 and x["gl_s"] > 0 and x["numpy_s"] > 0 for x in rows)
    assert "| 96 | 32 |" in r.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "lu-gl"), "--size", "0"],
                         cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("lu-gl: error:") and "Traceback" not in bad.stderr


def test_bench_gl_arrays_runs_every_stage(gl, tmp_path):
    out = tmp_path / "b"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench-gl-arrays"), str(out), "--sizes", "32",
                        "--lu", "64", "--block", "32", "--chain", "3", "--config", COMPUTE,
                        "--db", str(tmp_path / "s.sqlite"), "--timeout", "300",
                        "--stages", "chain,lu,e2e,overhead"],
                       cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads((out / "bench-gl-arrays.json").read_text())
    assert [s["status"] for s in doc["stages"]] == ["ok"] * 4
    by = {}
    for row in doc["rows"]:
        by.setdefault(row["stage"], []).append(row)
    chain = by["chain"][0]
    assert chain["n"] == 32 and chain["kernel_ms"] > 0 and chain["rows_rel_error"] < 1e-5
    assert by["lu"][0]["gl_residual"] < 1e-6 and by["e2e"][0]["numpy_in_out_s"] > 0
    assert {(x["config"], x["operands"]) for x in by["overhead"]} >= {("auto", "gl arrays"), ("default", "numpy")}
    md = (out / "bench-gl-arrays.md").read_text()
    assert "of kernel speed" in md and "- lu: ok" in md


def test_bench_gl_arrays_records_a_stage_that_runs_out_of_time(gl, tmp_path):
    out = tmp_path / "t"
    rc = bench_gl_arrays.main([str(out), "--stages", "e2e", "--sizes", "32", "--timeout", "0.01",
                               "--config", COMPUTE])
    doc = json.loads((out / "bench-gl-arrays.json").read_text())
    assert rc == 1 and doc["stages"][0]["status"].startswith("timed out")
    with pytest.raises(SystemExit):
        bench_gl_arrays.main([str(out), "--stages", "nope"])
