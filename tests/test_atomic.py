"""The one output writer (shadertune.core.atomic) on real files, links, device nodes, FIFOs,
standard output and a real full file system."""
import os
import stat
import subprocess

import pytest
from fullfs import fill_up, leftovers, small_tmpfs
from subproc import run_python

from shadertune.core import atomic
from shadertune.core.atomic import OutputError


def test_a_file_is_replaced_whole_and_keeps_its_mode(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    os.chmod(out, 0o640)
    atomic.write_text(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    deep = tmp_path / "a" / "b" / "new.txt"          # its folder is made
    atomic.write_json(deep, {"x": 1})
    assert deep.read_text() == '{\n "x": 1\n}\n'
    assert leftovers(tmp_path) == ["a", "r.json"]


def test_a_failure_inside_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic.output(out) as f:
            f.write("half")
            raise KeyboardInterrupt
    assert out.read_text() == "old" and leftovers(tmp_path) == ["r.json"]


def test_a_link_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    atomic.write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "made.json")
    atomic.write_text(dangling, "x")
    assert dangling.is_symlink() and (tmp_path / "made.json").read_text() == "x"


def test_device_nodes_fifos_and_folders_are_refused_and_left_as_they_are(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="it is a FIFO"):
        atomic.write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(OutputError, match="it is a folder"):
        atomic.write_text(tmp_path, "x")
    with pytest.raises(OutputError, match="character device, not a regular file"):
        atomic.check("/dev/null")                    # never replaced: checked, not written
    with pytest.raises(OutputError, match="it is in /dev/, whose files are the system's"):
        atomic.check("/dev/shadertune-no-such-node")  # nor made there
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError as e:
        pytest.skip(f"cannot make a device node here ({e}); /dev/null was checked above")
    with pytest.raises(OutputError, match="character device"):
        atomic.write_text(tmp_path / "null", "x")
    assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode)


def test_a_protected_file_is_refused_by_any_name(tmp_path):
    store = tmp_path / "s.sqlite"
    store.write_bytes(b"precious")
    (tmp_path / "ln").symlink_to(store)
    os.link(store, tmp_path / "hard")
    for name in (store, tmp_path / "ln", tmp_path / "hard", tmp_path / "sub" / ".." / "s.sqlite"):
        with pytest.raises(OutputError, match="it is the store's file"):
            atomic.write_text(name, "x", protect=[store])
    with pytest.raises(OutputError, match="it is the store's file"):     # not made yet
        atomic.check(tmp_path / "new.sqlite", protect=[tmp_path / "new.sqlite"])
    assert store.read_bytes() == b"precious"


def test_standard_output_by_name_is_written_as_a_stream():
    """/dev/stdout and '-' write the stream; the pipe is never replaced by a file."""
    code = """
        import sys
        from shadertune.core import atomic
        atomic.write_text("-", "one\\n")
        atomic.write_text("/dev/stdout", "two\\n")
        atomic.write_text("/dev/stderr", "three\\n")
        try:
            atomic.check("/dev/stdout", stream_ok=False)
        except atomic.OutputError as e:
            print("refused:", e)
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == ["one", "two"] and r.stderr == "three\n"
    assert "it is the standard out stream; this output must be a file" in r.stdout


def test_a_full_stream_is_one_error(tmp_path):
    """/dev/full answers every write with ENOSPC."""
    code = """
        from shadertune.core import atomic
        try:
            atomic.write_text("/dev/stdout", "x" * 100000)
        except atomic.OutputError as e:
            print(e, file=__import__("sys").stderr)
    """
    with open("/dev/full", "w") as full:
        r = run_python(code, stdout=full, stderr=subprocess.PIPE, capture_output=False)
    assert r.returncode == 0 and r.stderr.strip() == "cannot write /dev/stdout: No space left on device"


def test_a_full_disk_leaves_no_partial_file_and_the_old_one_whole(tmp_path):
    with small_tmpfs(tmp_path / "fs", 64) as fs:
        out = fs / "r.json"
        out.write_text("old")
        fill_up(fs, 8)
        with pytest.raises(OutputError, match=r"No space left on device \(nothing written; the "
                                              r"file there is as it was\)"):
            atomic.write_text(out, "x" * 200_000)
        assert out.read_text() == "old" and leftovers(fs) == ["r.json"]
        with pytest.raises(OutputError, match=r"No space left on device \(nothing written\)$"):
            atomic.write_bytes(fs / "new.png", b"\x89PNG" * 50_000)
        assert leftovers(fs) == ["r.json"]
