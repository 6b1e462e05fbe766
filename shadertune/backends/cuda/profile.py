"""Which 3xTF32 kernel to study, and Nsight Compute around it: what
scripts/profile-cuda and scripts/accuracy-3xtf32 share, kept here so that the
parts that need no GPU (the 3xTF32 kernels, run U's winner, the ncu command
lines, the csv parsing, the summary) are tested without one
(tests/test_cuda_profile.py).  The pick from a store (which reads `auto`'s
selection, a layer above the backends) is shadertune/profile_configs.py.

ncu's csv (`ncu --import REPORT --page raw --csv --print-units base`): one
header row of metric names (after the launch columns "ID", "Process ID",
"Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
"Grid Size", "Device", "CC"), one row of units, then one row per profiled
launch; numbers may carry thousands separators ("1,234.5"), a metric the device
lacks reads "n/a"; ncu's own lines ("==PROF== ...", "==WARNING== ...") may come
first.
"""
from __future__ import annotations

import csv
import io
import re
import shlex

# Run U's winner at 4096^3 NN (BENCHMARKS.md, run U; notes/cuda.md): the wgmma
# kernel, 128 x 128 x 16 tiles, two warpgroups of 64 x 128, 4 stages, no split-K.
RUN_U_4096 = {"BM": 128, "BN": 128, "BK": 16, "TM": 4, "TN": 4, "WM": 64, "WN": 128, "trans": 1,
              "VEC": 4, "PAD": 4, "DB": 1, "ST": 4, "KG": 1, "KL": 1, "KR": 0, "MMA": 4, "AR": 0}
KERNEL_NAME = "st_gemm"        # codegen.KERNEL: the GEMM's entry point (K_G's reduce is st_gemm_reduce)
TF32X3 = (3, 4)                # MMA values of the 3xTF32 kernels: mma.sync, wgmma


def is_3xtf32(config) -> bool:
    return config.get("MMA", 0) in TF32X3


def describe(config) -> str:
    """A config in the benchmarks' short form: 128x128x16 w64x128 3xTF32 wgmma ST4 KG1 KR0 (AR1, PS2)."""
    c = config
    kind = {0: "FFMA", 3: "3xTF32 mma.sync", 4: "3xTF32 wgmma"}.get(c.get("MMA", 0), f"MMA{c.get('MMA')}")
    return (f"{c['BM']}x{c['BN']}x{c['BK']} w{c['WM']}x{c['WN']} {kind} ST{c['ST']} "
            f"KG{c['KG']} KR{c['KR']}" + operand_path(c))


def operand_path(c) -> str:
    """The wgmma kernel's operand knobs where set: ' AR1' (A from registers), ' PS2' (pre-split)."""
    return "".join(f" {k}{c[k]}" for k in ("AR", "PS") if c.get(k, 0))


# --- Nsight Compute --------------------------------------------------------------------------

# Sections (stable identifiers since Nsight Compute 2019.x; `ncu --list-sections`).
SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "SchedulerStats",
            "WarpStateStats", "Occupancy", "LaunchStats", "InstructionStats")
# Metrics asked for by name, beyond the sections' (Hopper names; checked against
# `ncu --query-metrics` on the device before use: a name it lacks is left out
# and listed, never passed, since ncu refuses a whole run for one unknown name).
METRICS = (
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    # tensor pipe: wgmma (gmma), mma.sync (hmma), both
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    # FP64 tensor pipe (DMMA: mma.sync .f64)
    "sm__pipe_tensor_op_dmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_dmma.sum",
    "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
    # issue
    "sm__inst_executed.avg.per_cycle_active",
    "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "smsp__warps_active.avg.per_cycle_active",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    # shared memory (LSU path: cp.async stores land elsewhere; wgmma's operand reads are not LSU)
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    # L2 and DRAM
    "lts__t_bytes.sum",
    "lts__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
)
# Stall reasons as WarpStateStats collects them: warp cycles per issued instruction
# spent stalled for each reason (the first form; the second where only it is there).
STALLS = (re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+)\.ratio$"),
          re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$"))
LAUNCH_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                  "Block Size", "Grid Size", "Device", "CC")


def profile_command(ncu: str, report: str, child: list[str], metrics=METRICS, sections=SECTIONS,
                    kernel: str = KERNEL_NAME, skip: int = 1, count: int = 1) -> list[str]:
    """The ncu command that profiles one launch of `kernel` in the process `child`
    (an argv): launches are counted per kernel name, so `skip` warm-up launches
    of it pass unprofiled and then `count` are profiled; clocks as the
    application leaves them (--clock-control none: the benchmarks' clocks, not
    ncu's base clock); the report goes to `report` (.ncu-rep added by ncu)."""
    if skip < 0 or count < 1:
        raise ValueError(f"need skip >= 0 and count >= 1, got {skip}, {count}")
    cmd = [ncu, "--clock-control", "none", "--kernel-name", kernel, "--launch-skip", str(skip),
           "--launch-count", str(count), "--replay-mode", "kernel", "--force-overwrite",
           "--export", report]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + list(child)


def import_command(ncu: str, report: str) -> list[str]:
    """The ncu command that prints `report`'s raw page as csv, in base units
    (bytes, nanoseconds, not ncu's scaled Kbyte / usecond)."""
    path = report if report.endswith(".ncu-rep") else report + ".ncu-rep"
    return [ncu, "--import", path, "--page", "raw", "--csv", "--print-units", "base"]


def query_command(ncu: str) -> list[str]:
    """Lists the device's metric base names (`ncu --query-metrics`)."""
    return [ncu, "--query-metrics"]


def available(metrics, query_output: str) -> tuple[list[str], list[str]]:
    """(kept, dropped): the metrics whose base name (the part before the first
    '.') `ncu --query-metrics` lists (a first column of lowercase names)."""
    names = set(re.findall(r"^\s*([a-z0-9]+__[a-z0-9_]+)", query_output, re.M))
    kept = [m for m in metrics if m.split(".")[0] in names]
    return kept, [m for m in metrics if m not in kept]


def _number(text: str):
    t = text.strip().replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None if t in ("", "n/a") else text.strip()


def parse_raw_csv(text: str) -> list[dict]:
    """ncu's raw-page csv -> one dict per profiled launch: the launch columns as
    text ('Kernel Name', 'Grid Size', ...), 'metrics': {name: (value, unit)}
    with value a float, None for n/a or empty, or the text where not a number."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]   # drops ==PROF== and blank lines
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        raise ValueError("no csv in ncu's output (no profiled launch? check --kernel-name)")
    head = rows[0]
    if "Kernel Name" not in head:
        raise ValueError(f"not ncu's raw csv: no 'Kernel Name' column in {head[:6]}")
    units = rows[1] if len(rows) > 1 and not rows[1][0].strip() else None
    launches = []
    for row in rows[2 if units else 1:]:
        if len(row) != len(head):
            raise ValueError(f"a row has {len(row)} fields, the header {len(head)}")
        d = {"metrics": {}}
        for i, (name, val) in enumerate(zip(head, row)):
            if name in LAUNCH_COLUMNS:
                d[name] = val
            else:
                d["metrics"][name] = (_number(val), units[i] if units else "")
        launches.append(d)
    return launches


def stalls(metrics: dict) -> list[tuple[str, float]]:
    """Stall reasons, (reason, warp cycles per issued instruction, metric), largest first."""
    for pattern in STALLS:
        out = [(m.group(1), v, k) for k, (v, _) in metrics.items()
               if (m := pattern.match(k)) and isinstance(v, float)]
        if out:
            return sorted(out, key=lambda t: -t[1])
    return []


# Summary rows: (label, metric, scale, unit shown); scale applied to the base-unit value.
SUMMARY = (
    ("duration", "gpu__time_duration.sum", 1e-6, "ms"),
    ("SM clock", "sm__cycles_elapsed.avg.per_second", 1e-9, "GHz"),
    ("tensor pipe active, wgmma (gmma)", "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
     1, "%"),
    ("tensor pipe active, mma.sync (hmma)",
     "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", 1, "%"),
    ("tensor pipe active, all", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 1, "%"),
    ("wgmma instructions", "sm__inst_executed_pipe_tensor_op_gmma.sum", 1, ""),
    ("mma.sync instructions", "sm__inst_executed_pipe_tensor_op_hmma.sum", 1, ""),
    ("tensor pipe active, FP64 (dmma)",
     "sm__pipe_tensor_op_dmma_cycles_active.avg.pct_of_peak_sustained_active", 1, "%"),
    ("DMMA instructions", "sm__inst_executed_pipe_tensor_op_dmma.sum", 1, ""),
    ("FP64 pipe active", "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active", 1, "%"),
    ("IPC (per SM, active cycles)", "sm__inst_executed.avg.per_cycle_active", 1, ""),
    ("issue slots busy", "sm__inst_issued.avg.pct_of_peak_sustained_active", 1, "%"),
    ("issue active (per scheduler)", "smsp__issue_active.avg.pct_of_peak_sustained_active", 1, "%"),
    ("warps active per scheduler", "smsp__warps_active.avg.per_cycle_active", 1, ""),
    ("warp cycles per issued instruction", "smsp__average_warp_latency_per_inst_issued.ratio", 1, ""),
    ("shared-memory wavefronts (LSU), all", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", 1, ""),
    ("shared-memory wavefronts, loads", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 1, ""),
    ("shared-memory wavefronts, stores", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", 1, ""),
    ("shared-memory bank conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", 1, ""),
    ("L2 traffic (lts__t_bytes)", "lts__t_bytes.sum", 1e-6, "MB"),
    ("L2 hit rate", "lts__t_sector_hit_rate.pct", 1, "%"),
    ("DRAM read", "dram__bytes_read.sum", 1e-6, "MB"),
    ("DRAM write", "dram__bytes_write.sum", 1e-6, "MB"),
)


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    if v == 0 or 0.01 <= abs(v) < 1e6:
        return f"{v:,.2f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:,.0f}"
    return f"{v:.3e}"


def summary_rows(launch: dict, flops: float | None = None) -> list[tuple[str, str, str]]:
    """(label, value, metric) rows of one launch: SUMMARY's metrics present in
    it, TFLOP/s from the duration when `flops` is given, then the stall reasons."""
    m = launch["metrics"]
    out = []
    for label, name, scale, unit in SUMMARY:
        if name not in m:
            continue
        v = m[name][0]
        v = v * scale if isinstance(v, float) else v
        out.append((label, f"{_fmt(v)} {unit}".strip() if v is not None else "n/a", name))
        if name == "gpu__time_duration.sum" and flops and isinstance(v, float) and v > 0:
            out.append(("throughput", f"{flops / (v * 1e-3) / 1e12:.1f} TFLOP/s", "2 M N K / duration"))
    for reason, v, name in stalls(m):
        out.append((f"stall: {reason}", f"{_fmt(v)} cycles/inst", name))
    return out


def summary_markdown(launch: dict, head: list[str], flops: float | None = None) -> str:
    """The summary table of one launch, `head` lines first."""
    from ...core.texttable import text_table
    table = text_table(["what", "value", "metric"],
                       [(a, b, f"`{c}`") for a, b, c in summary_rows(launch, flops)], "lrl")
    return "\n".join([*head, "", table]) + "\n"


def shell(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)
