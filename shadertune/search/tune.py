"""Tune one problem: space -> strategy over an Evaluator -> the report's problem entry."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

from ..core.config import Config
from ..db.spaces import space_sizes
from ..core.problem import Problem
from ..core.result import Result
from .budget import Budget
from .evaluate import Evaluator, RecordingEvaluator
from .options import SearchOptions
from .ranking import child_ranker, count as count_space
from .registry import get_strategy
from .report_json import problem_entry


@dataclass(frozen=True)
class ProblemCostModel:
    """A cost model a search ranks by instead of the backend's own (Backend.predict_ms):
    predict(problem, configs) -> milliseconds per config (or None: no prediction).
    The search layer takes it as given; the learned one comes from above it
    (perfmodel.guided.search_cost_model)."""
    name: str                                   # what the entry's 'cost_model' says
    predict: Callable[[Problem, Sequence[Config]], "Sequence[float] | None"]
    rank_limit: int | None = None               # configs it ranks at most (a sample beyond)


def tune(backend, problem: Problem, *, strategy: str | None = None, budget: Budget | None = None,
         store=None, retune: bool = False, repeats: int = 10, warmup: int = 2, seed: int = 0,
         tolerance: float | None = None,
         on_result: Callable[[Result, bool], None] | None = None,
         on_phase: Callable[[str], None] | None = None,
         evaluator: RecordingEvaluator | None = None,
         cost_model: ProblemCostModel | None = None) -> dict:
    """Search `problem` on `backend`; return its report entry (see report_json).

    `strategy` None is the backend's default_strategy.  The strategy gets a cost
    model as a function of configs and the backend's candidate list
    (Backend.candidates) as seeds, never the backend.  The cost model is
    `cost_model` where given (shadertune.perfmodel.guided.tune passes the learned
    one saved beside the store), else the backend's own (Backend.predict_ms, None
    for GL); the entry's 'cost_model' says which ('learned' or 'backend').
    Results go to `store` as they are measured;
    on_phase hears the strategy's phase names; ContextError propagates.
    `evaluator` replaces the local Evaluator that the arguments from `retune` to
    `on_phase` make: a cluster's, which measures on its workers (shadertune.cluster)
    and was made with those settings itself."""
    if problem.batch > 1 and not backend.batched:
        raise ValueError(f"the {backend.name} backend tunes single products, not a batch of "
                         f"{problem.batch} ({problem.label}): batched problems are the CUDA backend's")
    search = get_strategy(strategy or backend.default_strategy)
    space = backend.space(problem)
    evaluate = evaluator if evaluator is not None else Evaluator(
        backend, problem, store=store, retune=retune, tolerance=tolerance, repeats=repeats,
        warmup=warmup, seed=seed, on_result=on_result, on_phase=on_phase)
    predict = cost_model.predict if cost_model is not None else backend.predict_ms
    # a slower model (the learned one: about 25,000 configs a second) ranks a smaller sample
    limit = {"rank_limit": cost_model.rank_limit} if cost_model is not None and cost_model.rank_limit else {}
    # the backend's own model ranks a space in a child process where it offers one that
    # travels (search/ranking.py); a learned model ranks here
    elsewhere = child_ranker(problem, backend.host_predictor, seed, SearchOptions.rank_limit) \
        if cost_model is None else None
    options = SearchOptions(seed=seed, cost_model=lambda configs: predict(problem, configs),
                            seeds=backend.candidates(problem, SearchOptions.top), rank_elsewhere=elsewhere,
                            **limit)
    # a backend may hold more between kernels while a search runs (GL: its texture pool)
    t0 = time.monotonic()
    finish = getattr(evaluate, "finish", None)   # configs timed ahead that ran on past the search
    with backend.search_session():
        try:
            results = search(space, evaluate, budget or Budget(), options)
        except BaseException:
            if finish is not None:
                finish(wait=False)
            raise
        if finish is not None:
            late = finish()
            if late:        # timed ahead and never collected by the search: counted as such
                evaluate.timed_ahead(timed=len(late))
            results = list(results) + late
    seconds = time.monotonic() - t0
    # The pruned size is counted (Space.count: no config made; the store keeps it):
    # after the search, so results start at once.
    size, full = space_sizes(store, backend, problem, space, count=count_space)
    entry = problem_entry(problem, results, space_size=size, full_space_size=full,
                          measured=evaluate.measured, cached=evaluate.cached, seconds=seconds,
                          stage_seconds=evaluate.stage_seconds,
                          phases=evaluate.phases)
    entry["cost_model"] = cost_model.name if cost_model is not None else "backend"
    if evaluate.ahead["timed"]:
        # on several workers: configs timed ahead beside the search's steps (Tracker.many),
        # and how many of them the search then asked for; the rest are extra evaluations
        entry["ahead"] = dict(evaluate.ahead)
    return entry

