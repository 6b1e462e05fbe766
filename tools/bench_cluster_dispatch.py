"""How busy a cluster keeps its workers when evaluations are short (CUDA's 24-55 ms), on
this machine: a local Dask cluster of 2 fake-GPU workers (tests/cluster_fakes.py) whose
every build sleeps BUILD_S, one batch of N configs through ClusterEvaluator.many; prints
evaluations a second and the workers' busy share.  Session 24: the coordinator fetched each
result (a round trip to its worker) and wrote it to the store before sending the freed
worker its next config.

    python3 tools/bench_cluster_dispatch.py [BUILD_S] [N] [RUNS]
"""
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

if __name__ == "__main__":
    from subproc import child_env
    from shadertune.cluster import ClusterEvaluator, Coordinator, local_cluster
    from shadertune.core.config import Config
    from shadertune.core.problem import Problem
    build_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.03
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    control = tempfile.mkdtemp(prefix="dispatch-")
    with open(os.path.join(control, "build-sleep"), "w") as f:
        f.write(str(build_s))
    with local_cluster([0, 1], ["cluster_fakes:OneKind"],
                       env={"CLUSTER_FAKE_DIR": control, "PYTHONPATH": child_env()["PYTHONPATH"]}) as client:
        client.wait_for_workers(2, timeout=60)
        (group,) = Coordinator(client, "cluster_fakes:OneKind").groups.values()
        base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
        for run in range(runs):
            p = Problem(8, 8, 64 + 8 * run)          # a fresh problem: nothing replayed
            batch = [Config(base, np=v) for v in range(8, 8 + 2 * n, 2)]
            ev = ClusterEvaluator(group, p, repeats=2)
            t0 = time.perf_counter()
            got = ev.many(batch)
            span = time.perf_counter() - t0
            busy = sum(ev.timings["busy_s"].values()) / (2 * span)
            print(f"run {run}: {len(got)} evaluations in {span:.2f} s, {len(got) / span:.1f}/s, "
                  f"busy {100 * busy:.0f}% (build {build_s * 1e3:.0f} ms)", flush=True)
