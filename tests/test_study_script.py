"""scripts/study end to end on GL (llvmpipe here), on a 8-config subspace of 16x16x16:
each strategy's report, the commands as run, the tables and the figures; a subspace
too large for exhaustive search is refused before anything runs."""
import json
import pathlib

import pytest
from md_table import table_lines
from subproc import run_python

pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parent.parent
STUDY = ROOT / "scripts" / "study"
FIX = ["--fix", "glsl=330", "--fix", "fetch=texelFetch", "--fix", "unroll=1", "--fix", "np=4,16",
       "--fix", "mc=1x4", "--fix", "mrt_h=1,2", "--fix", "mrt_w=1,2"]


def study(*args, cwd=ROOT):
    return run_python(None, STUDY, *args, cwd=cwd, timeout=600)


def test_study_writes_reports_tables_and_figures(gl, tmp_path):
    out = tmp_path / "study"
    # --out relative to where the study was started (its searches once ran in the checkout
    # and wrote there, and the study failed reading its own reports)
    p = study("--backend", "gl", "--size", "16", *FIX, "--seeds", "1", "--repeats", "1", "-q",
              "--out", "study", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    reports = sorted(f.name for f in (out / "reports").iterdir())
    assert reports == ["exhaustive.json", "phased.json", "random-seed0.json"]
    ex = json.loads((out / "reports" / "exhaustive.json").read_text())["problems"][0]
    assert ex["evaluated"] == ex["space_size"] == 8
    phased = json.loads((out / "reports" / "phased.json").read_text())["problems"][0]
    r = json.loads((out / "reports" / "random-seed0.json").read_text())["problems"][0]
    assert r["evaluated"] == phased["evaluated"]     # random gets as many evaluations as phased used
    commands = (out / "commands.sh").read_text().splitlines()[1:]
    assert len(commands) == 3 and all(c.startswith("MESA_SHADER_CACHE_DISABLE=true") for c in commands)
    assert "--strategies exhaustive" in commands[-1] and "--random-budget" in commands[1]
    text = (out / "study.md").read_text()
    assert ["exhaustive", "16x16x16 float32", "exhaustive", "8", "8", "100%"] in [r[:6] for r in table_lines(text)]
    assert "python -m shadertune.report landscape" in text
    # mc is fixed: one line, no family to name
    assert "view np: GFLOP/s against np (k per pass), the other knobs at the best config" in text
    figures = sorted(f.name for f in out.glob("*.png"))
    assert figures == ["landscape-gl-16x16x16-mrt_h-mrt_w.png", "landscape-gl-16x16x16-np.png",
                       "trajectory.png"]
    # drawn again elsewhere from the reports alone
    p = study("--render", str(out), "--figures", str(tmp_path / "again"))
    assert p.returncode == 0, p.stderr[-2000:]
    assert sorted(f.name for f in (tmp_path / "again").glob("*.png")) == figures


def test_a_subspace_too_large_is_refused(gl, tmp_path):
    p = study("--backend", "gl", "--size", "64", "--max-space", "10", "--out", str(tmp_path / "s"))
    assert p.returncode == 1
    assert "narrow the subspace with --fix" in p.stderr and p.stderr.count("\n") == 1
    assert not (tmp_path / "s" / "reports").exists() or not any((tmp_path / "s" / "reports").iterdir())
