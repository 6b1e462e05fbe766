"""A compile in progress, visible to every process that shares a compile cache (CUDA's
cubins): `cubin` below is whichever file the compile writes.

Several processes of one host compile into one cache (a cluster's workers on one
machine; compile_ahead's pool beside a build).  Without a word between them, a build
that finds no cubin compiles it, though another process may be a second from writing
it: the same kernel compiled twice, on the GPU thread of the second.  So a process
that starts a compile first claims its cubin: it makes `<cubin>.compiling` with
O_EXCL (one process wins), and removes it once the cubin is renamed into place or the
compile failed; a pool's child that runs a compile its parent marked puts its own
name on the mark (restamp).  A build that finds a live mark waits for the cubin instead of
compiling; a mark whose process is gone (its host's pid no longer runs) or older than
STALE_SECONDS is a leftover, taken over.

The mark holds "host pid unix-time".  A pid is judged on its own host only; a mark
written on another host (a cache on a shared file system) is judged by its age.
"""
from __future__ import annotations

import os
import pathlib
import socket
import time

SUFFIX = ".compiling"
# NVRTC takes seconds a kernel (tens under load); a mark older than this is a leftover
STALE_SECONDS = 300.0
POLL_SECONDS = 0.01

_HOST = socket.gethostname()


def mark_of(cubin: pathlib.Path) -> pathlib.Path:
    return cubin.with_name(cubin.name + SUFFIX)


def claim(cubin: pathlib.Path) -> bool:
    """Whether this process now owns the compile of `cubin` (it made the mark, or took
    over a leftover one); False where another live process holds it.  OSError where no
    mark can be written (a full or read-only cache): the caller compiles unmarked."""
    mark = mark_of(cubin)
    mark.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if live(mark):
                return False
            _remove(mark)            # a leftover: taken over (a race with another taker: one wins)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{_HOST} {os.getpid()} {time.time()}")
        return True
    return False


def restamp(cubin: pathlib.Path) -> None:
    """The compile of `cubin` runs in this process now (a pool's child of the process that
    marked it): the mark names this process, so that its death frees the kernel for the
    others at once, and its age starts again (a compile that waited in a queue)."""
    mark = mark_of(cubin)
    tmp = mark.with_name(f"{mark.name}.{os.getpid()}")
    try:
        tmp.write_text(f"{_HOST} {os.getpid()} {time.time()}")
        os.replace(tmp, mark)
    except OSError:      # a cache that takes no mark: the parent's stays
        _remove(tmp)


def release(cubin: pathlib.Path) -> None:
    """The compile of `cubin` ended (written or failed): its mark goes."""
    _remove(mark_of(cubin))


def live(mark: pathlib.Path) -> bool:
    """Whether `mark` exists and its compile may still be running."""
    try:
        host, pid, when = mark.read_text().split()
        pid, when = int(pid), float(when)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):    # being written (empty for a moment), or garbage
        try:
            return time.time() - mark.stat().st_mtime < STALE_SECONDS
        except OSError:              # gone, or no folder to hold it (a cache under a file)
            return False
    if time.time() - when > STALE_SECONDS:
        return False
    if host != _HOST:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:          # another user's live process
        return True
    return True


def await_other(cubin: pathlib.Path) -> None:
    """Wait while another live process compiles `cubin`: until the cubin is there, or
    the mark is gone or a leftover (then the caller compiles, and reports a failure)."""
    mark = mark_of(cubin)
    while not cubin.exists() and live(mark):
        time.sleep(POLL_SECONDS)


def _remove(path: pathlib.Path) -> None:
    try:
        path.unlink()
    except OSError:      # gone already, or a cache it cannot be removed from (a leftover then)
        pass
