"""Spawned pool children end with their parent (core/children.py): a parent killed with
SIGKILL (a cluster worker killed by hand or by its nanny, the OOM killer) must not leave
its ranking or compile pool's processes waiting on their queue for good."""
import signal
import subprocess

import pytest

from subproc import popen_python, wait_ended

psutil = pytest.importorskip("psutil")

POOLS = {
    "ranking": "from shadertune.search.ranking import children; pool = children()",
    "cuda compile": "from shadertune.backends.cuda.compiler import _pool_factory; pool = _pool_factory(2)",
}


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_a_pools_children_end_when_their_parent_is_killed(pool):
    code = POOLS[pool] + """
import os, sys, time
from concurrent.futures import wait
wait([pool.submit(os.getpid) for _ in range(4)])
print(" ".join(str(p) for p in pool._processes), flush=True)
time.sleep(120)
"""
    p = popen_python(code, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        pids = [int(t) for t in p.stdout.readline().split()]
        assert pids and all(psutil.Process(c).ppid() == p.pid for c in pids)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    wait_ended(pids, 20, f"the {pool} pool's children")
