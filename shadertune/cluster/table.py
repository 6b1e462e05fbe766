"""Tune a table of problems on a cluster: every problem on every device group.

Each search stays sequential in its logic (tune() with a ClusterEvaluator); a
group runs up to as many of its problems side by side as it has workers, so a
strategy step that asks for one config at a time still keeps the others busy.
Each search writes through its own store connection (SQLite connections stay
in their thread); the coordinator process is the store's only writer.
"""
from __future__ import annotations

import pathlib
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Callable

from ..problem import Problem
from ..search.budget import Budget
from ..search.tune import tune
from .coordinator import Cancelled, Coordinator, DeviceGroup
from .evaluator import ClusterEvaluator, RemoteBackend


def tune_table(coordinator: Coordinator, problems: list[Problem], *, strategy: str = "phased",
               budget: Budget | None = None, store_path: str | pathlib.Path | None = None,
               retune: bool = False, repeats: int = 10, warmup: int = 2, seed: int = 0,
               tolerance: float | None = None,
               on_result: Callable | None = None) -> list[tuple[DeviceGroup, list[dict]]]:
    """[(group, report entries in the order of `problems`)] for each device group.

    The first error of any search (ContextError, StoreError, ...) stops the others
    and is raised; what was measured is in the store."""
    coordinator.cancelled.clear()
    groups = sorted(coordinator.groups.values(), key=lambda g: min(g.live.values(), default=""))
    remotes = {g.resource: RemoteBackend(g) for g in groups}

    def one(group: DeviceGroup, problem: Problem) -> dict:
        from ..db import Store
        store = Store(store_path) if store_path is not None else None
        try:
            ev = ClusterEvaluator(group, problem, store=store, retune=retune, tolerance=tolerance,
                                  repeats=repeats, warmup=warmup, seed=seed, on_result=on_result)
            return tune(remotes[group.resource], problem, strategy=strategy, budget=budget,
                        seed=seed, evaluator=ev)
        finally:
            if store is not None:
                store.close()

    pools = [ThreadPoolExecutor(max(1, min(len(problems), len(g.live))),
                                thread_name_prefix="shadertune-search") for g in groups]
    try:
        jobs = [[pool.submit(one, g, p) for p in problems] for g, pool in zip(groups, pools)]
        flat = [f for fs in jobs for f in fs]
        done, _ = wait(flat, return_when=FIRST_EXCEPTION)
        failed = [f for f in flat if f.done() and not f.cancelled() and f.exception() is not None
                  and not isinstance(f.exception(), Cancelled)]
        if failed:
            coordinator.cancelled.set()
            raise failed[0].exception()
        return [(g, [f.result() for f in fs]) for g, fs in zip(groups, jobs)]
    except BaseException:
        coordinator.cancelled.set()      # the searches still running stop at their next step
        raise
    finally:
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)
