"""KernelCache: the built kernels matmul keeps, few and released when they go.

A kernel holds device resources (a GL program and its textures, a loaded CUDA
module), so the cache is small and least-recently-used first out, and every
kernel it drops is released at once rather than left to the garbage collector
(functools.lru_cache would keep them all alive for the life of the backend).
A GL kernel must be released in the thread whose context made it: matmul keeps
one cache per GL backend, and GL backends per thread.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from ..backends.base import Kernel

DEFAULT_SIZE = 8


class KernelCache:
    def __init__(self, size: int = DEFAULT_SIZE):
        if size < 1:
            raise ValueError(f"a kernel cache holds at least 1 kernel, got size={size}")
        self.size = size
        self._kernels: OrderedDict[Hashable, Kernel] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable, build: Callable[[], Kernel]) -> Kernel:
        """The kernel cached under `key`, else build() it, keep it and release the
        least recently used one past `size`."""
        with self._lock:
            k = self._kernels.get(key)
            if k is not None:
                self._kernels.move_to_end(key)
                return k
            k = build()
            self._kernels[key] = k
            while len(self._kernels) > self.size:
                _, old = self._kernels.popitem(last=False)
                old.release()
            return k

    def touch(self, key: Hashable, kernel: Kernel) -> bool:
        """Whether `kernel` is still the one cached under `key` (not dropped and
        released); if so it becomes the most recently used, as get() makes it."""
        with self._lock:
            if self._kernels.get(key) is not kernel:
                return False
            self._kernels.move_to_end(key)
            return True

    def clear(self) -> None:
        """Release every cached kernel."""
        with self._lock:
            while self._kernels:
                _, k = self._kernels.popitem()
                k.release()

    def __len__(self) -> int:
        return len(self._kernels)

    def __contains__(self, key) -> bool:
        return key in self._kernels
