"""scripts/bench-gl-lang on llvmpipe at tiny sizes: every language the context runs tuned
through the search core on its render-target subspace (results in the store), the
bests, the hand-written baselines and GLSL's best in a core-profile context re-timed in
one run, a language the driver lacks listed with its reason, argument errors before
anything runs.  The GPU run is the lead's (docs/reproduction.md)."""
import json

import pytest
from md_table import table_lines
from script_module import load_script

from shadertune.db import Store
from shadertune.core.problem import Problem


@pytest.fixture(scope="module")
def bench():
    return load_script("bench-gl-lang")


def test_one_run_tunes_each_language_and_times_the_baselines_beside(gl, bench, tmp_path, capsys):
    if "arbfp" not in gl.device().limits.get("asm_limits", {}):
        pytest.skip("this context runs no ARB_fragment_program")
    out = tmp_path / "b"
    assert bench.main([str(out), "--sizes", "16", "--seconds", "1", "--repeats", "2"]) == 0
    doc = json.loads((out / "bench-gl-lang.json").read_text())
    rows = {r["kernel"]: r for r in doc["rows"]}
    for kernel in ("tuned glsl", "tuned arbfp", "hand-written glsl (expert 4x4 + 4 targets)",
                   "hand-written arbfp (expert 4x4 + 4 targets)", "tuned glsl, core-profile context"):
        assert rows[kernel]["status"] == "ok" and rows[kernel]["gflops"] > 0, rows[kernel]
        assert rows[kernel]["error_rows"] < 1e-5
    # each language searched its own subspace: the knobs it holds, nothing else
    searches = {s["lang"]: s for s in doc["searches"]}
    assert {r["config"]["lang"] for r in searches["arbfp"]["results"]} == {"arbfp"}
    assert {r["config"]["unroll"] for r in searches["arbfp"]["results"]} == {"full"}
    assert {(r["config"]["out"], r["config"]["glsl"]) for r in searches["glsl"]["results"]} == {("mrt", "330")}
    assert rows["tuned arbfp"]["config"] == searches["arbfp"]["best_config"]
    assert all(len(r["times_ms"]) >= 2 for r in doc["rows"] if r["status"] == "ok")   # interleaved rounds
    same = rows.get("tuned glsl's knobs in arbfp")        # absent where the bests already agree
    if same is not None:
        g = searches["glsl"]["best_config"]
        assert same["status"] == "ok" and same["config"]["lang"] == "arbfp"
        knobs = ("mc", "mrt_h", "mrt_w", "np")
        assert [same["config"][k] for k in knobs] == [g[k] for k in knobs]
    if "nvfp" not in gl.device().limits["asm_limits"]:
        assert "runs no nvfp" in doc["skipped_langs"]["nvfp"]
    md = (out / "bench-gl-lang.md").read_text()
    assert ["16", "tuned arbfp"] in [r[:2] for r in table_lines(md)] and "x tuned GLSL" in md
    with Store(out / "tune.sqlite") as s:
        stored = s.ranked("gl", gl.device().key, Problem(16, 16, 16), gl.template_hash())
    assert {r.config["lang"] for r in stored} >= {"glsl", "arbfp"}


@pytest.mark.parametrize("args, msg", [
    (["--langs", "cg"], "--langs takes"),
    (["--sizes", "16,x"], "--sizes takes integers"),
    (["--seconds", "0"], "positive"),
])
def test_bad_arguments_stop_before_anything_runs(bench, tmp_path, capsys, args, msg):
    with pytest.raises(SystemExit) as e:
        bench.main([str(tmp_path / "never"), *args])
    assert e.value.code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "never").exists()
