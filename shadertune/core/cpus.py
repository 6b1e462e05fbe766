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
