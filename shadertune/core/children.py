"""Spawned pool children that end with their parent.

A ProcessPoolExecutor's children wait for work on a queue whose pipe they hold both ends
of, so a parent killed outright (SIGKILL, the OOM killer, a cluster worker killed by its
nanny or by hand) leaves them waiting for good: orphans that hold memory and, on a GPU
host, a CUDA compile pool's worth of processes.  exit_with_parent, run as a pool's
initializer, watches the parent's sentinel (a pipe the parent alone holds open: ready
once it is gone) from a daemon thread and ends the child then.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import wait


def exit_with_parent() -> None:
    """In a spawned child: end this process as soon as its parent process ends."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def quiet_child() -> None:
    """A pool child's initializer: it ends with its parent, and a terminal's Ctrl-C (sent
    to the whole process group) is the parent's to handle: the parent stops its work and
    shuts its children down."""
    exit_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
