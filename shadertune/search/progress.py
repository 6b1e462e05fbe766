"""Progress of a search on stderr, one problem at a time.

In a notebook (a Jupyter kernel with ipywidgets, as tqdm.auto finds it): tqdm's
widget bar, with the same facts.  On a terminal: a tqdm bar (count of evaluations out of the budget with its ETA;
with a time limit alone, the time out of the limit), the problem's place in the
table (2/3), the current phase, evaluations replayed from the store and the best
GFLOP/s so far.  The bar itself is BAR_WIDTH characters whatever the text beside
it (a phase label that grows or shrinks does not move it), and each line is cut at
the terminal's width.  Elsewhere (CI logs, notebooks, pipes, and a terminal that
reports no width: a pseudo-terminal of a container or a CI runner): the same facts
as plain lines, one when a problem starts, one every `interval` seconds and one
when it ends.  mode "off" (the CLI's -q) writes nothing.  A cluster's progress (a table
on several workers) names the worker of each evaluation: the bar and the lines
then count evaluations per worker too.
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter

from tqdm import tqdm

PREFIX = "shadertune.search"
BAR_WIDTH = 24          # characters of the bar itself, fixed while the text beside it changes


def terminal_width(stream) -> int:
    """The width of the terminal `stream` writes to; 0 when it is none or reports none."""
    isatty = getattr(stream, "isatty", None)
    try:
        if isatty is None or not isatty():
            return 0
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def notebook_bar():
    """tqdm's notebook bar class where this process is a Jupyter kernel that can show
    widgets (tqdm.autonotebook's rule, as tqdm.auto uses it), else None."""
    from tqdm.autonotebook import tqdm as auto
    return None if auto is tqdm else auto


def fmt_seconds(s: float) -> str:
    return tqdm.format_interval(max(0.0, s))


class Progress:
    def __init__(self, label: str, *, index: int = 1, count: int = 1, total: int | None = None,
                 time_limit: float | None = None, stream=None, mode: str | None = None,
                 interval: float = 10.0, clock=time.monotonic):
        self.stream = stream or sys.stderr
        widget = notebook_bar() if mode is None and stream is None else None
        if mode is None:
            mode = "bar" if widget is not None or terminal_width(self.stream) > 0 else "lines"
        if mode not in ("bar", "lines", "off"):
            raise ValueError(f"progress mode must be bar, lines or off, got {mode!r}")
        self.mode = mode
        self.label = f"{index}/{count} {label}" if count > 1 else label
        self.total = total
        self.time_limit = time_limit
        self.interval = interval
        self.clock = clock
        self.n = 0
        self.cached = 0
        self.best_gflops: float | None = None
        self.phase_label: str | None = None
        self.per_worker: Counter = Counter()       # a cluster's measured evaluations
        self.t0 = clock()
        self._last_line = self.t0
        self._bar = None
        self._by_time = total is None and time_limit is not None
        if mode == "bar" and widget is not None:
            # the notebook's widget draws the bar itself ({bar}: its progress element)
            self._bar = widget(total=time_limit if self._by_time else total, desc=self.label,
                               leave=True, mininterval=0.1, unit="eval",
                               bar_format=("{l_bar}{bar}| {elapsed}<{remaining} {postfix}"
                                           if self._by_time else None))
        elif mode == "bar":
            by_time = self._by_time
            # a bar of fixed width ({bar:N}); the line is cut at the terminal's width
            # (ncols, followed as the terminal is resized: dynamic_ncols)
            self._bar = tqdm(total=time_limit if by_time else total, desc=self.label,
                             file=self.stream, leave=True, dynamic_ncols=True, mininterval=0.1,
                             unit="eval",
                             bar_format=(f"{{l_bar}}{{bar:{BAR_WIDTH}}}| {{elapsed}}<{{remaining}} {{postfix}}"
                                         if by_time else f"{{l_bar}}{{bar:{BAR_WIDTH}}}{{r_bar}}"))
        elif mode == "lines":
            limits = [f"budget {total} evaluations" if total else "",
                      f"time limit {fmt_seconds(time_limit)}" if time_limit else ""]
            self._write(f"searching ({', '.join(x for x in limits if x) or 'no limit'})")

    # --- events ---------------------------------------------------------------
    def phase(self, label: str) -> None:
        self.phase_label = label
        self._draw()

    def update(self, result, cached: bool = False, worker: str | None = None) -> None:
        self.n += 1
        self.cached += bool(cached)
        if worker is not None:
            self.per_worker[worker] += 1
        g = result.gflops
        if g is not None and (self.best_gflops is None or g > self.best_gflops):
            self.best_gflops = g
        if self._bar is not None:
            if self._by_time:
                self._bar.n = min(self.clock() - self.t0, self.time_limit)
            else:
                self._bar.update(1)
            self._draw()
        elif self.mode == "lines" and self.clock() - self._last_line >= self.interval:
            self._write(self.status())

    def close(self, *, incomplete: bool = False) -> None:
        if self._bar is not None:
            self._draw()
            self._bar.close()
            self._bar = None
        elif self.mode == "lines":
            what = "stopped" if incomplete else "done"
            self._write(f"{what}: {self.n} evaluations{self._cached()} in "
                        f"{fmt_seconds(self.clock() - self.t0)}, {self._best()}"
                        + (f", {self.workers()}" if self.per_worker else ""))
        self.mode = "off"

    # --- text ---------------------------------------------------------------
    def eta(self) -> float | None:
        """Seconds left: by the evaluation rate out of the budget, and at most the time limit."""
        elapsed = self.clock() - self.t0
        left = []
        if self.total and self.n:
            left.append(elapsed / self.n * max(0, self.total - self.n))
        if self.time_limit:
            left.append(self.time_limit - elapsed)
        return max(0.0, min(left)) if left else None

    def _cached(self) -> str:
        return f" ({self.cached} cached)" if self.cached else ""

    def workers(self) -> str:
        """'per worker: gpu0 12, gpu1 11' (names in order)."""
        return "per worker: " + ", ".join(f"{w} {n}" for w, n in sorted(self.per_worker.items()))

    def _best(self) -> str:
        return f"best {self.best_gflops:.2f} GFLOP/s" if self.best_gflops is not None else "best -"

    def status(self) -> str:
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        eta = self.eta()
        parts = [f"{count} evaluations{self._cached()}", self._best()]
        if self.phase_label:
            parts.append(f"phase {self.phase_label}")
        if self.per_worker:
            parts.append(self.workers())
        parts.append(fmt_seconds(self.clock() - self.t0)
                     + (f", about {fmt_seconds(eta)} left" if eta is not None else ""))
        return ", ".join(parts)

    def _draw(self) -> None:
        if self._bar is None:
            return
        parts = [self._best()]
        if self.cached:
            parts.append(f"{self.cached} cached")
        if self._by_time:
            parts.insert(0, f"{self.n} evals")
        elif self.time_limit:
            parts.append(f"{fmt_seconds(self.time_limit - (self.clock() - self.t0))} to the limit")
        if self.phase_label:
            parts.append(self.phase_label)
        if self.per_worker:
            parts.append(self.workers())
        self._bar.set_postfix_str(", ".join(parts), refresh=True)

    def _write(self, text: str) -> None:
        self._last_line = self.clock()
        self.stream.write(f"{PREFIX}: {self.label}: {text}\n")
        self.stream.flush()


class InterruptGuard:
    """Ctrl-C during a search: the first stops the search (KeyboardInterrupt, raised
    where the search is); the next ones, while it stops and writes its table and report,
    are noted on stderr and not raised, so that what was measured is still reported and
    the tool exits 130 (a second Ctrl-C close behind the first once ended the process
    in a traceback with no report).  Past FORCE of them (the third) it raises again:
    a stop that hangs can still be interrupted.  Installed only in the main thread (the
    only one Python delivers signals to); the previous handler is restored on exit."""

    FORCE = 2

    def __init__(self, stream=None):
        self.stream = stream
        self.count = 0
        self._old = None

    def _handle(self, signum, frame) -> None:
        self.count += 1
        if self.count == 1 or self.count > self.FORCE:
            raise KeyboardInterrupt
        left = self.FORCE - self.count + 1
        try:
            print(f"{PREFIX}: interrupted again: writing what was measured (Ctrl-C {left} more "
                  f"time{'s' * (left > 1)} stops at once)", file=self.stream or sys.stderr, flush=True)
        except (OSError, ValueError):
            pass

    def __enter__(self) -> "InterruptGuard":
        import signal
        import threading
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        import signal
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None
