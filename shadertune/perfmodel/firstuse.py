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
problem is counted in them); the one in flight finishes. Off by default.
A problem is tuned at most once per process and store, even when no config
passed (its failures are in the store).
"""
from __future__ import annotations

import pathlib
import random
import threading
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


def check(tune, config) -> FirstUse | None:
    """parse(tune), and tune needs config='auto' (it fills what auto reads)."""
    spec = parse(tune)
    if spec is not None and not (isinstance(config, str) and config == "auto"):
        raise ValueError(f"matmul: tune={tune!r} needs config='auto', got config={config!r}")
    return spec


_done: set = set()
_lock = threading.Lock()


def ensure_tuned(backend, problem: Problem, db, spec: FirstUse) -> list | None:
    """Tune `problem` as above unless the store has a verified result for it or it
    was tried in this process; the Results measured, or None when nothing was done."""
    from ..db import Store, StoreError, default_path
    if min(problem.M, problem.N, problem.K) < 1:
        return None
    path = db.path if isinstance(db, Store) else (pathlib.Path(db).expanduser() if db else default_path())
    device, th = backend.device().key, backend.template_hash()
    key = (str(path), backend.name, device, th, problem)
    if key in _done:         # tuned or found tuned before: a later call costs nothing here
        return None
    with _lock:
        if key in _done:
            return None
        try:
            store = db if isinstance(db, Store) else Store(path)
        except StoreError:
            return None      # select() warns about an unusable store and takes the default
        try:
            _done.add(key)
            if store.best(backend.name, device, problem, th) is not None:
                return None
            configs = first_use_configs(backend, problem, store, spec.k)
            from ..search import Budget
            from .measure import measure
            return measure(backend, problem, configs, store,
                           budget=Budget(max_evals=spec.k, seconds=spec.seconds))
        finally:
            if store is not db:
                store.close()


def first_use_configs(backend, problem: Problem, store, k: int) -> list:
    """The up to `k` configs first-use tuning times, best candidate first."""
    from ..select import select
    from .candidates import candidates
    from .saved import model_for
    chosen = select(backend, problem, store)
    model, _ = model_for(backend, store)
    space = backend.space(problem)
    seeds = [chosen.config, backend.default_config(problem)]
    if model is not None:
        seeds += model.verified_configs
    cands = candidates(space, seeds)
    if model is not None:
        order = [c for _, c in model.rank(problem, cands)]
    elif (ms := backend.predict_ms(problem, cands)) is not None:
        order = [cands[i] for i in sorted(range(len(cands)), key=lambda i: ms[i])]
    else:                    # nothing predicts: a seeded random sample
        order = list(cands)
        random.Random(0).shuffle(order)
    picked = []
    for c in dict.fromkeys([chosen.config, backend.default_config(problem), *order]):
        if len(picked) == k:
            break
        if _source_builds(backend, problem, c):      # no slot for a config its generator refuses
            picked.append(c)
    return picked


def _source_builds(backend, problem: Problem, cfg) -> bool:
    from ..errors import BuildError, InvalidConfig
    try:
        backend.source(problem, cfg)
    except (InvalidConfig, BuildError):
        return False
    return True
