"""Tuning on first use: matmul(A, B, config="auto", tune="first-use").

The first auto call for a problem with no verified result in the store times
up to `k` configs, in this order: the one `auto` would take without tuning
(the model's pick among verified configs, else the nearest shape's, else the
default), then the learned model's best predictions over the whole space (a
sample of it when large; without a model the backend's cost model, and
without that the sample's order). Each is built, verified against float64
and timed by the search core and every result is stored, so the call after it
(in this process or any other using the store) is an exact hit.

Time bound: no evaluation starts after `seconds` (the float64 reference of the
problem and the ranking are counted in them); the one in flight finishes. Off by
default.  A problem is tuned at most once per process and store, even when no
config passed (its failures are in the store).
"""
from __future__ import annotations

import random
import threading
import time
import warnings
from dataclasses import dataclass

from ..problem import Problem

NAME = "first-use"


@dataclass(frozen=True)
class FirstUse:
    k: int = 8               # configs timed at most
    seconds: float = 20.0    # no evaluation starts after this

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"FirstUse.k must be a positive int, got {self.k!r}")
        if not self.seconds > 0:
            raise ValueError(f"FirstUse.seconds must be positive, got {self.seconds!r}")


def parse(tune) -> FirstUse | None:
    """None / False: off; 'first-use' or True: FirstUse(); a FirstUse as given."""
    if tune is None or tune is False:
        return None
    if tune is True or (isinstance(tune, str) and tune == NAME):
        return FirstUse()
    if isinstance(tune, FirstUse):
        return tune
    raise ValueError(f"matmul: tune must be None, {NAME!r} or a shadertune.perfmodel.FirstUse, "
                     f"got {tune!r}")


_done: set = set()
_lock = threading.Lock()


def ensure_tuned(backend, problem: Problem, db, spec: FirstUse, *,
                 tolerance: float | None = None) -> list | None:
    """Tune `problem` as above unless the store has a verified result for it (within
    `tolerance`, None: the dtype's default) or it was tried in this process; the
    Results measured, or None when nothing was done.  A read-only store cannot
    keep what first use would measure: it warns once and tunes nothing."""
    from ..db import Store, StoreError
    from ..db.location import store_path
    if min(problem.M, problem.N, problem.K) < 1:
        return None
    t0 = time.monotonic()
    try:
        path = db.path if isinstance(db, Store) else store_path(db)
    except StoreError:
        return None          # no store to keep what it would measure: select() says why
    device, th = backend.device().key, backend.template_hash()
    key = (str(path), backend.name, device, th, problem, tolerance)
    if key in _done:         # tuned or found tuned before: a later call costs nothing here
        return None
    with _lock:
        if key in _done:
            return None
        _done.add(key)
        try:
            store = db if isinstance(db, Store) else Store(path)
        except StoreError:
            return None      # select() warns about an unusable store and takes the default
        try:
            if store.best(backend.name, device, problem, th, tolerance=tolerance) is not None:
                return None
            if store.readonly:
                warnings.warn(f"shadertune: tune={NAME!r} needs a writable store to keep what it "
                              f"measures; {store.path} is read-only: {problem.key} is not tuned",
                              RuntimeWarning, stacklevel=4)
                return None
            configs = first_use_configs(backend, problem, store, spec.k, tolerance=tolerance)
            from ..search import Budget
            from .measure import measure
            return measure(backend, problem, configs, store, tolerance=tolerance, since=t0,
                           budget=Budget(max_evals=spec.k, seconds=spec.seconds))
        except StoreError as e:
            warnings.warn(f"shadertune: tune={NAME!r} stopped: {e}", RuntimeWarning, stacklevel=4)
            return None
        finally:
            if store is not db:
                store.close()


def first_use_configs(backend, problem: Problem, store, k: int, *,
                      tolerance: float | None = None) -> list:
    """The up to `k` configs first-use tuning times, best candidate first."""
    from ..select import select
    chosen = select(backend, problem, store, tolerance=tolerance)
    default = backend.default_config(problem)
    order = ranked_space(backend, problem, store, [chosen.config, default])
    return list(dict.fromkeys([chosen.config, default, *order]))[:k]


def ranked_space(backend, problem: Problem, store, seeds=()) -> list:
    """Valid configs of `problem`, best predicted first: the whole space when small,
    else a sample (perfmodel.candidates) seeded with `seeds`, the configs the
    model has seen verified on this dtype and the backend's analytical candidate
    list; ranked by the learned model (trained on this dtype; not where it
    validated worse than the backend's cost model: PerfModel.prefers_analytical),
    else the backend's cost model, else in a seeded random order."""
    from ..select import analytical_candidates
    from .candidates import candidates
    from .saved import model_for
    model, _ = model_for(backend, store)
    if model is not None and not model.trained_on(problem.dtype):
        model = None
    space = backend.space(problem)
    seeds = (list(seeds) + (model.verified_configs(problem.dtype) if model is not None else [])
             + analytical_candidates(backend, problem, space))
    cands = candidates(space, seeds)
    if model is not None and not model.prefers_analytical():
        return [c for _, c in model.rank(problem, cands)]
    if (ms := backend.predict_ms(problem, cands)) is not None:
        return [cands[i] for i in sorted(range(len(cands)), key=lambda i: ms[i])]
    order = list(cands)      # nothing predicts
    random.Random(0).shuffle(order)
    return order
