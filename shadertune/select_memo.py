"""Auto's selections kept for the life of the store's content.

A selection (select.py) reads the store and, for the model rule, the learned
model saved beside it; with hundreds of results per problem that is
milliseconds a call (decoding results, building a space), paid by every
matmul(config="auto").  So a selection is kept per key with a stamp of what it
was read from, and used again while the stamp is unchanged:

- the store file's and its write-ahead log's identity, size and modification
  time: a commit by another process appends to the log (or, in rollback mode,
  rewrites the file), a store deleted and made again is another file;
- a count of the commits this process made to that file (Store writes call
  changed()), so a write of this process is seen at once, whatever the file
  system's timestamp granularity;
- the model file's identity, size and modification time (a model retrained by
  another process).

No connection is kept open for this: an idle reader would keep the log of a
store alive after its writers close, and a store replaced on disk (mv) would
then be read with the old file's log.  A commit by another process that leaves
both files' sizes and timestamps unchanged (within the file system's timestamp
granularity, after the log was reset) can go unseen until the next commit; the
selection then names a config that was verified, only not the newest best.

The stamp is taken before the store is read: a write that lands during the read
leaves the selection stamped older than the store, so the next call reads again.
A stamp costs three stats.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict

KEEP = 1024          # selections kept (least recently used dropped)

_commits: dict = {}  # (st_dev, st_ino) of a store file -> commits this process made to it
_commits_lock = threading.Lock()


def _stat(path) -> tuple | None:
    """(device, inode, size, mtime) of `path`; None where there is no file.  A path that
    cannot be reached (a folder without permission) is not 'no store': its stamp is the
    error, so that opening it is tried and its reader warns."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return ("unreachable", e.errno, None, None)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def changed(store_path) -> None:
    """Note a commit this process made to the store at `store_path`."""
    st = _stat(store_path)
    if st is not None:
        with _commits_lock:
            _commits[st[:2]] = _commits.get(st[:2], 0) + 1


class SelectionMemo:
    def __init__(self, keep: int = KEEP):
        self._keep = keep
        self._values: OrderedDict = OrderedDict()       # key -> (stamp, value)
        self._model_paths: dict = {}                     # (store, backend, device, hash) -> model file
        self._lock = threading.Lock()

    def stamp(self, store_path, backend: str, device: str, template_hash: str,
              store_stamp=False) -> tuple:
        """What a selection read from the store at `store_path` depends on;
        `store_stamp`: the store's part, when the caller has just taken it."""
        spath = str(store_path)
        mkey = (spath, backend, device, template_hash)
        mpath = self._model_paths.get(mkey)
        if mpath is None:
            from .perfmodel.saved import model_path
            if len(self._model_paths) > 256:
                self._model_paths.clear()
            mpath = self._model_paths[mkey] = str(model_path(spath, backend, device, template_hash))
        if store_stamp is False:
            store_stamp = self.store_stamp(spath)
        return store_stamp, _stat(mpath)

    @staticmethod
    def store_stamp(path: str):
        """The store's part of a stamp (None: no file at `path`)."""
        st = _stat(path)
        if st is None:
            return None
        return st, _stat(path + "-wal"), _commits.get(st[:2], 0)


    def get(self, key, stamp):
        with self._lock:
            kept = self._values.get(key)
            if kept is None or kept[0] != stamp:
                return None
            self._values.move_to_end(key)
            return kept[1]

    def put(self, key, stamp, value):
        """Keep `value` under `stamp`; returns `value`."""
        with self._lock:
            self._values[key] = (stamp, value)
            self._values.move_to_end(key)
            while len(self._values) > self._keep:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
