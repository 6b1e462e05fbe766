"""Re-verification on first use: a config `auto` took from a measurement made
elsewhere is run and checked against float64 once before matmul trusts it.

What needs it (Selection.recheck): a result stored for this renderer under another
driver or GL profile (its device key differs), and a row of the pre-tuned table not
measured on this device key and template hash.  Such a config was verified where
it was measured, not here: a driver update can change what a kernel computes.

How: the search's own Evaluator (search/evaluate.py) builds the kernel, runs it
once on the search's seeded inputs, checks it against the float64 reference
within the dtype's tolerance, and times it (one warm run); nothing is stored.

Decision: the verdict is kept in this process only, per (backend, device key,
template hash, problem, config, tolerance), never written to the store.  `auto`
reads and never writes (docs/semantics.md): a store may be read-only or shared,
and a verdict of one run is not a tuning result (one timing, no search).  The
cost is one checked run of each such config per process (and its float64
reference: about a second at 2048 on a laptop's cores); `shadertune.tune()` or
`tune="first-use"` makes the shape's result this device's own, and the check goes.

A config that fails is not run: the selection falls to the backend's default
config, with a warning naming the config and why.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from ..core.problem import Problem
from ..core.result import Result
from ..search.evaluate import Evaluator

log = logging.getLogger("shadertune.select")

_verdicts: dict[tuple[Any, ...], Result] = {}
_lock = threading.Lock()


def _key(backend: Any, problem: Problem, config: Any, tolerance: float | None) -> tuple[Any, ...]:
    return (backend.name, backend.device().key, backend.template_hash(), problem, config, tolerance)


def known(backend: Any, problem: Problem, config: Any, tolerance: float | None = None) -> Result | None:
    """The verdict this process holds for the config, None when it was not checked yet."""
    return _verdicts.get(_key(backend, problem, config, tolerance))


def verify(backend: Any, problem: Problem, config: Any, tolerance: float | None = None) -> Result:
    """The verdict of one checked run of `config` (kept: a second call returns it)."""
    key = _key(backend, problem, config, tolerance)
    r = _verdicts.get(key)
    if r is None:
        r = Evaluator(backend, problem, store=None, tolerance=tolerance, repeats=1, warmup=0)(config)
        with _lock:
            _verdicts[key] = r
        if r.ok:
            log.info("re-verified %s for %s on %s: error %.1e", config.text(), problem.label,
                     backend.device().key, r.error or 0.0)
    return r


def forget() -> None:
    """Drop the verdicts kept in this process."""
    with _lock:
        _verdicts.clear()


__all__ = ["forget", "known", "verify"]
