"""scripts/bench-reproduction on llvmpipe at a tiny size: the phased and the exhaustive search
over the same render-target subspace, each through the search command line on a fresh store,
their bests and the hand-written expert kernels re-timed in one run, the JSON and the table
(the paper's column beside ours).  The invariants are checked from the searches' own reports,
not taken from the script; no timing decides anything here.  Default-size and GPU runs are
the lead's (docs/reproduction.md)."""
import json
import pathlib
import sys

import pytest

from shadertune.db import Store
from shadertune.core.problem import Problem

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
import bench_reproduction as bench  # noqa: E402

SUBSPACE = {"family": "fragment", "out": "mrt", "lang": "glsl", "glsl": "330", "unroll": 4,
            "block_h": 0, "block_w": 0, "a_src": "texture", "b_src": "texture"}


def _report(out, strategy):
    return json.loads((out / "reports" / f"{strategy}.json").read_text())["problems"][0]


def test_quick_run_compares_phased_with_the_exhaustive_optimum_and_the_experts(gl, tmp_path):
    out = tmp_path / "r"
    assert bench.main([str(out), "--quick"], backend=gl) == 0
    doc = json.loads((out / "bench-reproduction.json").read_text())
    assert doc["problem"]["M"] == doc["problem"]["K"] == bench.QUICK_SIZE
    assert doc["device_key"] == gl.device().key
    ph, ex = _report(out, "phased"), _report(out, "exhaustive")
    # both searched the same subspace: the render-target path with the held knobs, nothing else
    for entry in (ph, ex):
        for r in entry["results"]:
            assert {k: r["config"][k] for k in SUBSPACE} == SUBSPACE
            assert r["config"]["fetch"] == "texture"          # --quick's narrowing
        assert entry["cached"] == 0 and entry["space_size"] == doc["subspace"]["size"]
    # exhaustive covered the subspace, each config once; phased used no more evaluations
    assert ex["evaluated"] == ex["space_size"] == len({json.dumps(r["config"], sort_keys=True)
                                                      for r in ex["results"]})
    assert ph["evaluated"] <= ex["evaluated"]
    # every best verified against float64 within float32's tolerance
    for entry in (ph, ex):
        assert entry["best"] is not None and entry["best"]["error"] <= 1e-5
    # phased's best, as exhaustive measured it, is no faster than exhaustive's best
    # (the same run's timings: the optimum is the fastest of them), or it is the same config
    mine = next(r for r in ex["results"] if r["config"] == ph["best"]["config"])
    assert ph["best"]["config"] == ex["best"]["config"] or (
        mine["status"] != "ok" or ex["best"]["median_ms"] <= mine["median_ms"])
    # the script's summary says what the reports say
    s = doc["searches"]
    assert (s["phased"]["evaluated"], s["exhaustive"]["evaluated"]) == (ph["evaluated"], ex["evaluated"])
    assert s["phased"]["best"]["config"] == ph["best"]["config"]
    assert doc["exhaustive_time"]["subspace_measured"] is True
    assert doc["exhaustive_time"]["subspace_seconds"] == s["exhaustive"]["search_seconds"] > 0
    assert doc["render_target_space"]["size"] > doc["subspace"]["size"]
    assert all(v is True for v in doc["checks"].values()), doc["checks"]
    # the kernels re-timed in one run: the bests verified again, the experts beside them
    rows = {r["kernel"]: r for r in doc["rows"]}
    tuned = rows["tuned (phased best)"]
    assert tuned["status"] == "ok" and tuned["config"] == ph["best"]["config"] and tuned["error_rows"] < 1e-5
    if doc["comparison"]["same_config"]:
        assert "exhaustive optimum" not in rows
    else:
        assert rows["exhaustive optimum"]["config"] == ex["best"]["config"]
        assert rows["exhaustive optimum"]["status"] == "ok"
    expert = rows["expert GLSL (hand-written 4x4 RGBA + 4 targets)"]
    assert expert["status"] == "ok" and expert["error_rows"] < 1e-5
    arb = rows["expert ARB assembly (the same algorithm)"]
    assert arb["status"] == ("ok" if "arbfp" in gl.device().limits.get("asm_limits", {}) else "skipped")
    assert all(len(r["times_ms"]) >= bench.ROUNDS for r in doc["rows"] if r["status"] == "ok")
    assert doc["comparison"]["tuned_vs_expert_glsl"] == pytest.approx(tuned["gflops"] / expert["gflops"])
    # the table: the paper's column beside ours, with the commands that made it
    md = (out / "bench-reproduction.md").read_text()
    for text in ("53 days in theory", "4 hours in practice", "no significant performance loss",
                 "8% and 15%", doc["command"], "python -m shadertune.search", "--strategy exhaustive"):
        assert text in md
    assert doc["command"].startswith(f"scripts/bench-reproduction OUT --size {bench.QUICK_SIZE}")
    # every result is in each search's own store
    with Store(out / "stores" / "exhaustive.sqlite") as st:
        stored = st.ranked("gl", gl.device().key, Problem(16, 16, 16), gl.template_hash())
    assert len(stored) == ex["evaluated"]


def test_a_capped_exhaustive_search_is_projected_not_claimed(gl, tmp_path):
    # the GPU command's flags at a tiny size (--size, --fix, --repeats, --exhaustive-seconds), and
    # a search cut by its caps
    out = tmp_path / "c"
    args = ["--quick", "--size", "16", "--fix", "fetch=texelFetch", "--repeats", "1",
            "--exhaustive-seconds", "60", "--exhaustive-budget", "2", "--phased-budget", "2"]
    assert bench.main([str(out), *args], backend=gl) == 0
    doc = json.loads((out / "bench-reproduction.json").read_text())
    ex = _report(out, "exhaustive")
    assert ex["evaluated"] == 2 < ex["space_size"]
    assert {r["config"]["fetch"] for r in ex["results"]} == {"texelFetch"}
    assert _report(out, "phased")["evaluated"] <= 2
    t = doc["exhaustive_time"]
    assert t["subspace_measured"] is False
    assert t["subspace_seconds"] == pytest.approx(t["seconds_per_evaluation"] * ex["space_size"])
    for k in ("exhaustive_complete", "phased_evaluations_within_exhaustive",
              "exhaustive_best_at_least_phased_best"):
        assert doc["checks"][k] is None           # no claim against a search that did not finish
    assert doc["comparison"]["time_ratio_exhaustive_to_phased"] is None
    md = (out / "bench-reproduction.md").read_text()
    assert "**projected**" in md and "cut after 2 of" in md
    assert "--exhaustive-budget 2" in doc["command"] and "--fix fetch=texelFetch" in doc["command"]


@pytest.mark.parametrize("args, msg", [
    (["--fix", "family=compute"], "Jiang's render-target kernel"),
    (["--fix", "out=image"], "Jiang's render-target kernel"),
    (["--fix", "unroll"], "--fix takes KNOB=VALUE"),
    (["--size", "0"], "must be at least 1"),
    (["--exhaustive-seconds", "-1"], "must be at least 0"),
])
def test_bad_arguments_stop_before_anything_runs(tmp_path, capsys, args, msg):
    with pytest.raises(SystemExit) as e:
        bench.main([str(tmp_path / "never"), *args])
    assert e.value.code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("args, msg", [
    (["--fix", "np=3"], "--fix np: 3 is not in its domain"),
    (["--fix", "colour=red"], "--fix names unknown knob 'colour'"),
    (["--size", "64", "--max-space", "10"], "--max-space 10"),
])
def test_a_subspace_that_cannot_run_stops_before_any_store(gl, tmp_path, args, msg):
    with pytest.raises(SystemExit) as e:
        bench.main([str(tmp_path / "never"), "--quick", *args], backend=gl)
    assert msg in str(e.value)
    assert not (tmp_path / "never" / "stores").exists()


def test_a_folder_holding_a_run_is_refused(tmp_path, capsys):
    (tmp_path / "old" / "stores").mkdir(parents=True)
    (tmp_path / "old" / "stores" / "phased.sqlite").write_bytes(b"")
    with pytest.raises(SystemExit) as e:
        bench.main([str(tmp_path / "old"), "--quick"])
    assert e.value.code == 2 and "fresh store" in capsys.readouterr().err
