"""Tune a table of problems on a cluster: every problem on every device group.

Each search stays sequential in its logic (tune() through the group's
RemoteBackend with a ClusterEvaluator); a group runs up to twice as many of its
problems side by side as it has workers (SEARCHES_PER_WORKER), so that while
one search waits for the last config of a batch, or steps one config at a
time, the others keep every worker busy.  Each search writes through its
own store connection (SQLite connections stay in their thread); the coordinator
process is the store's only writer.
"""
from __future__ import annotations

import pathlib
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Callable

from ..backends.base import DeviceInfo
from ..core.problem import Problem
from ..search.budget import Budget
from ..perfmodel.guided import tune
from .coordinator import Cancelled, Coordinator, DeviceGroup
from .evaluator import ClusterEvaluator

# a search's on_result: (result, from_store, worker name or None)
OnResult = Callable[..., None]
# searches a group runs side by side, per worker it has
SEARCHES_PER_WORKER = 2


def tune_table(coordinator: Coordinator, problems: list[Problem], *, strategy: str | None = None,
               budget: Budget | Callable[[DeviceInfo], Budget] | None = None,
               store_path: str | pathlib.Path | None = None, retune: bool = False,
               repeats: int = 10, warmup: int = 2, seed: int = 0, tolerance: float | None = None,
               on_search: Callable[[DeviceGroup, Problem], OnResult | None] | None = None,
               finished: dict | None = None,
               timings: dict | None = None) -> list[tuple[DeviceGroup, list[dict]]]:
    """[(group, report entries in the order of `problems`)] for each device group.

    strategy None: the backend's default.  budget: one for every search, or a
    function of the device giving its searches' (a software renderer's time limit).
    on_search(group, problem) is called as a search starts, in its thread, and
    returns that search's on_result(result, from_store, worker) or None.  finished,
    when given, gets {(group, problem): entry} as each search ends: what a caller
    still has when the table stops part-way.  timings, when given, gets
    {(group, problem): ClusterEvaluator.timings} (where the cluster's time went).
    The first error of any search
    (ContextError, StoreError, ...) stops the others and is raised; what was
    measured is in the store."""
    coordinator.cancelled.clear()
    groups = sorted(coordinator.groups.values(), key=lambda g: min(g.live.values(), default=""))
    budget_for = budget if callable(budget) else (lambda device: budget)
    budgets = {g.resource: budget_for(g.device) for g in groups}

    def one(group: DeviceGroup, problem: Problem) -> dict:
        from ..db import Store
        on_result = on_search(group, problem) if on_search is not None else None
        store = Store(store_path) if store_path is not None else None
        try:
            ev = ClusterEvaluator(group, problem, store=store, retune=retune, tolerance=tolerance,
                                  repeats=repeats, warmup=warmup, seed=seed, on_result=on_result)
            if timings is not None:
                timings[group, problem] = ev.timings
            entry = tune(group.backend, problem, strategy=strategy, budget=budgets[group.resource],
                         store=store, seed=seed, evaluator=ev)
        finally:
            if store is not None:
                store.close()
        if finished is not None:
            finished[group, problem] = entry
        return entry

    pools = [ThreadPoolExecutor(max(1, min(len(problems), SEARCHES_PER_WORKER * len(g.live))),
                                thread_name_prefix="shadertune-search") for g in groups]
    try:
        jobs = [[pool.submit(one, g, p) for p in problems] for g, pool in zip(groups, pools)]
        flat = [f for fs in jobs for f in fs]
        wait(flat, return_when=FIRST_EXCEPTION)
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
