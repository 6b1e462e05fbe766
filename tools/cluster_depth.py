"""Evaluations per second of a ClusterEvaluator on 1 and 2 fake workers whose evaluation
'GPU time' is a 40 ms sleep (a CUDA evaluation's order), with 1 and 2 evaluations in
flight per worker (coordinator.EVALUATIONS_PER_WORKER).  No GPU: the tests' fake backend.

    PYTHONPATH=tests:. python tools/cluster_depth.py
"""
import os
import pathlib
import sys
import tempfile
import time
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
ctl = tempfile.mkdtemp(); os.environ["CLUSTER_FAKE_DIR"] = ctl
pathlib.Path(ctl, "build-sleep").write_text("0.04")
from shadertune.cluster import ClusterEvaluator, Coordinator, local_cluster
from shadertune.cluster import coordinator as cmod
from shadertune.core.config import Config
from shadertune.core.problem import Problem
P = Problem(8, 8, 8)
base = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)
def main():
    for n in (1, 2):
        with local_cluster(list(range(n)), ["cluster_fakes:OneKind"], env={"CLUSTER_FAKE_DIR": ctl, "PYTHONPATH": os.pathsep.join(sys.path[:1] + [str(pathlib.Path(__file__).resolve().parent.parent)])}) as client:
            coord = Coordinator(client, "cluster_fakes:OneKind")
            (group,) = coord.groups.values()
            for depth in (1, 2):
                cmod.EVALUATIONS_PER_WORKER = depth
                ev = ClusterEvaluator(group, P, repeats=2)
                cfgs = [Config(base, np=k, mrt_w=w) for k in range(8, 48, 2) for w in (1, 2)][:40]
                ev.many(cfgs[:4])                       # warm
                t = time.monotonic(); got = ev.many(cfgs[4:]); s = time.monotonic() - t
                print(f"workers {n} depth {depth}: {len(got)} evaluations in {s:.2f} s = {len(got)/s:.1f}/s"
                      f" (ideal {n/0.04:.0f}/s)", flush=True)


if __name__ == '__main__':
    main()
