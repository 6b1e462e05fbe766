"""What the cluster costs per evaluation, without a GPU: the tests' fake backend on fake
GPUs, every evaluation EVALUATION_SECONDS (a CUDA evaluation's order): half a sleep (the
GPU's time), half a spin in Python holding the interpreter lock (the host's work).

    PYTHONPATH=tests:. python tools/cluster_overhead.py [depth] [scheduler] [search]

depth: evaluations per second on 1 and 2 workers with 1, 2 and 3 evaluations in flight a
worker (coordinator.EVALUATIONS_PER_WORKER), against the ideal (workers / evaluation).
scheduler: the coordinator's CPU per evaluation on a local cluster (local_cluster: the
scheduler in a process of its own, the nannies in the coordinator's) and on a cluster of
separate processes (`dask scheduler` and `python -m shadertune.cluster worker`), two workers.
search: one model-strategy search (the fake with a cost model, 96 evaluations) on 1 and 2
workers, twice each, with how many configs were timed ahead and how many of those the
search then asked for.
"""
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
CONTROL = tempfile.mkdtemp()
os.environ["CLUSTER_FAKE_DIR"] = CONTROL
ENV = {"CLUSTER_FAKE_DIR": CONTROL, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
KIND = "cluster_fakes:OneKind"
EVALUATION_SECONDS = 0.02

from shadertune.cluster import ClusterEvaluator, Coordinator, local_cluster  # noqa: E402
from shadertune.cluster import coordinator as coordinator_module  # noqa: E402
from shadertune.core.config import Config  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

P = Problem(8, 8, 8)
BASE = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
CONFIGS = [Config(BASE, np=k, mrt_w=w, mrt_h=h, mc=mc) for k in range(8, 200, 2)
           for w in (1, 2) for h in (1, 2) for mc in ("1x4", "4x1")]


def measure(client, count: int, label: str, workers: int) -> None:
    """`count` evaluations of fresh configs after a few to warm up: their rate and the
    coordinator's CPU per evaluation."""
    (group,) = Coordinator(client, KIND).groups.values()
    ev = ClusterEvaluator(group, P, repeats=2)
    ev.many(CONFIGS[:8])
    c0, t0 = time.process_time(), time.monotonic()
    got = ev.many(CONFIGS[8:8 + count])
    c1, t1 = time.process_time(), time.monotonic()
    print(f"{label}: {len(got)} evaluations in {t1 - t0:.2f} s = {len(got) / (t1 - t0):.1f}/s "
          f"(ideal {workers / EVALUATION_SECONDS:.0f}/s), coordinator CPU "
          f"{1e3 * (c1 - c0) / len(got):.1f} ms/evaluation", flush=True)


def depth() -> None:
    for workers in (1, 2):
        with local_cluster(list(range(workers)), [KIND], env=ENV) as client:
            for n in (1, 2, 3):
                coordinator_module.EVALUATIONS_PER_WORKER = n
                measure(client, 36 * workers, f"{workers} workers, {n} in flight a worker", workers)


def scheduler() -> None:
    with local_cluster([0, 1], [KIND], env=ENV) as client:
        measure(client, 400, "local cluster (nannies in the coordinator's process)", 2)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    address, env = f"tcp://127.0.0.1:{port}", {**os.environ, **ENV}
    quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                              "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"], **quiet)
    time.sleep(3)
    workers = subprocess.Popen([sys.executable, "-m", "shadertune.cluster", "worker", address,
                                "--gpus", "0,1", "--host", "127.0.0.1", "--backends", KIND], **quiet)
    try:
        from distributed import Client
        with Client(address) as client:
            client.wait_for_workers(2, timeout=60)
            measure(client, 400, "scheduler and worker host in processes of their own", 2)
    finally:
        for proc in (workers, sched):
            proc.terminate()
            proc.wait(30)


def search() -> None:
    from shadertune.cluster import tune_table
    from shadertune.search import Budget
    for workers in (1, 2):
        with local_cluster(list(range(workers)), ["cluster_fakes:ModelKind"], env=ENV) as client:
            for _ in range(2):
                coord = Coordinator(client, "cluster_fakes:ModelKind")
                t0 = time.monotonic()
                ((_, (entry,)),) = tune_table(coord, [Problem(8, 8, 16)],
                                              strategy="model", budget=Budget(96), repeats=2)
                dt = time.monotonic() - t0
                ahead = entry.get("ahead", {"timed": 0, "asked": 0})
                print(f"{workers} workers: {entry['evaluated']} evaluations in {dt:.2f} s = "
                      f"{entry['evaluated'] / dt:.1f}/s (ideal {workers / EVALUATION_SECONDS:.0f}/s), "
                      f"{ahead['timed']} timed ahead, {ahead['asked']} of them asked for", flush=True)


def main(argv) -> None:
    # an evaluation: half of it waiting on the GPU, half host work in Python (the GIL held)
    pathlib.Path(CONTROL, "build-sleep").write_text(str(EVALUATION_SECONDS / 2))
    pathlib.Path(CONTROL, "build-spin").write_text(str(EVALUATION_SECONDS / 2))
    for name in argv or ["depth", "scheduler"]:
        {"depth": depth, "scheduler": scheduler, "search": search}[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
