"""The coordinator's CPU per evaluation on a CUDA table, without a GPU (a profiling tool).

    python3 tools/profile_cluster_coordinator.py [--workers 2] [--budget 64]
    py-spy record -r 200 -f raw -o OUT.raw -- python3 tools/profile_cluster_coordinator.py

Workers serve tools/cuda_space_fake.py's backend: CUDA's real space, candidate list and cost
model, kernels that 'time' at the model's prediction (numpy computes their products), so the
coordinator does what it does for CUDA (the model strategy over an ~80,000-config space) with
evaluations that cost the workers little.  Prints evaluations, wall seconds and the
coordinator process's CPU per evaluation (its in-process scheduler included)."""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

from shadertune.cluster import Coordinator, local_cluster, tune_table  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.search import Budget  # noqa: E402

SPEC = "cuda_space_fake:CudaSpace"
PROBLEMS = [Problem(256, 256, 256), Problem(256, 256, 248), Problem(248, 256, 256), Problem(256, 248, 256)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--budget", type=int, default=64)
    args = ap.parse_args()
    env = {"PYTHONPATH": os.pathsep.join([ROOT, HERE, os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp, \
            local_cluster(list(range(args.workers)), [SPEC], env=env) as client:
        coord = Coordinator(client, SPEC)
        c0, t0 = time.process_time(), time.perf_counter()
        table = tune_table(coord, PROBLEMS, budget=Budget(args.budget), repeats=2,
                           store_path=os.path.join(tmp, "t.sqlite"))
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        n = sum(e["evaluated"] for _, entries in table for e in entries)
        print(f"evaluations {n}, wall {wall:.2f} s, coordinator CPU {cpu:.2f} s = "
              f"{1e3 * cpu / max(1, n):.1f} ms an evaluation", flush=True)


if __name__ == "__main__":
    main()
