"""OperandCache: inputs kept across the kernels of one search.

Packing a 4096 x 4096 operand into a texel layout takes about 0.1 s of CPU, and
most configs of a search pack A and B the same way (the layout depends on a
few knobs); a CUDA search keeps its inputs and their float64 reference on the
device instead of copying them for every config.  The evaluator's inputs never
change, so one search can prepare each form once.  Bounded by bytes (an item's
`nbytes` where it has one, as arrays do, else its len()), least recently used
out first.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict

_TOKENS = itertools.count(1)


class OperandCache:
    def __init__(self, max_bytes: int = 1 << 30):
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        # names this cache's operands in texture tags: textures tagged with it hold
        # these very inputs (an id() could be reused by a later cache)
        self.token = next(_TOKENS)
        self._items: OrderedDict = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key, default=None):
        data = self._items.get(key)
        if data is None:
            self.misses += 1
            return default
        self._items.move_to_end(key)
        self.hits += 1
        return data

    def __setitem__(self, key, data) -> None:
        size = _size(data)
        if size > self.max_bytes:
            return                       # would evict everything and still not fit
        old = self._items.pop(key, None)
        if old is not None:
            self.bytes -= _size(old)
        while self._items and self.bytes + size > self.max_bytes:
            _, evicted = self._items.popitem(last=False)
            self.bytes -= _size(evicted)
        self._items[key] = data
        self.bytes += size

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        return key in self._items


def _size(data) -> int:
    """Bytes an item holds: an array's nbytes (its len() counts rows), else len()."""
    nbytes = getattr(data, "nbytes", None)
    return int(nbytes) if nbytes is not None else len(data)
