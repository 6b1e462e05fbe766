"""Nsight Compute on cuBLAS's own kernel for one GEMM (through CuPy), beside
scripts/profile-cuda's page of ours: the same sections, one launch after two
warm-ups.

    python3 tools/ncu_cublas.py --out DIR --problem 1536 [--dtype float64]

Writes DIR/cublas.csv (ncu --csv --page details) and prints the kernel's name and
the rows of its SpeedOfLight, Occupancy, LaunchStats and SchedulerStats sections.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "Occupancy",
            "LaunchStats", "SchedulerStats", "WarpStateStats", "InstructionStats")

CHILD = """
import cupy as cp, sys
m, n, k = map(int, sys.argv[1:4]); dt = sys.argv[4]
a = cp.random.uniform(-1, 1, (m, k)).astype(dt); b = cp.random.uniform(-1, 1, (k, n)).astype(dt)
c = cp.empty((m, n), dt)
for _ in range(3):
    cp.matmul(a, b, out=c)
cp.cuda.runtime.deviceSynchronize()
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--problem", default="1536", help="N or M,N,K")
    ap.add_argument("--dtype", default="float64")
    a = ap.parse_args(argv)
    dims = [int(x) for x in a.problem.split(",")]
    m, n, k = dims * 3 if len(dims) == 1 else dims
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    os.makedirs(a.out, exist_ok=True)
    # the GEMM's own kernel (the operands' random fill launches kernels too)
    cmd = [ncu, "--csv", "--page", "details", "--kernel-name", "regex:(gemm|Gemm|GEMM|sm90|sm80|cutlass)",
           "--launch-skip", "2", "--launch-count", "1",
           "--clock-control", "none"]
    for s in SECTIONS:
        cmd += ["--section", s]
    cmd += [sys.executable, "-c", CHILD, str(m), str(n), str(k), a.dtype]
    r = subprocess.run(cmd, capture_output=True, text=True)
    path = os.path.join(a.out, "cublas.csv")
    with open(path, "w") as f:
        f.write(r.stdout)
    sys.stdout.write(r.stdout[-12000:])
    if r.returncode:
        sys.stderr.write(r.stderr[-3000:])
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
