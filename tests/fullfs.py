"""A real full file system for the tests: a small tmpfs (root with CAP_SYS_ADMIN), filled."""
import contextlib
import os
import shutil
import subprocess

import pytest


@contextlib.contextmanager
def small_tmpfs(where, kib: int):
    """A real file system of `kib` KiB mounted at `where` (root with CAP_SYS_ADMIN), else a
    skip saying so: the full-disk cases then rest on /dev/full (test_a_full_stream_...)."""
    where.mkdir()
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command: a small tmpfs cannot be made here")
    r = subprocess.run([mount, "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill_up(folder, leave_kib: int) -> None:
    """Take all but about `leave_kib` KiB of the file system of `folder`."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * max(0, free - leave_kib * 1024))


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in ("filler",))
