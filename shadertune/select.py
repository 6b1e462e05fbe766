"""Auto-selection: the config matmul(config="auto") runs for a device and shape, and why.

    select(backend, problem, db=None) -> Selection     (config, how, the reason)
    select_config(backend, problem, db=None) -> (Config, how)

Auto reads: select takes the store and the learned model saved beside it as they
are; it never trains a model and never tunes (a search, first-use tuning and
`python -m shadertune.perfmodel train` write them).  For the operands of a call:
shadertune.explain(A, B), the front door's (explanation.py).

The chain, first rule that gives a config wins (`how`):

- 'exact': the fastest correct stored result for this backend, device
  (renderer | driver), template hash and problem (shape, dtype, trans) whose
  config is valid in today's space.
- 'model': else the learned performance model of this backend and device,
  as saved beside the store (shadertune.perfmodel; needs scikit-learn and a
  model trained on some problems of this dtype) ranks the
  candidates, and the one it predicts fastest is taken.  The candidates: the
  configs verified on some stored problem of this dtype (within the tolerance)
  that are valid for this one, and the backend's analytical candidate list for
  this problem (backend.candidates: its cost model's picks, headed by
  default_config).  matmul runs what auto picks without checking it, so
  nothing else is a candidate: a verified config was built and checked on this
  device, and one of the analytical list is exactly as safe to run as
  config="default", which runs that list's head untuned (first-use tuning,
  `tune="first-use"`, times and verifies picks from the whole space instead;
  docs/perfmodel.md says why).
- 'analytical': instead of 'model', where the learned model's picks were not
  reliably at least as fast as the backend's default config (its analytical
  cost model's pick, what config='default' runs) on held-out problems of the
  leave-problems-out validation saved with it (the guard, PerfModel.guard;
  perfmodel.validate.guard_of): the default config.
- 'nearest': else, among stored problems with the same backend, device,
  template hash, dtype and trans flags, the one nearest in shape by
      d = |log2(M'/M)| + |log2(N'/N)| + |log2(K'/K)| + |log2(B'/B)|
  (B: the batch count, which fills the GPU as M does; ties: the smaller M',
  N', K', B'), whose fastest stored config that is valid for
  the new problem (backend.space(problem).why_invalid(cfg) is None) is taken;
  a tuned shape with no such config is passed over for the next nearest.
- 'default': else backend.default_config(problem).

Correct means correct under `tolerance` (None: the default tolerance of the
problem's dtype, what matmul uses): stored errors are judged again
(shadertune.verdict).

`db` is a Store, a path, or None for the default store (see shadertune.db).
A missing store file is not created; a read-only one is read; an unusable one
(other schema, not a database, not a store's tables, an undecodable result, damaged
as SQLite's integrity check finds it, busy past the wait) warns and falls back to
the default, since matmul must still work.

Selections are kept for as long as the store's content and the model file are
unchanged (select_memo.py, db/changes.py): an auto call for a shape seen before
costs a few file stats, not a store read.
"""
from __future__ import annotations

import math
import os
import pathlib
import warnings
from dataclasses import dataclass

from .config import Config
from .db import Store, StoreError
from .db.location import store_path
from .perfmodel.candidates import ANALYTICAL, analytical_candidates
from .perfmodel.saved import saved_model
from .problem import Problem, shape_distance
from .select_memo import SelectionMemo
from .verdict import tolerance_for

HOWS = ("exact", "model", "analytical", "nearest", "default")
TOP = 5                 # ranked alternatives an explanation lists
__all__ = ["ANALYTICAL", "HOWS", "Selection", "analytical_candidates", "forget", "select",
           "select_config", "shape_distance"]


@dataclass(frozen=True)
class Selection:
    """The config `auto` takes for one problem and the rule that gave it."""
    config: Config
    how: str                                   # one of HOWS
    problem: Problem
    backend: str
    device: str | None = None
    reason: str = ""                           # one line: why this rule gave the config
    measured_gflops: float | None = None       # exact: here; nearest: on `source`
    predicted_gflops: float | None = None      # model, analytical
    source: Problem | None = None              # nearest: the tuned problem it came from
    ranked: tuple = ()                         # model, analytical: (predicted GFLOP/s, config), best first
    model: str | None = None                   # model, analytical: the learned model's summary
    guard: dict | None = None                  # model, analytical: PerfModel.guard (both scores)
    passed_over: tuple = ()                    # earlier rules that gave nothing, and why

    def to_dict(self) -> dict:
        return {"backend": self.backend, "device": self.device, "problem": self.problem.to_dict(),
                "how": self.how, "config": self.config.to_dict(), "reason": self.reason,
                "measured_gflops": self.measured_gflops, "predicted_gflops": self.predicted_gflops,
                "source": self.source.to_dict() if self.source else None,
                "ranked": [{"predicted_gflops": g, "config": c.to_dict()} for g, c in self.ranked],
                "model": self.model, "guard": self.guard, "passed_over": list(self.passed_over)}

    def __str__(self) -> str:
        p = self.problem
        on = f" on {self.device}" if self.device else ""
        lines = [f"{self.backend}{on}, problem {p.key}:",
                 f"  config ({self.how}): " + " ".join(f"{k}={v}" for k, v in self.config.items()),
                 f"  why: {self.reason}"]
        if self.model:
            lines.append(f"  model: {self.model}")
        if self.guard:
            g = self.guard
            lines.append(f"  guard: leave-problems-out top-1 on {g['problems']} stored problems "
                         f"({g['folds']}-fold): learned model {100 * g['learned']:.1f}%, analytical "
                         f"model {100 * g['analytical']:.1f}%: "
                         + ("the default config" if g["use"] == "analytical" else "ranked by the learned model")
                         + ("" if "scored" not in g else f" ({_guard_text(g)})"))
        if len(self.ranked) > 1:
            by = "the analytical model" if self.how == "analytical" else "the model"
            lines.append(f"  ranked by {by} (predicted GFLOP/s):")
            lines += [f"    {g:10.3f}  " + " ".join(f"{k}={v}" for k, v in c.items())
                      for g, c in self.ranked]
        lines += [f"  passed over: {w}" for w in self.passed_over]
        return "\n".join(lines)


def select_config(backend, problem: Problem, db=None, *,
                  tolerance: float | None = None) -> tuple[Config, str]:
    """(config, how) of select()."""
    s = select(backend, problem, db, tolerance=tolerance)
    return s.config, s.how


_memo = SelectionMemo()


def select(backend, problem: Problem, db=None, *, tolerance: float | None = None,
           use_model: bool = True) -> Selection:
    """The config `auto` takes for `problem` on `backend`, with the rule and reason."""
    is_store = isinstance(db, Store)
    try:
        path = db.path if is_store else _store_path(db)
    except StoreError as e:          # nowhere for the default store (no HOME): none to read
        return _default(backend, problem, (str(e),), None)
    spath = str(path)
    # what the selection reads from is stamped before the store is read: a write after
    # it changes the next stamp
    stamp = _memo.store_stamp(spath)
    if stamp is None and not is_store:
        return _default(backend, problem, (f"no tuning store at {path}",), None)
    device, th = backend.device().key, backend.template_hash()
    key = (backend.name, device, th, problem, tolerance, use_model, spath)
    model = _memo.model_stamp(spath, backend.name, device, th)
    kept = _memo.get(key, spath, stamp, model)
    if kept is not None:
        return kept
    content = _memo.content(spath)
    store, owned = db, False
    if not isinstance(db, Store):
        try:
            store, owned = Store(path), True
        except StoreError as e:
            return _ignoring(e, backend, problem, device)
    try:
        found = _from_store(backend, problem, store, device, th, tolerance, use_model)
    except StoreError as e:
        return _ignoring(e, backend, problem, device)
    finally:
        if owned:
            store.close()
    return _memo.put(key, stamp, content, model, found)


_paths: dict = {}    # (db, the environment it is read with) -> the store's path


def _store_path(db) -> pathlib.Path:
    """The store a path (or None: the default store) names, as select reads it; kept
    per (db, the environment variables the answer depends on)."""
    env = os.environ
    key = (db, env.get("SHADERTUNE_DB"), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    try:
        path = _paths.get(key)
    except TypeError:        # an unhashable path-like: not kept
        key, path = None, None
    if path is None:
        path = store_path(db)
        if key is not None:
            if len(_paths) > 256:
                _paths.clear()
            _paths[key] = path
    return path


def forget() -> None:
    """Drop the selections kept in this process."""
    _memo.clear()


def _ignoring(e, backend, problem: Problem, device: str) -> Selection:
    warnings.warn(f"shadertune: ignoring the tuning store: {e}", RuntimeWarning, stacklevel=3)
    return _default(backend, problem, (f"unusable tuning store: {e}",), device)


def _default(backend, problem: Problem, passed_over: tuple, device: str | None) -> Selection:
    return Selection(backend.default_config(problem), "default", problem, backend.name, device,
                     reason="the backend's default config (no rule above gave one)",
                     passed_over=tuple(passed_over))


def _from_store(backend, problem: Problem, store, device: str, th: str, tolerance,
                use_model: bool) -> Selection:
    passed = []
    r = _exact(backend, problem, store, device, th, tolerance)
    if r is not None:
        return Selection(r.config, "exact", problem, backend.name, device,
                         reason=f"the fastest verified result stored for this problem "
                                f"({r.gflops:.3f} GFLOP/s measured)", measured_gflops=r.gflops)
    passed.append("exact: no verified result stored for this problem")
    if use_model and min(problem.M, problem.N, problem.K) >= 1:
        s = _from_model(backend, problem, store, device, tolerance, passed)
        if s is not None:
            return s
    space = None
    tuned = [p for p in store.tuned_problems(backend.name, device, th, tolerance=tolerance)
             if (p.dtype, p.trans_a, p.trans_b) == (problem.dtype, problem.trans_a, problem.trans_b)]
    tuned.sort(key=lambda p: (shape_distance(p, problem), p.M, p.N, p.K, p.batch))
    for p in tuned:
        if space is None:
            space = backend.space(problem)
        for r in store.ranked(backend.name, device, p, th, tolerance=tolerance):
            if space.why_invalid(r.config) is None:
                return Selection(r.config, "nearest", problem, backend.name, device,
                                 reason=f"the fastest config of the nearest tuned problem {p.key} "
                                        f"(shape distance {shape_distance(p, problem):.2f}) that is "
                                        f"valid here ({r.gflops:.3f} GFLOP/s measured there)",
                                 measured_gflops=r.gflops, source=p, passed_over=tuple(passed))
    passed.append("nearest: no tuned problem of this dtype and layout has a config valid here")
    return _default(backend, problem, tuple(passed), device)


def _exact(backend, problem: Problem, store, device: str, th: str, tolerance):
    """The fastest stored result of `problem` whose config is valid in today's space
    (a config of an older space is not run); the first few are read first, since
    the fastest is nearly always valid."""
    first = store.ranked(backend.name, device, problem, th, limit=8, tolerance=tolerance)
    if not first:
        return None
    space = backend.space(problem)
    for r in first:
        if space.why_invalid(r.config) is None:
            return r
    rest = (store.ranked(backend.name, device, problem, th, tolerance=tolerance)[len(first):]
            if len(first) == 8 else [])
    return next((r for r in rest if space.why_invalid(r.config) is None), None)


def _from_model(backend, problem: Problem, store, device: str, tolerance,
                passed: list) -> Selection | None:
    model, note = saved_model(backend, store)
    if model is None:
        passed.append(f"model: {note}")
        return None
    if not model.trained_on(problem.dtype):
        passed.append(f"model: trained on no {problem.dtype} problem")
        return None
    space = backend.space(problem)
    verified = model.verified_configs(problem.dtype, tolerance_for(problem.dtype, tolerance))
    valid = [c for c in verified if space.why_invalid(c) is None]
    # The rule for what auto may run without checking it: a config verified on some
    # stored problem (built and checked on this device), or one of the backend's
    # analytical candidates for this problem: config="default" runs that list's head
    # untuned already, and running another of the list is exactly as safe.
    listed = analytical_candidates(backend, problem, space)
    cands = list(dict.fromkeys(valid + listed))
    if not cands:
        passed.append(f"model: none of the {len(verified)} configs verified on other problems "
                      f"is valid here, and the backend lists no candidate")
        return None
    known = set(valid)
    fresh = sum(c not in known for c in listed)
    among = (f"the {len(cands)} candidates valid here ({len(valid)} verified on stored problems, "
             f"{fresh} more from the backend's analytical candidate list)")
    guard = model.guard
    if model.prefers_analytical():
        # the fallback is the config the guard validated the learned picks against
        cfg = backend.default_config(problem)
        ms = backend.predict_ms(problem, [cfg])
        g = problem.flops / (ms[0] * 1e6) if ms and ms[0] > 0 else math.inf
        return Selection(cfg, "analytical", problem, backend.name, device,
                         reason=f"the backend's default config (its analytical model's pick, "
                                f"predicted {g:.3f} GFLOP/s), not the learned model's among {among}: "
                                f"on this store's held-out problems the learned picks were not "
                                f"reliably at least the default's speed ({_guard_text(guard)})",
                         predicted_gflops=g, ranked=((g, cfg),), model=model.summary(), guard=guard,
                         passed_over=tuple(passed))
    top = tuple(model.rank(problem, cands)[:TOP])
    g, cfg = top[0]
    return Selection(cfg, "model", problem, backend.name, device,
                     reason=f"predicted fastest ({g:.3f} GFLOP/s) by the learned model among "
                            f"{among}{_origin(cfg, known)}",
                     predicted_gflops=g, ranked=top, model=model.summary(), guard=guard,
                     passed_over=tuple(passed))


def _guard_text(g: dict) -> str:
    if "scored" not in g:        # a guard saved before the default was its measure
        return (f"leave-problems-out top-1 {100 * g['learned']:.1f}% against the analytical model's "
                f"{100 * g['analytical']:.1f}%, {g['problems']} problems")
    if g["scored"] < 2:
        return f"{g['scored']} of {g['problems']} held-out problems could be scored, 2 are needed"
    return (f"{g['vs_default_mean']:.3f}x the default on average, {g['vs_default_min']:.3f}x at least, "
            f"on {g['scored']} held-out problems")


def _origin(cfg: Config, verified: set) -> str:
    return ("" if cfg in verified else
            "; it comes from the analytical list, and no stored result verifies it on this device "
            "(config='default' runs that list's head the same way)")
