"""Auto's selections kept for the life of the store's content.

A selection (chain.py) reads the store and, for the model rule, the learned
model saved beside it; with hundreds of results per problem that is
milliseconds a call (decoding results, building a space), paid by every
matmul(config="auto").  So a selection is kept per key with what it was read
from, and used again while that is unchanged:

- the store's content, as the store's change counter says (db/changes.py): the
  stamp of its files (two stats and this process's commit count) while it is
  older than a file-system clock tick and unmoved, else the counter in the file
  (the store's id and its count of result writes);
- the model file's identity, size and modification time (a model retrained by
  another process is a new file: saved.save replaces it).

A store without a counter (written before it, and opened read-only since) is
kept by its stamp alone, as before the counter.  What a selection was read from
is taken before the store is read: a write that lands during the read leaves
the selection older than the store, so the next call reads again.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..db import changes
from ..perfmodel.saved import model_path, model_stamp

KEEP = 1024          # selections kept (least recently used dropped)


class _Kept:
    __slots__ = ("stamp", "trusted", "content", "model", "value")

    def __init__(self, stamp, content, model, value):
        self.stamp, self.content, self.model, self.value = stamp, content, model, value
        # a stamp older than a clock tick is the content's; a younger one is checked
        # against the counter until it is old enough
        self.trusted = content is None or not changes.fresh(stamp)


class SelectionMemo:
    def __init__(self, keep: int = KEEP):
        self._keep = keep
        self._values: OrderedDict = OrderedDict()       # key -> _Kept
        self._model_paths: dict = {}                     # (store, backend, device, hash) -> model file
        self._lock = threading.Lock()

    def model_stamp(self, store_path: str, backend: str, device: str, template_hash: str):
        """The model file's part of what a selection read (its stat, None: no file)."""
        mkey = (store_path, backend, device, template_hash)
        mpath = self._model_paths.get(mkey)
        if mpath is None:
            if len(self._model_paths) > 256:
                self._model_paths.clear()
            mpath = self._model_paths[mkey] = str(model_path(store_path, backend, device, template_hash))
        return model_stamp(mpath)

    @staticmethod
    def store_stamp(path: str):
        """The store's stamp (None: no file at `path`): db/changes.stamp."""
        return changes.stamp(path)

    @staticmethod
    def content(path: str):
        """The store's change counter (id, count), None where it has none."""
        return changes.counter(path)

    def get(self, key, path: str, stamp, model):
        """The selection kept under `key` if what it was read from is unchanged, else None."""
        with self._lock:
            kept = self._values.get(key)
            if kept is None or kept.model != model:
                return None
            if kept.stamp == stamp and kept.trusted:
                self._values.move_to_end(key)
                return kept.value
        if kept.content is None:
            return None                  # no counter: a moved stamp is a change
        if changes.counter(path) != kept.content:
            return None
        with self._lock:                 # the same content: the new stamp stands for it
            kept.stamp, kept.trusted = stamp, not changes.fresh(stamp)
            self._values.move_to_end(key)
        return kept.value

    def put(self, key, stamp, content, model, value):
        """Keep `value`, read from the store with `stamp` and `content` and the model
        file `model` (all taken before the read); returns `value`."""
        with self._lock:
            self._values[key] = _Kept(stamp, content, model, value)
            self._values.move_to_end(key)
            while len(self._values) > self._keep:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
