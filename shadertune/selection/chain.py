"""Auto-selection: the config matmul(config="auto") runs for a device and shape, and why.

    select(backend, problem, db=None) -> Selection     (config, how, the reason)
    select_config(backend, problem, db=None) -> (Config, how)

Auto reads: select takes the store and the learned model saved beside it as they
are; it never trains a model and never tunes (a search, first-use tuning and
`python -m shadertune.perfmodel train` write them).  For the operands of a call:
shadertune.explain(A, B), the front door's (front/explanation.py).

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

Results that survive a driver update: the device key holds the renderer and the
driver version (GL: with the context's profile), so a new driver or profile is a
new key.  Where this key's own rules give nothing, the same renderer's results
under its other keys stand in: after 'exact' misses, the fastest verified result
of this problem under another key; after 'nearest' misses, the nearest tuned
problem under another key (same template hash).  And where the store gives
nothing at all (or there is none), the pre-tuned table shipped with shadertune
(db/pretuned.py, the fallback below the user's store): this problem's row, else
the nearest problem's, for this renderer.  Each says so (Selection.measured_on,
.pretuned), and a config measured under another key or kernel version is
verified against float64 on first use before matmul runs it (.recheck;
reverify.py: the verdict is kept in the process, never stored).

Correct means correct under `tolerance` (None: the default tolerance of the
problem's dtype, what matmul uses): stored errors are judged again
(shadertune.core.verdict).

`db` is a Store, a path, or None for the default store (see shadertune.db).
A missing store file is not created; a read-only one is read; an unusable one
(other schema, not a database, not a store's tables, an undecodable result, damaged
as SQLite's integrity check finds it, busy past the wait) warns and falls back to
the default, since matmul must still work.

Selections are kept for as long as the store's content and the model file are
unchanged (memo.py, db/changes.py): an auto call for a shape seen before
costs a few file stats, not a store read.
"""
from __future__ import annotations

import math
import os
import pathlib
import warnings
from dataclasses import dataclass, replace
from typing import Any

from . import reverify
from ..backends import config_text
from ..core.config import Config
from ..db import Store, StoreError, pretuned
from ..db.location import store_path
from ..errors import ContextError
from ..perfmodel.candidates import ANALYTICAL, analytical_candidates
from ..perfmodel.saved import saved_model
from ..core.problem import Problem, shape_distance
from .memo import SelectionMemo
from ..core.verdict import tolerance_for

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
    ranked: tuple[tuple[float, Config], ...] = ()   # model, analytical: (predicted GFLOP/s, config), best first
    model: str | None = None                   # model, analytical: the learned model's summary
    guard: dict[str, Any] | None = None        # model, analytical: PerfModel.guard (both scores)
    passed_over: tuple[str, ...] = ()          # earlier rules that gave nothing, and why
    measured_on: str | None = None             # exact, nearest: the device key measured on, where
    #                                            not this device's (another driver or profile)
    pretuned: bool = False                     # from the table shipped with shadertune
    recheck: bool = False                      # verified against float64 on first use (reverify)
    rechecked: str | None = None               # that verdict, where this process holds one

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, "problem": self.problem.to_dict(),
                "how": self.how, "config": self.config.to_dict(), "reason": self.reason,
                "measured_gflops": self.measured_gflops, "predicted_gflops": self.predicted_gflops,
                "source": self.source.to_dict() if self.source else None,
                "ranked": [{"predicted_gflops": g, "config": c.to_dict()} for g, c in self.ranked],
                "model": self.model, "guard": self.guard, "passed_over": list(self.passed_over),
                "measured_on": self.measured_on, "pretuned": self.pretuned, "recheck": self.recheck,
                "rechecked": self.rechecked}

    def __str__(self) -> str:
        return self.text()

    def text(self, *, full_config: bool = False) -> str:
        """The explanation: each config with the knobs that act on it (every knob with
        `full_config`)."""
        p = self.problem
        on = f" on {self.device}" if self.device else ""

        def knobs(cfg: Config) -> str:
            return config_text(self.backend, cfg, full=full_config)
        lines = [f"{self.backend}{on}, problem {p.label}:",
                 f"  config ({self.how}): " + knobs(self.config),
                 f"  why: {self.reason}"]
        if self.pretuned:
            lines.append(f"  from: the pre-tuned table shipped with shadertune ({pretuned.TABLE}), "
                         f"measured on {self.measured_on}")
        elif self.measured_on:
            lines.append(f"  measured on: {self.measured_on} (this renderer under another driver "
                         f"or profile)")
        if self.recheck:
            lines.append("  verified: " + (self.rechecked or "against float64 by matmul on first "
                                           "use, once per process (not stored)"))
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
            lines += [f"    {g:10.3f}  " + knobs(c) for g, c in self.ranked]
        lines += [f"  passed over: {w}" for w in self.passed_over]
        return "\n".join(lines)


def select_config(backend: Any, problem: Problem, db: Any = None, *,
                  tolerance: float | None = None) -> tuple[Config, str]:
    """(config, how) of what matmul runs: select()'s, where a config measured elsewhere
    (Selection.recheck) is first verified against float64 once (reverify.py); one that
    fails gives way to the backend's default config."""
    s = checked(backend, select(backend, problem, db, tolerance=tolerance), tolerance)
    return s.config, s.how


def checked(backend: Any, s: Selection, tolerance: float | None = None) -> Selection:
    """`s` once its config is verified here where it needs to be (a kept verdict costs
    a lookup); the default config's selection where it failed."""
    if not s.recheck:
        return s
    r = reverify.known(backend, s.problem, s.config, tolerance)
    if r is None:
        r = reverify.verify(backend, s.problem, s.config, tolerance)
        if not r.ok:
            warnings.warn(f"shadertune: the config auto took for {s.problem.label} "
                          f"({config_text(backend.name, s.config)}, measured on {s.measured_on}) "
                          f"failed verification on this device ({r.status}: {r.message}); "
                          f"matmul runs the default config instead", RuntimeWarning, stacklevel=4)
    if r.ok:
        return replace(s, rechecked=verdict_text(r))
    return _default(backend, s.problem, s.passed_over + (
        f"{s.how} ({'pre-tuned' if s.pretuned else s.measured_on}): its config failed "
        f"verification on this device: {verdict_text(r)}",), s.device)


def verdict_text(r: Any) -> str:
    """A re-verification's verdict in words."""
    if r.ok:
        return (f"passed in this process (error {r.error or 0.0:.1e} against float64, "
                f"{r.gflops or 0.0:.3g} GFLOP/s in one run)")
    return f"failed in this process ({r.status}: {r.message})"


_memo: Any = SelectionMemo()


def select(backend: Any, problem: Problem, db: Any = None, *, tolerance: float | None = None,
           use_model: bool = True) -> Selection:
    """The config `auto` takes for `problem` on `backend`, with the rule and reason."""
    is_store = isinstance(db, Store)
    try:
        path = db.path if is_store else _store_path(db)
    except StoreError as e:          # nowhere for the default store (no HOME): none to read
        return _below_store(backend, problem, (str(e),), tolerance)
    spath = str(path)
    # what the selection reads from is stamped before the store is read: a write after
    # it changes the next stamp
    stamp = _memo.store_stamp(spath)
    if stamp is None and not is_store:
        return _below_store(backend, problem, (f"no tuning store at {path}",), tolerance)
    device, th = backend.device().key, backend.template_hash()
    key = (backend.name, device, th, problem, tolerance, use_model, spath)
    model = _memo.model_stamp(spath, backend.name, device, th)
    kept: Selection | None = _memo.get(key, spath, stamp, model)
    if kept is not None:
        return kept
    content = _memo.content(spath)
    store, owned = db, False
    if not isinstance(db, Store):
        try:
            store, owned = Store(path), True
        except StoreError as e:
            return _ignoring(e, backend, problem, device, tolerance)
    try:
        found = _from_store(backend, problem, store, device, th, tolerance, use_model)
    except StoreError as e:
        return _ignoring(e, backend, problem, device, tolerance)
    finally:
        if owned:
            store.close()
    _memo.put(key, stamp, content, model, found)
    return found


_paths: dict[tuple[Any, ...], pathlib.Path] = {}   # (db, the environment it is read with) -> path


def _store_path(db: Any) -> pathlib.Path:
    """The store a path (or None: the default store) names, as select reads it; kept
    per (db, the environment variables the answer depends on)."""
    env = os.environ
    key: tuple[Any, ...] | None = (db, env.get("SHADERTUNE_DB"), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    try:
        path = _paths.get(key)     # type: ignore[arg-type]
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
    """Drop the selections (and re-verifications) kept in this process."""
    _memo.clear()
    _below.clear()
    reverify.forget()


def _ignoring(e: Exception, backend: Any, problem: Problem, device: str,
              tolerance: float | None) -> Selection:
    warnings.warn(f"shadertune: ignoring the tuning store: {e}", RuntimeWarning, stacklevel=3)
    return _below_store(backend, problem, (f"unusable tuning store: {e}",), tolerance)


def _default(backend: Any, problem: Problem, passed_over: tuple[str, ...], device: str | None) -> Selection:
    return Selection(backend.default_config(problem), "default", problem, backend.name, device,
                     reason="the backend's default config (no rule above gave one)",
                     passed_over=tuple(passed_over))


# selections where the user's store gives nothing: (backend, device, templates, problem,
# tolerance, why) -> Selection (the table is read once; a missing store is stat'ed per call)
_below: dict[tuple[Any, ...], Selection] = {}


def _below_store(backend: Any, problem: Problem, passed: tuple[str, ...],
                 tolerance: float | None) -> Selection:
    """Below the user's store: the pre-tuned table, else the default config (without a
    device to name its renderer, as on a machine without the GPU: the default)."""
    try:
        info = backend.device()
    except ContextError:
        return _default(backend, problem, passed, None)
    key = (backend.name, info.key, backend.template_hash(), problem, tolerance, passed)
    s = _below.get(key)
    if s is None:
        if len(_below) > 1024:
            _below.clear()
        s = _below[key] = _pretuned(backend, problem, info, list(passed))
    return s


def _from_store(backend: Any, problem: Problem, store: Store, device: str, th: str,
                tolerance: float | None, use_model: bool) -> Selection:
    passed: list[str] = []
    r = _exact(backend, problem, store, device, th, tolerance)
    if r is not None:
        return Selection(r.config, "exact", problem, backend.name, device,
                         reason=f"the fastest verified result stored for this problem "
                                f"({r.gflops:.3f} GFLOP/s measured)", measured_gflops=r.gflops)
    passed.append("exact: no verified result stored for this problem")
    siblings = _other_keys(backend, store, device, th)
    found = _exact_elsewhere(backend, problem, store, siblings, th, tolerance)
    if found is not None:
        r, key = found
        return Selection(r.config, "exact", problem, backend.name, device,
                         reason=f"the fastest verified result stored for this problem on this "
                                f"renderer under another driver or profile ({r.gflops:.3f} GFLOP/s "
                                f"measured there)", measured_gflops=r.gflops,
                         passed_over=tuple(passed), measured_on=key, recheck=True)
    if siblings:
        passed.append(f"exact: none under the {len(siblings)} other device keys of this renderer")
    if use_model and min(problem.M, problem.N, problem.K) >= 1:
        s = _from_model(backend, problem, store, device, tolerance, passed)
        if s is not None:
            return s
    for keys, note in (([device], ""), (siblings, "under another driver or profile ")):
        near = _nearest(backend, problem, store, keys, th, tolerance)
        if near is not None:
            r, p, key = near
            return Selection(r.config, "nearest", problem, backend.name, device,
                             reason=f"the fastest config of the nearest tuned problem {p.label} "
                                    f"{note}(shape distance {shape_distance(p, problem):.2f}) that "
                                    f"is valid here ({r.gflops:.3f} GFLOP/s measured there)",
                             measured_gflops=r.gflops, source=p, passed_over=tuple(passed),
                             measured_on=None if key == device else key, recheck=key != device)
        if keys:
            passed.append(f"nearest: no tuned problem {note}of this dtype and layout has a "
                          f"config valid here")
    return _pretuned(backend, problem, backend.device(), passed)


def _other_keys(backend: Any, store: Store, device: str, th: str) -> list[str]:
    """This renderer's other device keys in the store (another driver version or GL
    profile), for these templates, most recently written first."""
    renderer = pretuned.renderer_of(device)
    rows = store.summary(("device",), "backend = ? AND template_hash = ? AND device != ?",
                         (backend.name, th, device))
    rows = [r for r in rows if r["correct"] and pretuned.renderer_of(r["device"]) == renderer]
    return [r["device"] for r in sorted(rows, key=lambda r: -(r["written"] or 0))]


def _exact_elsewhere(backend: Any, problem: Problem, store: Store, keys: list[str], th: str,
                     tolerance: float | None) -> tuple[Any, str] | None:
    """The fastest valid stored result of `problem` under any of `keys`, and its key."""
    best = None
    for key in keys:
        r = _exact(backend, problem, store, key, th, tolerance)
        if r is not None and (best is None or r.median_ms < best[0].median_ms):
            best = (r, key)
    return best


def _nearest(backend: Any, problem: Problem, store: Store, keys: list[str], th: str,
             tolerance: float | None) -> tuple[Any, Problem, str] | None:
    """(result, tuned problem, device key) of the nearest tuned problem under `keys` with a
    config valid for `problem` (its fastest such config)."""
    tuned = [(p, key) for key in keys
             for p in store.tuned_problems(backend.name, key, th, tolerance=tolerance)
             if (p.dtype, p.trans_a, p.trans_b) == (problem.dtype, problem.trans_a, problem.trans_b)]
    tuned.sort(key=lambda pk: (shape_distance(pk[0], problem), pk[0].M, pk[0].N, pk[0].K,
                               pk[0].batch, keys.index(pk[1])))
    space = None
    for p, key in tuned:
        if space is None:
            space = backend.space(problem)
        for r in store.ranked(backend.name, key, p, th, tolerance=tolerance):
            if space.why_invalid(r.config) is None:
                return r, p, key
    return None


def _pretuned(backend: Any, problem: Problem, info: Any, passed: list[str]) -> Selection:
    """The pre-tuned table's row of this problem for this renderer, else the nearest
    problem's whose config is valid here; else the default config."""
    if min(problem.M, problem.N, problem.K) < 1:        # nothing to compute: nothing to tune
        return _default(backend, problem, tuple(passed), info.key)
    renderer = pretuned.renderer_of(info.key)
    rows = [r for r in pretuned.rows_for(backend.name, renderer)
            if (r.problem.dtype, r.problem.trans_a, r.problem.trans_b)
            == (problem.dtype, problem.trans_a, problem.trans_b)]
    if not rows:
        passed.append(f"pre-tuned: the table shipped with shadertune has no {problem.dtype} "
                      f"result of this layout for {renderer}")
        return _default(backend, problem, tuple(passed), info.key)
    th = backend.template_hash()
    rows.sort(key=lambda r: (shape_distance(r.problem, problem), not r.trusted_on(info.key, th),
                             -r.gflops, r.problem))
    space = None
    for r in rows:
        if space is None:
            space = backend.space(problem)
        if space.why_invalid(r.config) is not None:
            continue
        trusted = r.trusted_on(info.key, th)
        d = shape_distance(r.problem, problem)
        what = ("this problem" if r.problem == problem else
                f"the nearest problem it holds, {r.problem.label} (shape distance {d:.2f})")
        check = ("" if trusted else
                 "; verified against float64 on first use (another driver, profile or kernel "
                 "version)")
        return Selection(r.config, "exact" if r.problem == problem else "nearest", problem,
                         backend.name, info.key,
                         reason=f"the pre-tuned table shipped with shadertune: the fastest config "
                                f"of {what}, {r.gflops:.3f} GFLOP/s measured{check}",
                         measured_gflops=r.gflops, source=None if r.problem == problem else r.problem,
                         passed_over=tuple(passed), measured_on=r.device, pretuned=True,
                         recheck=not trusted)
    passed.append(f"pre-tuned: none of the table's {len(rows)} configs for {renderer} is "
                  f"valid here")
    return _default(backend, problem, tuple(passed), info.key)


def _exact(backend: Any, problem: Problem, store: Store, device: str, th: str,
           tolerance: float | None) -> Any:
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


def _from_model(backend: Any, problem: Problem, store: Store, device: str, tolerance: float | None,
                passed: list[str]) -> Selection | None:
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


def _guard_text(g: dict[str, Any] | None) -> str:
    if not g:
        return "no validation saved with it"
    if "scored" not in g:        # a guard saved before the default was its measure
        return (f"leave-problems-out top-1 {100 * g['learned']:.1f}% against the analytical model's "
                f"{100 * g['analytical']:.1f}%, {g['problems']} problems")
    if g["scored"] < 2:
        return f"{g['scored']} of {g['problems']} held-out problems could be scored, 2 are needed"
    return (f"{g['vs_default_mean']:.3f}x the default on average, {g['vs_default_min']:.3f}x at least, "
            f"on {g['scored']} held-out problems")


def _origin(cfg: Config, verified: set[Config]) -> str:
    return ("" if cfg in verified else
            "; it comes from the analytical list, and no stored result verifies it on this device "
            "(config='default' runs that list's head the same way)")
