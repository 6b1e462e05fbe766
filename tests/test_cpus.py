import os
import subprocess
import sys

import pytest

from shadertune.core.cpus import usable_cpus


def test_pools_are_sized_by_the_cpus_this_process_may_use():
    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_held_to_one_core_counts_one():
    # taskset, a cpuset or a batch slot hold a process to a few of the machine's cores:
    # the compile pools must not start one process per core of the machine
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from shadertune.core.cpus import usable_cpus; print(usable_cpus(), os.cpu_count())")
    one, machine = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout.split()
    assert one == "1" and int(machine) >= 1
