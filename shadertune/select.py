"""Auto-selection: the config matmul(config="auto") runs for a device and shape.

    select_config(backend, problem, db=None) -> (Config, how)

`how` says where the config came from:

- 'exact': the fastest correct stored result for this backend, device
  (renderer | driver), template hash and problem (shape, dtype, trans).
- 'nearest': else, among stored problems with the same backend, device,
  template hash, dtype and trans flags, the one nearest in shape by
      d = |log2(M'/M)| + |log2(N'/N)| + |log2(K'/K)|
  (ties: the smaller M', N', K'), whose fastest stored config that is valid for
  the new problem (backend.space(problem).why_invalid(cfg) is None) is taken;
  a tuned shape with no such config is passed over for the next nearest.
- 'default': else backend.default_config(problem).

Only results correct under the default tolerance of the problem's dtype count
(stored errors are judged again: shadertune.verdict).

`db` is a Store, a path, or None for the default store (see shadertune.db).
A missing store file is not created; a read-only one is read; an unusable one
(other schema, not a database, not a store's tables, an undecodable result)
warns and falls back to the default, since matmul must still work.
"""
from __future__ import annotations

import math
import os
import pathlib
import warnings

from .config import Config
from .problem import Problem


def shape_distance(a: Problem, b: Problem) -> float:
    """Sum of |log2| ratios of M, N, K (dimensions of 0 count as 1)."""
    return sum(abs(math.log2(max(x, 1) / max(y, 1)))
               for x, y in ((a.M, b.M), (a.N, b.N), (a.K, b.K)))


def select_config(backend, problem: Problem, db=None) -> tuple[Config, str]:
    from .db import Store, StoreError, default_path
    store, owned = db, False
    if not isinstance(db, Store):
        path = pathlib.Path(db).expanduser() if db is not None else default_path()
        if not os.path.exists(path):
            return backend.default_config(problem), "default"
        try:
            store, owned = Store(path), True
        except StoreError as e:
            return _ignoring(e, backend, problem)
    try:
        found = _from_store(backend, problem, store)
    except StoreError as e:
        return _ignoring(e, backend, problem)
    finally:
        if owned:
            store.close()
    return found if found is not None else (backend.default_config(problem), "default")


def _ignoring(e, backend, problem: Problem) -> tuple[Config, str]:
    warnings.warn(f"shadertune: ignoring the tuning store: {e}", RuntimeWarning, stacklevel=3)
    return backend.default_config(problem), "default"


def _from_store(backend, problem: Problem, store) -> tuple[Config, str] | None:
    device, th = backend.device().key, backend.template_hash()
    space = None
    tuned = [p for p in store.tuned_problems(backend.name, device, th)
             if (p.dtype, p.trans_a, p.trans_b) == (problem.dtype, problem.trans_a, problem.trans_b)]
    tuned.sort(key=lambda p: (shape_distance(p, problem), p.M, p.N, p.K))
    for p in tuned:
        if space is None:
            space = backend.space(problem)
        for r in store.ranked(backend.name, device, p, th):
            if space.why_invalid(r.config) is None:
                return r.config, "exact" if p == problem else "nearest"
    return None
