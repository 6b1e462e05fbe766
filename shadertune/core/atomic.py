"""Every file a tool writes, written whole or not at all: the one output writer.

    with atomic.output("r.json", protect=store_files(db)) as f:
        json.dump(doc, f)
    atomic.write_text(path, text); atomic.write_json(path, doc)

What a name given as an output means:
- a regular file, or a name that does not exist yet: the data goes to a temporary
  file in the same folder, which is flushed, fsynced and renamed over the name
  (the folder is fsynced too).  A reader sees the old file or the new one, never
  part of one; a failure (a full disk, Ctrl-C) removes the temporary file and
  leaves the old one as it was.  A replaced file keeps its permission bits; a new
  one gets 0666 less the umask, as open() would make it.
- a symbolic link: followed; its target is replaced and the link stays a link.
- standard output: '-', or any name that is this process's standard output or
  error (/dev/stdout, /dev/stderr, /proc/self/fd/1, or a file the shell
  redirected them to).  Written there as a stream, in place: the user named the
  stream, and replacing a terminal, a pipe or a redirected file with a new
  regular file is never what was meant.
- anything else that is not a regular file (a device node such as /dev/null or a
  disk, a FIFO, a socket, a folder), and any other name in /dev, /proc or /sys:
  refused.  Renaming over it would replace it (root may replace /dev/null), and
  writing into it is not writing a file.
- a tuning store's file: refused before anything is written, from every writer,
  whatever the command was given: the name is resolved (links followed) and
  compared as a file (same device and inode, or the same real path for a file
  not made yet) with
    * each of `protect` (a command passes the store its --db names, and its inputs),
    * the store $SHADERTUNE_DB names and the one at the default location, each with
      SQLite's -wal, -shm and -journal files beside it
      (shadertune.core.store_location.known_store_files),
  and an existing file that begins with SQLite's header (any SQLite database: a
  store under another name) is refused too.  An export, report, plot or model
  named like a store, or a link to one, can never truncate or replace it.

Every failure is an OutputError (a ShadertuneError): one line naming the output
and the problem, e.g. "cannot write r.json: No space left on device (nothing
written; r.json is as it was)".  check() makes the same decisions without
writing, for a command line to refuse an output before it starts working.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import stat
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import ShadertuneError
from .store_location import known_store_files

STDOUT_NAMES = ("-",)
# Folders of device nodes and kernel files: nothing there is replaced, even a regular file
# (a /dev/stdout that something replaced by a regular file is still not ours to replace).
SYSTEM_FOLDERS = ("/dev/", "/proc/", "/sys/")
SHARED_MEMORY = "/dev/shm/"      # a tmpfs for anyone's files
SQLITE_MAGIC = b"SQLite format 3\x00"
STORE = "the tuning store's file"


class OutputError(ShadertuneError, OSError):
    """An output cannot be written (or may not be: a device node, the store); one line.
    `why`: the reason alone, without the output's name."""

    def __init__(self, message: str, why: str | None = None):
        super().__init__(message)
        self.why = why or message

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class Target:
    """Where an output name leads: a regular file at `path` (replaced atomically), or
    the stream `stream` ('stdout' or 'stderr')."""
    name: str                        # as the user gave it, for messages
    path: pathlib.Path | None = None  # the file to replace (a link's target)
    stream: str | None = None


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _reason(e: OSError) -> str:
    return e.strerror or str(e) or type(e).__name__


def _std_stream(st: os.stat_result) -> str | None:
    """'stdout' or 'stderr' when `st` is the file behind this process's fd 1 or 2."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            if os.path.samestat(st, os.fstat(fd)):
                return name
        except OSError:
            continue
    return None


def _guarded(protect: Iterable, protected: str) -> list[tuple[str, str]]:
    """(file, what it is) for every file no output may replace: `protect` (named
    `protected`) and the known stores' files, read now."""
    return ([(os.fspath(p), protected) for p in protect]
            + [(str(p), STORE) for p in known_store_files()])


def _is_sqlite(path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def _refuse(name: str, what: str, other: str) -> OutputError:
    return OutputError(f"cannot write {name}: it is {what} {other}, which it would destroy: "
                       f"choose another name")


def check(path, *, protect: Iterable = (), stream_ok: bool = True,
          protected: str = "the store's file") -> Target:
    """Where writing `path` would go, or OutputError saying why it may not; writes nothing.
    `stream_ok` False: standard output is refused too (a binary the terminal cannot show);
    `protected`: what the files in `protect` are, for the message."""
    name = os.fspath(path)
    if name in STDOUT_NAMES:
        if not stream_ok:
            raise OutputError(f"cannot write {name!r}: this output must be a file")
        return Target(name, stream="stdout")
    p = pathlib.Path(name)
    guarded = _guarded(protect, protected)
    try:
        st = os.stat(p)              # follows links: what the name leads to
    except FileNotFoundError:
        st = None
        real = os.path.realpath(p)
        for other, what in guarded:  # a store not made yet will be there by the time we write
            if os.path.realpath(other) == real:
                raise _refuse(name, what, other) from None
    except OSError as e:             # a folder on the way not reachable, a loop of links
        raise OutputError(f"cannot write {name}: {_reason(e)}", _reason(e)) from None
    if st is not None:
        for other, what in guarded:
            try:
                ost = os.stat(other)
            except OSError:
                continue             # a protected file that is not there cannot be hit
            if os.path.samestat(st, ost):
                raise _refuse(name, what, other)
        stream = _std_stream(st)
        if stream is not None and (not stat.S_ISREG(st.st_mode) or name.startswith(("/dev/", "/proc/"))):
            if not stream_ok:
                raise OutputError(f"cannot write {name}: it is the standard {stream[3:]} stream; "
                                  f"this output must be a file")
            return Target(name, stream=stream)
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(f"cannot write {name}: it is {_kind(st.st_mode)}, not a regular file "
                              f"(outputs are written as files, or to standard output as '-')")
        if _is_sqlite(p):
            raise OutputError(f"cannot write {name}: it is an SQLite database (a tuning store?), "
                              f"which it would destroy: choose another name")
        if stream is not None and stream_ok:
            return Target(name, stream=stream)   # a file the shell redirected stdout to
    # a link (even a dangling one) is replaced at its target, and the link stays
    real = pathlib.Path(os.path.realpath(p)) if p.is_symlink() else p
    resolved = os.path.realpath(p)
    system = next((f for f in SYSTEM_FOLDERS if resolved.startswith(f)), None)
    if system is not None and not resolved.startswith(SHARED_MEMORY):
        raise OutputError(f"cannot write {name}: it is in {system}, whose files are the "
                          f"system's (only standard output and error are written there, as "
                          f"streams)")
    return Target(name, path=real)


def _umask() -> int:
    """This process's umask, read without changing it (os.umask sets it, which another
    thread creating a file at that moment would see)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: pathlib.Path) -> None:
    """Make a rename in `folder` durable (where the file system supports it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def _stream(target: Target, mode: str):
    s = sys.stdout if target.stream == "stdout" else sys.stderr
    f = s.buffer if "b" in mode else s
    try:
        yield f
        f.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        if e.filename is not None:
            raise
        raise OutputError(f"cannot write {target.name}: {_reason(e)}", _reason(e)) from None


@contextlib.contextmanager
def output(path, mode: str = "w", *, protect: Iterable = (), encoding: str | None = "utf-8",
           newline: str | None = None, stream_ok: bool = True,
           protected: str = "the store's file"):
    """A file object for the output `path` (see the module docstring); the data lands
    when the block ends without an exception, and not at all otherwise."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic.output mode must be 'w' or 'wb', got {mode!r}")
    protect = list(protect)
    target = check(path, protect=protect, stream_ok=stream_ok, protected=protected)
    if target.stream is not None:
        with _stream(target, mode) as f:
            yield f
        return
    dest = target.path
    name = target.name
    try:
        existed = dest.exists()
    except OSError:
        existed = False
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as e:             # a folder that cannot be made or written
        raise OutputError(f"cannot write {name}: {_reason(e)}", _reason(e)) from None
    try:
        try:
            old = os.stat(dest)
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
        except FileNotFoundError:
            os.fchmod(fd, 0o666 & ~_umask())
        kw = {} if "b" in mode else {"encoding": encoding, "newline": newline}
        with os.fdopen(fd, mode, **kw) as f:
            fd = None
            yield f
            f.flush()
            os.fsync(f.fileno())
        # the protected files are checked again at the last moment: a name that
        # became the store since check() (a link switched) is still never replaced
        check(name, protect=protect, stream_ok=False, protected=protected)
        os.replace(tmp, dest)
        tmp = None
        _fsync_folder(dest.parent)
    except OutputError:
        raise
    except OSError as e:
        if e.filename not in (None, tmp, str(dest)):
            raise                    # another file's error inside the block: not this output's
        kept = "; the file there is as it was" if existed else ""
        why = f"{_reason(e)} (nothing written{kept})"
        raise OutputError(f"cannot write {name}: {why}", why) from None
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text(path, text: str, **kw) -> None:
    with output(path, "w", **kw) as f:
        f.write(text)


def write_bytes(path, data: bytes, **kw) -> None:
    with output(path, "wb", **kw) as f:
        f.write(data)


def write_json(path, obj, *, indent: int | None = 1, sort_keys: bool = False, default=None,
               **kw) -> None:
    """JSON text with a final newline (NaN and Infinity as Python writes them)."""
    with output(path, "w", **kw) as f:
        json.dump(obj, f, indent=indent, sort_keys=sort_keys, default=default)
        f.write("\n")


__all__ = ["OutputError", "Target", "check", "output", "write_bytes", "write_json", "write_text"]
