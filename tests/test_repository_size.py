"""The checkout travels to the GPU machine with its wheels, 64 MiB at most (the device
tool's limit): tracked files stay under TRACKED_MAX_BYTES, leaving room for the GL
loaders, the wheels and Dask's (about 8 MiB), and benchmark stores are committed
xz-compressed (SQLite stores shrink about 10x)."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRACKED_MAX_BYTES = 48 * 2**20


def _tracked() -> list[pathlib.Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_the_tracked_tree_leaves_room_for_the_wheels_on_the_gpu_machine():
    total = sum(p.stat().st_size for p in _tracked() if p.is_file())
    assert total < TRACKED_MAX_BYTES, (
        f"tracked files take {total / 2**20:.1f} MiB (limit {TRACKED_MAX_BYTES / 2**20:.0f}): "
        f"compress raw data under benchmarks/ (xz) or leave it out")


def test_benchmark_stores_are_committed_compressed():
    raw = [str(p.relative_to(ROOT)) for p in _tracked()
           if p.suffix == ".sqlite" and "benchmarks" in p.relative_to(ROOT).parts]
    assert not raw, f"commit these as .sqlite.xz (xz -9 FILE): {raw}"
