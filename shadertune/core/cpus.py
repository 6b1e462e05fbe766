"""How many CPUs this process may use: its affinity mask (taskset, a container's cpuset,
a job scheduler's slice), not the machine's count that os.cpu_count() gives; pools sized
by the machine's count oversubscribe a process held to a few cores."""
from __future__ import annotations

import os


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):        # no affinity on this platform
        return os.cpu_count() or 1


# set by a cluster in each worker's environment (cluster/engine.share_host_cores)
HOST_WORKERS = "SHADERTUNE_HOST_WORKERS"


def compile_share() -> int:
    """The cores this process may compile on: the usable ones, over the workers that share
    its host where a cluster says how many ($SHADERTUNE_HOST_WORKERS): four workers of one
    host each starting a pool the size of the host starve one another's timing threads."""
    try:
        workers = max(1, int(os.environ.get(HOST_WORKERS, "1")))
    except ValueError:
        workers = 1
    return max(1, usable_cpus() // workers)
