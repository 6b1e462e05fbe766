"""scripts/bench-gl-compute's stages of issue 39 (sweep, knobs, skinny, sass, coopmat,
tune) run to completion at a small size on llvmpipe, within --budget, a stage stopped
at its own limit and the outputs written after every stage.  The timings mean nothing
here; what the rows hold is checked."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_bench_stages_run_within_the_budget(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "bench-gl-compute"), str(out),
           "sweep", "knobs", "skinny", "sass", "coopmat", "tune",
           "--knob-sizes", "32", "--sass-size", "32", "--skinny", "32x40x16", "--seconds", "2",
           "--sizes", "32", "--phased-size", "32", "--phased-seconds", "2", "--model-seconds", "2",
           "--stage-seconds", "sweep=2", "--budget", "150"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((out / "bench-gl-compute.json").read_text())
    assert [s["stage"] for s in doc["stages"]] == ["sweep", "knobs", "skinny", "sass", "coopmat", "tune"]
    rows = doc["rows"]
    assert any(r["stage"] == "sweep" and "timed_out" in r for r in rows)        # stopped at 2 s
    base = next(r for r in rows if r["stage"] == "knobs" and r["move"] == "base" and r["base"] == "default")
    assert base["verified"] and base["gflops"] > 0
    moved = {r["move"]: r for r in rows if r["stage"] == "knobs" and r["base"] == "default"}
    assert moved["clamp"]["verified"] and "subgroup" in moved["shuffle"]["invalid"]
    skinny = next(r for r in rows if r["stage"] == "skinny")
    assert skinny["verified"] and skinny["bound_ms"] > 0 and skinny["write_c_fresh_gbs"] > 0
    assert next(r for r in rows if r["stage"] == "coopmat")["verdict"]
    tune = [r for r in rows if r["stage"] == "tune"]
    assert len(tune) == 2 and tune[0]["phases"][0]["label"].endswith("ks")
    for name in ("bench-gl-compute.md", "reports.tgz", "sass.txt", "coopmat.txt"):
        assert (out / name).stat().st_size > 0
