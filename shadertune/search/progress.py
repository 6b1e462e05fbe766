"""A one-line progress bar on stderr (no dependency); drawn only on a terminal."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, total: int | None = None, stream=None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.total = total
        self.n = 0
        self.cached = 0
        self.best_gflops: float | None = None
        self.t0 = time.monotonic()
        self._last = 0.0

    def update(self, result, cached: bool = False) -> None:
        self.n += 1
        self.cached += bool(cached)
        g = result.gflops
        if g is not None and (self.best_gflops is None or g > self.best_gflops):
            self.best_gflops = g
        now = time.monotonic()
        if now - self._last >= 0.1:        # redraw at most 10 times a second
            self._last = now
            self.draw()

    def line(self, width: int = 24) -> str:
        if self.total:
            done = min(self.n / self.total, 1.0)
            bar = "[" + "#" * int(done * width) + "." * (width - int(done * width)) + "] "
            count = f"{self.n}/{self.total}"
        else:
            bar, count = "", f"{self.n}"
        best = f"best {self.best_gflops:.2f} GFLOP/s" if self.best_gflops is not None else "best -"
        cached = f" ({self.cached} cached)" if self.cached else ""
        return f"{self.label} {bar}{count}{cached}  {best}  {time.monotonic() - self.t0:.1f}s"

    def draw(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K" + self.line())
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.draw()
            self.stream.write("\n")
            self.stream.flush()
