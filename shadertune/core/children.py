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


def leave_ctrl_c_to_the_parent() -> None:
    """This process ignores SIGINT: a terminal's Ctrl-C reaches the whole process group,
    and the process that started this one answers it (it stops its work and ends its
    children), where this one would print a traceback of its own.  From the main thread
    only, where signal handlers are set."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def quiet_child() -> None:
    """A pool child's initializer: it ends with its parent and leaves Ctrl-C to it."""
    exit_with_parent()
    leave_ctrl_c_to_the_parent()


def end_pool(pool) -> None:
    """End a process pool now: work not started is cancelled, its processes killed (they
    were running work nobody waits for any more)."""
    end = getattr(pool, "terminate_workers", None)         # Python 3.14
    if end is not None:
        end()
        return
    # before shutdown, which lets go of them (a thread pool, tests' stand-in, has none)
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        # SIGKILL: a child inherits its spawning thread's blocked and ignored signals, and
        # a SIGTERM left some running for good in full test runs.  Sent without asking
        # is_alive() first (a child another thread of the process reaped reads as alive
        # for good; one gone already is skipped by kill itself)
        proc.kill()
