"""scripts/bench-workers: its arithmetic on made-up runs, and one whole call on llvmpipe
(two workers on one software renderer: the numbers mean nothing here, the call must
run to completion and write its table; the CUDA half says why it cannot run without
CuPy).  The GPU runs are the lead's (notes/cluster.md)."""
import json

import pytest
from script_module import load_script

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def bench():
    return load_script("bench-workers")


def run(per_worker, seconds, problems, evaluations=10, round_trip=5.0, task=4.0,
        startup=3.0, opened=1.0):
    return {"workers": len(per_worker), "per_worker": per_worker, "seconds": seconds,
            "startup_s": startup, "open_s": opened, "coordinator_cpu_s": 0.2,
            "timings": {"evaluations": evaluations, "round_trip_s": round_trip, "task_s": task,
                        "compile_s": 0.0, "busy_s": {}},
            "problems": problems}


def problem(key, best, best_ms, times):
    return {"problem": key, "best_config": best, "best_ms": best_ms, "times": times}


def test_spread_overhead_and_the_serial_share(bench):
    assert bench.serial_share({1: 6, 8: 3}) == pytest.approx(6 / 30)
    assert bench.serial_share({}) is None
    # 6 single steps and three batches of 8: 6 + 3 x 2 rounds on 4 workers for 30 configs
    assert bench.steps_allow({1: 6, "8": 3}, 4) == pytest.approx(30 / 12)
    assert bench.steps_allow({1: 6, 8: 3}, 1) == 1.0
    assert bench.spread({"gpu0": 10}) is None
    assert bench.spread({"gpu0": 20, "gpu1": 17}) == pytest.approx(0.15)
    o = bench.overhead(run({"gpu0": 10}, 40.0, []))
    # start-up 3 s less the backend's 1 s opening; 100 ms of each 500 ms round trip
    assert o["startup_s"] == 2.0 and o["dispatch_ms"] == 100.0 and o["task_s"] == 0.4
    assert o["fraction_60s"] == pytest.approx(2 / 60 + (1 - 2 / 60) * 0.1 / 0.5, abs=1e-4)
    # a run that recorded its workers' idle time between evaluations: the fraction is that
    # (with evaluations queued, the round trip overlaps the GPU), 20 ms of each 420 ms here
    r = run({"gpu0": 10}, 40.0, [])
    r["timings"]["idle_s"] = 0.2
    o = bench.overhead(r)
    assert o["dispatch_ms"] == 100.0 and o["idle_ms"] == 20.0
    assert o["fraction_60s"] == pytest.approx(2 / 60 + (1 - 2 / 60) * 0.02 / 0.42, abs=1e-4)


def test_bests_agree_by_config_by_time_or_by_their_times_in_the_other_run(bench):
    a, b, c = {"np": 1}, {"np": 2}, {"np": 3}
    key = bench._key
    one = run({"gpu0": 1}, 1.0, [problem("p1", a, 1.00, {key(a): 1.00}),
                                  problem("p2", a, 1.00, {key(a): 1.00, key(b): 1.01}),
                                  problem("p3", a, 1.00, {key(a): 1.00, key(c): 1.30}),
                                  problem("p4", a, 1.00, {key(a): 1.00})])
    two = run({"gpu0": 1, "gpu1": 1}, 1.0, [problem("p1", a, 1.02, {key(a): 1.02}),
                                             problem("p2", b, 0.90, {key(b): 0.90}),
                                             problem("p3", c, 0.80, {key(c): 0.80, key(a): 1.0}),
                                             problem("p4", b, 0.80, {key(b): 0.80})])
    got = [g["verdict"] for g in bench.agreement(one, two, 0.03)]
    assert got[0] == "same config"
    assert got[1].startswith("within noise (0.900x; its best took 1.010x in the 1-worker run")
    assert got[2].startswith("differ (0.800x; its best took 1.300x in the 1-worker run; "
                             "the 1-worker best took 1.250x here")
    assert got[3] == "differ (0.800x; not measured in the other run)"


def test_the_plan_runs_the_baseline_first_and_cuda_warm_after_a_cold_run(bench):
    both = ("table", "one search")
    # GL: the table and the one search on clusters of their own (programs live in a worker)
    assert bench.plan("gl", [1, 2], "warm") == [("-", 1, ("table",)), ("-", 1, ("one search",)),
                                                ("-", 2, ("table",)), ("-", 2, ("one search",))]
    assert bench.plan("cuda", [1, 2], "warm") == [("cold", 1, ("table",)), ("warm", 1, both),
                                                  ("warm", 2, both)]
    assert bench.plan("cuda", [1, 2], "cold") == [("cold", 1, both), ("cold", 2, both)]
    (t, table, b1), (o, one, b2) = bench.jobs_of(both, ["p", "q"], 5)
    assert (t, table, b1.max_evals, o, one, b2.max_evals) == ("table", ["p", "q"], 5,
                                                              "one search", ["p"], 10)
    assert not (b1.to_spend or b2.to_spend)   # a converging search stops (its cache is warm)


def test_one_call_runs_both_backends_and_writes_the_table(bench, gl_backend, tmp_path, capsys):
    out = tmp_path / "b"
    assert bench.main([str(out), "--gpus", "0,0", "--quick", "--minutes", "3",
                       "--gl-problems", "24:NN,24:TN", "--gl-budget", "4"]) == 0
    doc = json.loads((out / "bench-workers.json").read_text())
    gl = doc["backends"]["gl"]["runs"]
    assert [(r["workers"], r["kind"]) for r in gl] == [(1, "table"), (1, "one search"),
                                                       (2, "table"), (2, "one search")]
    assert not any("error" in r for r in gl)
    for r in gl:
        assert r["measured"] == 8 == sum(r["per_worker"].values())
        assert r["overhead"]["startup_s"] >= 0 and r["overhead"]["dispatch_ms"] >= 0
        assert 0 < r["overhead"]["fraction_60s"] < 1 and r["overhead"]["idle_ms"] >= 0
        # the workers' build stage an evaluation, from the problems' stage seconds
        assert 0 < r["overhead"]["build_ms"] <= 1e3 * r["overhead"]["task_s"] * 1.5
    assert gl[0]["startup_s"] > 0 and gl[1]["startup_s"] > 0       # a cluster each (plan)
    assert set(gl[2]["per_worker"]) == {"gpu0-0", "gpu0-1"} and gl[2]["speedup"] > 0
    assert [a["problem"] for a in gl[2]["agreement"]] == ["24x24x24:float32:NN",
                                                          "24x24x24:float32:TN"]
    assert [a["problem"] for a in gl[3]["agreement"]] == ["24x24x24:float32:NN"]
    table = (out / "bench-workers.md").read_text()
    assert "| gl | table | - | 2 | 8 |" in table and "| gl | one search | - | 2 | 8 |" in table
    assert all(0 <= r["serial_share"] <= 1 for r in gl)
    assert "of a 60 s search" in table
    cuda = doc["backends"]["cuda"]["runs"]
    try:
        import cupy  # noqa: F401
    except ImportError:
        # no CuPy here: one run says why, the rest are not tried
        assert len(cuda) == 1 and "no worker could open backend 'cuda'" in cuda[0]["error"]
