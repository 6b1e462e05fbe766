"""scripts/profile-cuda and scripts/accuracy-3xtf32 without a GPU: the config
choice, the ncu command lines, the parsing of ncu's raw csv (a synthetic one in
ncu's format), the summary, the scripts' argument handling and their message
when there is no GPU. The profile and the GPU comparison themselves run only on
the GPU machine."""
import json
import pathlib

import numpy as np
import pytest
from subproc import run_python
from script_module import load_script

from shadertune.backends.base import DeviceInfo
from shadertune.backends.cuda import CUDABackend, device
from shadertune.backends.cuda import profile as prof
from profile_configs import pick_config
from shadertune.core.config import Config
from shadertune.errors import InvalidConfig
from shadertune.core.problem import Problem

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROFILE = ROOT / "scripts" / "profile-cuda"
ACCURACY = ROOT / "scripts" / "accuracy-3xtf32"


# --- the config -----------------------------------------------------------------------------

def test_default_is_run_u_s_winner_where_valid_else_the_default():
    be, p = CUDABackend(), Problem(4096, 4096, 4096)
    cfg, how = pick_config(be, p)
    assert cfg == Config(prof.RUN_U_4096) and "run U" in how and not be.space(p).why_invalid(cfg)
    assert prof.describe(cfg) == "128x128x16 w64x128 3xTF32 wgmma ST4 KG1 KR0"
    small = Problem(32, 32, 32)
    cfg, how = pick_config(be, small)
    assert cfg == be.default_config(small) and "default" in how


def test_given_config_is_checked():
    be, p = CUDABackend(), Problem(4096, 4096, 4096)
    cfg, how = pick_config(be, p, config=json.dumps({**prof.RUN_U_4096, "ST": 3}))
    assert cfg["ST"] == 3 and "given" in how
    with pytest.raises(InvalidConfig, match="not valid"):
        pick_config(be, p, config={**prof.RUN_U_4096, "BM": 7})


class _Backend(CUDABackend):
    def device(self):
        return DeviceInfo(backend="cuda", vendor="NVIDIA", renderer="NVIDIA H200", driver="test")


def test_store_pick_is_the_fastest_3xtf32_result(tmp_path):
    from shadertune.db import Store
    from shadertune.core.result import Result
    be, p = _Backend(), Problem(4096, 4096, 4096)
    ffma = be.space(p).first({"MMA": 0, "KG": 1}, order=[])
    mma = be.space(p).first({"MMA": 3, "KG": 1}, order=[])
    wg = Config(prof.RUN_U_4096)
    rows = [(ffma, 1.0), (mma, 3.0), (wg, 2.0)]     # FFMA fastest, then wgmma, then mma.sync
    with Store(tmp_path / "s.sqlite") as s:
        for cfg, ms in rows:
            s.put(Result("cuda", be.device().key, p, cfg, "ok", times_ms=[ms], error=2e-7), be.template_hash())
    cfg, how = pick_config(be, p, store=str(tmp_path / "s.sqlite"))
    assert cfg == wg and "fastest 3xTF32" in how and "2.0000 ms" in how


# --- ncu command lines ----------------------------------------------------------------------------

def test_profile_command_profiles_one_launch_of_our_kernel():
    child = ["python", "scripts/profile-cuda", "--child", "--problem", "4096"]
    cmd = prof.profile_command("/opt/ncu", "out/profile", child)
    assert cmd[0] == "/opt/ncu" and cmd[-len(child):] == child
    text = " ".join(cmd)
    for part in ("--clock-control none", "--kernel-name st_gemm", "--launch-skip 1", "--launch-count 1",
                 "--export out/profile", "--section WarpStateStats", "--section MemoryWorkloadAnalysis"):
        assert part in text
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active" in metrics
    assert "lts__t_bytes.sum" in metrics and "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum" in metrics
    assert "--metrics" not in prof.profile_command("ncu", "r", child, metrics=())
    with pytest.raises(ValueError):
        prof.profile_command("ncu", "r", child, count=0)
    assert prof.import_command("ncu", "out/profile") == [
        "ncu", "--import", "out/profile.ncu-rep", "--page", "raw", "--csv", "--print-units", "base"]


def test_metrics_the_device_lacks_are_left_out():
    query = """Device NVIDIA H200 (GH100)
------------------------------------------------- ----------------------------------------
Metric Name                                       Metric Description
gpu__time_duration                                total duration in nanoseconds
lts__t_bytes                                      # of bytes requested
sm__pipe_tensor_op_gmma_cycles_active             # of cycles where tensor pipe was active (gmma)
"""
    kept, dropped = prof.available(["gpu__time_duration.sum", "lts__t_bytes.sum",
                                    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                                    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"],
                                   query)
    assert kept == ["gpu__time_duration.sum", "lts__t_bytes.sum",
                    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"]
    assert dropped == ["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]


# --- ncu's csv ----------------------------------------------------------------------------------

LAUNCH = '"0","4242","python3.11","127.0.0.1","st_gemm","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0"'
RAW = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
    '==PROF== Profiling "st_gemm" - 0: 0%....50%....100% - 38 passes',
    "==PROF== Disconnected from process 4242",
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","gpu__time_duration.sum","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",'
    '"sm__inst_issued.avg.pct_of_peak_sustained_active","lts__t_bytes.sum",'
    '"smsp__average_warp_latency_issue_stalled_barrier.ratio","smsp__average_warp_latency_issue_stalled_gmma.ratio",'
    '"smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",'
    '"launch__grid_size"',
    '"","","","","","","","","","","","nsecond","%","%","byte","","","","%",""',
    LAUNCH + ',"2,107,600","41.37","23.9","1,610,612,736","1.25","6.5","0.31","n/a","1,024"',
])


def test_raw_csv_is_parsed():
    (launch,) = prof.parse_raw_csv(RAW)
    assert launch["Kernel Name"] == "st_gemm" and launch["Grid Size"] == "(32, 32, 1)"
    m = launch["metrics"]
    assert m["gpu__time_duration.sum"] == (2107600.0, "nsecond")
    assert m["lts__t_bytes.sum"] == (1610612736.0, "byte")
    assert m["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"] == (None, "%")
    assert m["launch__grid_size"] == (1024.0, "")
    two = RAW + "\n" + LAUNCH.replace('"0"', '"1"', 1) + ',"1","2","3","4","5","6","7","8","9"'
    assert [x["ID"] for x in prof.parse_raw_csv(two)] == ["0", "1"]


@pytest.mark.parametrize("bad, why", [("==PROF== No kernels were profiled.\n", "no csv"),
                                       ('"a","b"\n"1","2"\n', "Kernel Name"),
                                       (RAW + '\n"1","2"', "fields")])
def test_bad_csv_is_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        prof.parse_raw_csv(bad)


def test_summary_table():
    (launch,) = prof.parse_raw_csv(RAW)
    rows = prof.summary_rows(launch, flops=2 * 4096 ** 3)
    d = {a: b for a, b, _ in rows}
    assert d["duration"] == "2.11 ms"
    assert d["throughput"] == "65.2 TFLOP/s"              # 137.4 GFLOP in 2.1076 ms: run U's number
    assert d["tensor pipe active, wgmma (gmma)"] == "41.37 %"
    assert d["tensor pipe active, mma.sync (hmma)"] == "n/a"
    assert d["L2 traffic (lts__t_bytes)"] == "1,611 MB"
    stall_rows = [a for a, _, _ in rows if a.startswith("stall: ")]
    assert stall_rows == ["stall: gmma", "stall: barrier", "stall: long_scoreboard"]     # largest first
    md = prof.summary_markdown(launch, ["# head"], flops=2 * 4096 ** 3)
    head, blank, header = md.splitlines()[:3]
    assert (head, blank) == ("# head", "") and "`lts__t_bytes.sum`" in md
    assert [c.strip() for c in header.strip("|").split("|")] == ["what", "value", "metric"]


# --- the scripts ------------------------------------------------------------------------------

def test_profile_cuda_dry_run_and_arguments():
    out = run_python(None, PROFILE, "--dry-run", "--ncu", "/x/ncu", timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# config: 128x128x16 w64x128 3xTF32 wgmma")
    assert lines[1] == "/x/ncu --query-metrics"
    assert "--launch-count 1" in lines[2] and "--child" in lines[2] and "--import" in lines[3]
    bad = run_python(None, PROFILE, "--config", "[1]", "--dry-run", timeout=60)
    assert bad.returncode == 2 and "JSON object" in bad.stderr
    mod = load_script("profile-cuda")
    with pytest.raises(SystemExit):
        mod.parse_args([])                                   # no --out
    with pytest.raises(SystemExit):
        mod.parse_args(["--out", "x", "--store", "/nonexistent/store.sqlite"])
    argv = mod.child_argv("4096", prof.RUN_U_4096)
    args = mod.parse_args(argv[2:])
    assert args.child and json.loads(args.config) == prof.RUN_U_4096


@pytest.mark.skipif(device.has_gpu(), reason="checks the message given without a GPU")
def test_scripts_say_so_without_a_gpu(tmp_path):
    out = run_python(None, PROFILE, "--out", tmp_path, timeout=60)
    assert out.returncode == 2 and "needs an NVIDIA GPU" in out.stderr
    out = run_python(None, ACCURACY, "--gpu", "--skip-cpu", timeout=60)
    assert out.returncode != 0 and "needs CuPy and an NVIDIA GPU" in out.stderr


def test_accuracy_cpu_study_small(tmp_path):
    mod = load_script("accuracy-3xtf32")
    assert mod.main(["--out", str(tmp_path), "--size", "4,4", "--K", "64", "--kappa-K", "64",
                     "--quick", "--merges", "1,4"]) == 0
    res = json.loads((tmp_path / "accuracy.json").read_text())
    rows = res["cpu"]
    assert [r["data"] for r in rows] == ["uniform", "wide", "ill", "ill", "ill"]
    for r in rows:
        for key, v in r["tc"].items():
            assert v["comp"] <= v["bound"], (r["data"], key)
        assert r["fma_chain"]["comp"] <= r["bound_sgemm"]
    kappas = [r["kappa"] for r in rows if r["data"] == "ill"]
    assert kappas == sorted(kappas) and kappas[-1] > 100 * kappas[0]
    md = (tmp_path / "accuracy.md").read_text()
    assert "3xTF32 merge 4 (hopper)" in md and "Bounds" in md


def test_gpu_kernel_list_covers_the_merge_intervals():
    mod = load_script("accuracy-3xtf32")
    from shadertune.backends.cuda import emulate as em
    p = Problem(4096, 4096, 4096)
    configs = mod.kernel_configs(CUDABackend(), p)
    assert configs[0][0].startswith("tuned: 128x128x16")
    merges = sorted({em.for_config(p, c)["merge"] for _, c in configs})
    assert merges == [1, 2, 4] and len(configs) == 4       # BK 16 is the tuned one; BK 64 is not in the space
    assert all(c["KG"] == 1 for _, c in configs[1:])


def test_bit_agreement_counts_ulps():
    mod = load_script("accuracy-3xtf32")
    x = np.array([1.0, -1.0, 0.0, 2.0], np.float32)
    y = x.copy()
    y[1] = np.nextafter(y[1], np.float32(-2))
    y[2] = -0.0
    assert mod.bit_agreement(x, y) == {"equal": 0.75, "max_ulps": 1}
