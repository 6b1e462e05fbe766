#!/usr/bin/env python3
"""ptxas's register count of DMMA kernels against the space's estimate.

    python scripts/calibrate-dmma-regs [--configs 48] [--jobs 2] [--plain] [--out FILE.json]

No device: nvcc (sm_90) compiles a sample of the float64 tensor-core configs
of the space (4096^3 in all four layouts, and a ragged problem with VEC = 1)
with each mma shape the rules pick from (m16n8k8, k4; pipelined main loop)
forced, --plain also the plain loop's (k16, k8, k4), and prints per variant
the estimate dmma.regs_estimate gives, ptxas's count and spills, and where
dmma.REGS misjudges at the cap (a kernel admitted that spilled, or refused
that did not). Re-run it after any change to gemm_dmma.cu or what it
includes, and set REGS in shadertune/backends/cuda/dmma.py from it. The
device's NVRTC allocated 0-16 registers more than this nvcc on the probe's
tiles (notes/cuda.md): keep a margin near the cap.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from shadertune.backends.cuda import codegen, dmma  # noqa: E402
from shadertune.backends.cuda.device import DEFAULT_LIMITS  # noqa: E402
from shadertune.backends.cuda.space import derive, make_space  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

PIPELINED = ((8, True), (4, True))
PLAIN = ((16, False), (8, False), (4, False))


def sample(n: int, seed: int = 7):
    """(problem, config) pairs: every DMMA tile shape of the space at 4096^3
    NN with 2+ warps of 32 x 32 or more (those near the register cap, where
    the estimate decides), then n distinct others from all four layouts and
    a ragged problem with VEC = 1."""
    rng = random.Random(seed)
    problems = [Problem(4096, 4096, 4096, "float64", ta, tb) for ta in (False, True) for tb in (False, True)]
    problems.append(Problem(301, 203, 517, "float64"))
    out, seen = [], set()

    def add(p, c):
        shape = (c["BM"], c["BN"], c["BK"], c["WM"], c["WN"], c["VEC"], c["ST"], p.trans_a, p.trans_b)
        if shape not in seen:
            seen.add(shape)
            out.append((p, c))

    spaces = {p: [c for c in make_space(p, DEFAULT_LIMITS) if c.get("MMA") == dmma.MMA and c["KG"] == 1] for p in problems}
    for c in spaces[problems[0]]:
        if c["WM"] * c["WN"] >= 1024 and c["ST"] == 3 and c["VEC"] == 2:
            add(problems[0], c)
    big = len(out)
    for i, p in enumerate(problems):
        cands = spaces[p]
        rng.shuffle(cands)
        for c in cands:
            if len(out) >= big + n * (i + 1) // len(problems):
                break
            add(p, c)
    return out


def compile_regs(src: str, tmp: str, name: str):
    cu = os.path.join(tmp, name + ".cu")
    with open(cu, "w") as f:
        f.write(src)
    r = subprocess.run(["nvcc", "-gencode=arch=compute_90,code=sm_90", "-cubin", "-Xptxas", "-v",
                        "-o", os.path.join(tmp, name + ".cubin"), cu], capture_output=True, text=True)
    log = r.stdout + r.stderr
    if r.returncode:
        return None, None, log[-400:]
    regs = max(int(x) for x in re.findall(r"Used (\d+) registers", log))
    spill = sum(int(a) + int(b) for a, b in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log))
    return regs, spill, ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", type=int, default=48)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--plain", action="store_true", help="also the plain main loop's shapes")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    variants = PIPELINED + (PLAIN if args.plain else ())
    if shutil.which("nvcc") is None:
        sys.exit("calibrate-dmma-regs: nvcc is not on PATH")
    jobs, saved = [], (dmma.MMA_KS, dmma.FRAG_PIPE)
    try:
        for i, (p, c) in enumerate(sample(args.configs)):
            d = derive(p, c)
            for k, pipe in variants:
                dmma.MMA_KS, dmma.FRAG_PIPE = (k,), pipe
                if pipe and not dmma.pipelined(c["BK"], k, c["WM"], c["WN"]):
                    continue    # renders the plain loop: --plain's variant is that kernel
                jobs.append({"i": i, "problem": p.key, "config": c.key, "mma_k": k, "pipe": pipe,
                             "threads": d.threads, "WM": c["WM"], "WN": c["WN"], "ST": c["ST"],
                             "copies": d.loads_a + d.loads_b,
                             "estimate": dmma.regs_estimate(c["WM"], c["WN"], k, d.loads_a + d.loads_b, pipe),
                             "cap": dmma.reg_cap(d.threads), "src": codegen.source(p, c)})
    finally:
        dmma.MMA_KS, dmma.FRAG_PIPE = saved
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as ex:
        for job, (regs, spill, err) in zip(jobs, ex.map(lambda j: compile_regs(j["src"], tmp, f"k{j['i']}_{j['mma_k']}_{int(j['pipe'])}"), jobs)):
            job.update(regs=regs, spill=spill, error=err)
            del job["src"]
    for k, pipe in variants:
        rows = [j for j in jobs if (j["mma_k"], j["pipe"]) == (k, pipe) and j["regs"] is not None]
        fit = [j for j in rows if not j["spill"] and j["regs"] < j["cap"]]
        print(f"m16n8k{k} {'pipelined' if pipe else 'plain'}: {len(rows)} kernels, "
              f"{sum(1 for j in rows if j['spill'])} spilled; under the cap without spills: {len(fit)}; "
              f"REGS[{k}, {pipe}] = {dmma.REGS[k, pipe]}")
        # What REGS decides at the cap: kernels it admits that spilled, and
        # kernels it refuses that did not (the rules then take the next shape).
        admitted_spilled = [j for j in rows if j["estimate"] <= j["cap"] and j["spill"]]
        refused_fine = [j for j in rows if j["estimate"] > j["cap"] and not j["spill"]]
        print(f"    admitted but spilled: {len(admitted_spilled)}; refused but did not spill: {len(refused_fine)}")
        for j in admitted_spilled + refused_fine:
            print(f"      {'SPILLED' if j['spill'] else 'refused'} {j['problem']} {j['config']} thr {j['threads']} "
                  f"copies {j['copies']} est {j['estimate']} ptxas {j['regs']} spill {j['spill']}")
        for j in sorted(rows, key=lambda j: j["estimate"] - j["regs"]):
            print(f"    {j['problem']:28s} {j['config']:60s} thr {j['threads']:3d} copies {j['copies']:2d} "
                  f"st {j['ST']} est {j['estimate']:3d} ptxas {j['regs']:3d} cap {j['cap']:3d} spill {j['spill']}")
    bad = [j for j in jobs if j["regs"] is None]
    for j in bad:
        print("FAILED", j["problem"], j["config"], j["mma_k"], j["pipe"], j["error"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(jobs, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
