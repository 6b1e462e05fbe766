"""scripts/bench-host-overhead runs to completion on both CuPy stand-ins, with
--profile and --json (its times are not judged here)."""
import json
import os

from subproc import ROOT, run_python


def test_both_stand_ins_run_every_step(tmp_path):
    for stand_in in ("light", "fake"):
        out = tmp_path / f"{stand_in}.json"
        p = run_python(None, os.path.join(ROOT, "scripts", "bench-host-overhead"), "--stand-in", stand_in,
                       "--calls", "20", "--rounds", "3", "--json", out, "--profile", "lane_auto_store",
                       timeout=300)
        assert p.returncode == 0, p.stderr
        doc = json.loads(out.read_text())
        us = doc["us_per_call"]
        assert doc["stand_in"] == stand_in and "function calls" in doc["profile"]
        assert set(us) >= {"lane_default", "lane_out", "lane_ab", "lane_knobs", "lane_auto_path", "lane_auto_store",
                           "lane_auto_default", "lane_dlpack", "regular_default", "steady_launch"}
        assert all(v > 0 for v in us.values())
