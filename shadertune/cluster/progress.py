"""Progress of a cluster search: evaluations per worker and in total, one line on stderr."""
from __future__ import annotations

import threading
from collections import Counter

from ..search.progress import Progress


class ClusterProgress(Progress):
    """Progress whose update also takes the worker (ClusterEvaluator's on_result);
    safe to call from the table's search threads."""

    def __init__(self, label: str, total: int | None = None, stream=None, enabled: bool | None = None):
        super().__init__(label, total, stream, enabled)
        self.per_worker: Counter = Counter()
        self._lock = threading.Lock()

    def update(self, result, cached: bool = False, worker: str | None = None) -> None:
        with self._lock:
            if worker is not None:
                self.per_worker[worker] += 1
            super().update(result, cached)

    def workers_line(self) -> str:
        """'gpu0 12, gpu1 11' in worker order, or '-' before any evaluation."""
        return ", ".join(f"{w} {n}" for w, n in sorted(self.per_worker.items())) or "-"

    def line(self, width: int = 24) -> str:
        return f"{super().line(width)}  per worker: {self.workers_line()}"

    def summary(self) -> str:
        """The closing line: evaluations per worker and in total."""
        measured = self.n - self.cached
        stored = f", {self.cached} replayed from the store" if self.cached else ""
        return (f"evaluations per worker: {self.workers_line()}; total {measured} "
                f"measured{stored}")
