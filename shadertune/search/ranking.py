"""The model strategy's ranking of a whole space, in a child process where it can be.

Ranking enumerates the pruned space and predicts every config (a CUDA space: 80,000 to
280,000 configs, seconds of CPU a problem), all of it holding the interpreter lock that
the other searches of a table, and a cluster coordinator's event loop, need to dispatch
their evaluations.  Where the backend offers a host predictor (Backend.host_predictor: a
picklable model over its device's limits) and cloudpickle is installed (Dask's pickler: a
space carries its rules' closures), the ranking runs in a spawned process (spawned, not
forked: the caller may hold a GPU context) and the search's thread waits for it without
the lock.  The list is the one ranked() makes in process; a child that cannot rank (it
died, the space did not pickle) leaves the ranking to the caller.
"""
from __future__ import annotations

import functools
import multiprocessing
import random
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence

from ..core.children import quiet_child
from ..core.config import Config
from ..core.cpus import usable_cpus
from .options import SearchOptions

# Children ranking at once (a table ranks its problems side by side), at most.
MAX_CHILDREN = 4

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def ranked(configs: Sequence[Config], pred: Sequence[float]) -> list[Config]:
    """`configs` by prediction, one per distinct prediction (3 significant digits): the
    first of them in `configs`' order."""
    out, seen = [], set()
    for i in sorted(range(len(configs)), key=lambda i: (pred[i], i)):
        key = float(f"{pred[i]:.3g}")
        if key not in seen:
            seen.add(key)
            out.append(configs[i])
    return out


def sampled(configs: list[Config], limit: int, seed: int) -> list[Config]:
    """At most `limit` configs: a seeded uniform sample beyond it."""
    return random.Random(seed).sample(configs, limit) if len(configs) > limit else configs


def rank_configs(configs: list[Config], options: SearchOptions) -> list[Config] | None:
    """`configs` (options.rank_limit of them at most) ranked by options' cost model; None
    where it predicts nothing."""
    configs = sampled(configs, options.rank_limit, options.seed)
    pred = options.predict(configs)
    return None if pred is None else ranked(configs, pred)


def child_ranker(problem, host_predictor: Callable, seed: int, limit: int) -> "ChildRanker | None":
    """A ChildRanker of `problem`'s spaces with the predictor host_predictor() gives
    when a ranking starts; None where cloudpickle is missing."""
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        return None
    return ChildRanker(problem, host_predictor, seed, limit)


class ChildRanker:
    """Ranks a space in a child process.  start(space) sends the ranking off and returns
    wait(), to be called once, which gives the ranked list (None: no child could rank,
    rank here); a search starts it when it begins, so the child ranks while the first
    evaluations run.  ranker(space) is start(space)()."""

    def __init__(self, problem, host_predictor: Callable, seed: int, limit: int):
        self.problem, self.host_predictor, self.seed, self.limit = problem, host_predictor, seed, limit

    def start(self, space) -> Callable[[], list[Config] | None]:
        import cloudpickle
        predictor = self.host_predictor()
        if predictor is None:
            return lambda: None
        try:
            payload = cloudpickle.dumps((space, predictor, self.problem, self.seed, self.limit))
            fut = children().submit(_rank_in_child, payload)
        except Exception:       # pickling, a broken pool: the caller ranks
            forget_children()
            return lambda: None

        def wait() -> list[Config] | None:
            try:
                out, size = fut.result()
            except Exception:       # a dead child, its error: the caller ranks
                forget_children()
                return None
            space.note_count(size)  # the report's pruned size, counted by the same walk
            return out
        return wait

    def __call__(self, space) -> list[Config] | None:
        return self.start(space)()


# A space whose knob product is at least this large is counted in a child (CUDA's, 10^9
# and more: seconds of walk); a smaller one here (GL's, ~2 x 10^8: half a second).
CHILD_COUNT_FROM = 10 ** 9


def count(space) -> int:
    """len(space), in a child process where the walk is long and nothing counted it yet."""
    if space.count_known or space.full_size < CHILD_COUNT_FROM:
        return len(space)
    n = child_count(space)
    if n is None:
        return len(space)
    space.note_count(n)
    return n


def child_count(space) -> int | None:
    """len(space), counted in a child process (None: it could not; count here)."""
    try:
        import cloudpickle
        return children().submit(_count_in_child, cloudpickle.dumps(space)).result()
    except Exception:
        forget_children()
        return None


def _rank_in_child(payload: bytes) -> tuple[list[Config] | None, int]:
    import cloudpickle
    space, predictor, problem, seed, limit = cloudpickle.loads(payload)
    every = space.configs()
    options = SearchOptions(seed=seed, rank_limit=limit, cost_model=functools.partial(predictor, problem))
    return rank_configs(every, options), len(every)


def _count_in_child(payload: bytes) -> int:
    import cloudpickle
    return len(cloudpickle.loads(payload))


def children() -> ProcessPoolExecutor:
    """The spawned processes that rank and count (a cluster worker's rankings too),
    started at the first use and kept."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(max(1, min(MAX_CHILDREN, usable_cpus())),
                                        mp_context=multiprocessing.get_context("spawn"),
                                        initializer=quiet_child)
        return _pool


def forget_children() -> None:
    """Shut the children down (one died, or could not take a task): the next use starts
    them again."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None
