"""Tuning on first use: matmul(A, B, config="auto", tune="first-use").

The first auto call for a problem with no verified result in the store times
up to `k` configs, in this order: the one `auto` would take without tuning
(the model's pick among verified configs, else the nearest shape's, else the
default), then the learned model's best predictions over the whole space (a
sample of it when large; without a model the backend's cost model, and
without that the sample's order: perfmodel.first_use_plan.ranked_space). Each is
built, verified against float64 and timed by the search core and every result
is stored, so the call after it (in this process or any other using the store)
is an exact hit.

Time bound: no evaluation starts after `seconds` (the float64 reference of the
problem, the ranking and a model training are counted in them); the one in
flight finishes. Off by default.  A problem is tuned at most once per process
and store, even when no config passed (its failures are in the store).

This is tuning, so it sits above `auto`'s selection (selection/chain.py, which only
reads): the front door's config resolution (requests.py) calls ensure_tuned()
before it selects.  It logs what it does on the "shadertune.first_use" logger.
"""
from __future__ import annotations

import logging
import pathlib
import threading
import time
import warnings

from ..db import Store, StoreError
from ..db.location import store_path
from ..perfmodel.first_use_plan import NAME, FirstUse, ranked_space
from ..perfmodel.measure import measure
from ..core.problem import Problem
from ..search import Budget
from ..selection.chain import select

log = logging.getLogger("shadertune.first_use")    # its documented name

_done: set = set()
_lock = threading.Lock()


def ensure_tuned(backend, problem: Problem, db, spec: FirstUse, *,
                 tolerance: float | None = None) -> list | None:
    """Tune `problem` as above unless the store has a verified result for it (within
    `tolerance`, None: the dtype's default) or it was tried in this process; the
    Results measured, or None when nothing was done.  A read-only store cannot
    keep what first use would measure: it warns once and tunes nothing."""
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
                              f"measures; {store.path} is read-only: {problem.label} is not tuned",
                              RuntimeWarning, stacklevel=3)
                return None
            log.info("tuning %s on first use on %s (%s): up to %d configs, at most %g s, "
                     "then stored in %s", problem.label, backend.name, device, spec.k, spec.seconds,
                     store.path)
            configs = first_use_configs(backend, problem, store, spec.k, tolerance=tolerance)
            results = measure(backend, problem, configs, store, tolerance=tolerance, since=t0,
                              budget=Budget(max_evals=spec.k, seconds=spec.seconds))
            ok = [r for r in results if r.ok]
            best = min(ok, key=lambda r: r.median_ms, default=None)
            log.info("tuned %s on first use: %d configs timed in %.1f s, %s", problem.label,
                     len(results), time.monotonic() - t0,
                     f"the fastest {best.median_ms:.4g} ms ({best.gflops:.3g} GFLOP/s)" if best
                     else "none verified")
            return results
        except StoreError as e:
            warnings.warn(f"shadertune: tune={NAME!r} stopped: {e}", RuntimeWarning, stacklevel=3)
            return None
        finally:
            if store is not db:
                store.close()


def first_use_configs(backend, problem: Problem, store, k: int, *,
                      tolerance: float | None = None) -> list:
    """The up to `k` configs first-use tuning times, best candidate first."""
    chosen = select(backend, problem, store, tolerance=tolerance)
    default = backend.default_config(problem)
    order = ranked_space(backend, problem, store, [chosen.config, default])
    return list(dict.fromkeys([chosen.config, default, *order]))[:k]
