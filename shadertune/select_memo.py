"""Auto's selections kept for the life of the store's content.

A selection (select.py) reads the store and, for the model rule, the learned
model saved beside it; with hundreds of results per problem that is
milliseconds a call (decoding results, building a space), paid by every
matmul(config="auto").  So a selection is kept per key with a stamp of what it
was read from, and used again while the stamp is unchanged:

- the store's content: SQLite's PRAGMA data_version on a read-only connection
  kept for the store file (it changes whenever another connection, in this
  process or another, commits), with the file's identity (device, inode: a
  store deleted and made again is another file).  Where no read-only
  connection can be opened (a WAL store in a folder this process may not
  write), the stamp is the size and modification time of the store and its
  write-ahead log instead;
- the model file's identity, size and modification time (a model retrained by
  another process).

The stamp is taken before the store is read: a write that lands during the read
leaves the selection stamped older than the store, so the next call reads again.
A stamp costs a few microseconds (two stats and one PRAGMA).
"""
from __future__ import annotations

import os
import pathlib
import sqlite3
import threading
import urllib.parse
from collections import OrderedDict

KEEP = 1024          # selections kept (least recently used dropped)
WATCHED = 16         # store files with a kept connection


def _stat(path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class _Watch:
    """A read-only connection to one store file, to ask whether it changed."""

    def __init__(self, path: str, ident: tuple):
        self.ident = ident
        self.pid = os.getpid()
        self.lock = threading.Lock()
        uri = "file:" + urllib.parse.quote(str(pathlib.Path(path).resolve())) + "?mode=ro"
        try:
            self.conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=1.0)
        except sqlite3.Error:
            self.conn = None

    def version(self):
        """The store's data_version on this connection, or None when it cannot be read."""
        if self.conn is None:
            return None
        with self.lock:
            try:
                return self.conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error:
                return None

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None


class SelectionMemo:
    def __init__(self, keep: int = KEEP, watched: int = WATCHED):
        self._keep, self._watched = keep, watched
        self._values: OrderedDict = OrderedDict()       # key -> (stamp, value)
        self._watches: OrderedDict = OrderedDict()      # store path -> _Watch
        self._lock = threading.Lock()
        # connections a forked child inherited: never used, never closed (SQLite's
        # connections do not survive fork)
        self._left_in_parent: list = []

    def stamp(self, store_path, backend: str, device: str, template_hash: str) -> tuple:
        from .perfmodel.saved import model_path
        return (self._store_stamp(str(store_path)),
                _stat(model_path(store_path, backend, device, template_hash)))

    def _store_stamp(self, path: str):
        st = _stat(path)
        if st is None:
            return None
        ident = st[:2]
        with self._lock:
            w = self._watches.get(path)
            if w is not None and w.pid != os.getpid():
                self._left_in_parent.extend(self._watches.values())
                self._watches.clear()
                w = None
            if w is None or w.ident != ident:
                if w is not None:
                    w.close()
                w = self._watches[path] = _Watch(path, ident)
                while len(self._watches) > self._watched:
                    self._watches.popitem(last=False)[1].close()
            self._watches.move_to_end(path)
        v = w.version()
        if v is not None:
            return ident, v
        return st, _stat(path + "-wal")

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
