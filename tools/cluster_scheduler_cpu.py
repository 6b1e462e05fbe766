"""Coordinator CPU per evaluation: the Dask scheduler in this process (local_cluster) or in
its own (a `dask scheduler` subprocess and `python -m shadertune.cluster worker` on two fake
GPUs).  No GPU: the tests' fake backend, every evaluation a 20 ms sleep.

    PYTHONPATH=tests:. python tools/cluster_scheduler_cpu.py
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
ctl = tempfile.mkdtemp(); os.environ["CLUSTER_FAKE_DIR"] = ctl
pathlib.Path(ctl, "build-sleep").write_text("0.02")
from shadertune.cluster import ClusterEvaluator, Coordinator, local_cluster
from shadertune.core.config import Config
from shadertune.core.problem import Problem
ENV = {**os.environ, "CLUSTER_FAKE_DIR": ctl, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}


def measure(client, label):
    P = Problem(8, 8, 8)
    base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
    coord = Coordinator(client, "cluster_fakes:OneKind")
    (group,) = coord.groups.values()
    ev = ClusterEvaluator(group, P, repeats=2)
    cfgs = [Config(base, np=k, mrt_w=w, mrt_h=h, mc=mc) for k in range(8, 200, 2) for w in (1, 2) for h in (1, 2) for mc in ('1x4', '4x1')]
    ev.many(cfgs[:8])
    c0 = time.process_time(); t0 = time.monotonic()
    got = ev.many(cfgs[8:408])
    c1 = time.process_time(); t1 = time.monotonic()
    print(f"{label}: {len(got)} evaluations in {t1-t0:.2f} s ({len(got)/(t1-t0):.1f}/s), coordinator CPU {1e3*(c1-c0)/len(got):.1f} ms/evaluation", flush=True)


def main():
    with local_cluster([0, 1], ["cluster_fakes:OneKind"], env={"CLUSTER_FAKE_DIR": ctl, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}) as client:
        measure(client, "scheduler in process")
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    addr = f"tcp://127.0.0.1:{port}"
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    wk = subprocess.Popen([sys.executable, "-m", "shadertune.cluster", "worker", addr, "--gpus", "0,1", "--host", "127.0.0.1", "--backends", "cluster_fakes:OneKind"], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from distributed import Client
        with Client(addr) as client:
            client.wait_for_workers(2, timeout=60)
            measure(client, "scheduler in its own process")
    finally:
        wk.terminate(); sched.terminate(); wk.wait(30); sched.wait(30)


if __name__ == "__main__":
    main()
