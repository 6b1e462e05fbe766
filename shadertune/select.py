"""Auto-selection: the config matmul(config="auto") runs for a device and shape, and why.

    select(backend, problem, db=None) -> Selection     (config, how, the reason)
    select_config(backend, problem, db=None) -> (Config, how)
    explain(A, B, backend="gl", db=None) -> Selection  (for given operands)

The chain, first rule that gives a config wins (`how`):

- 'exact': the fastest correct stored result for this backend, device
  (renderer | driver), template hash and problem (shape, dtype, trans).
- 'model': else the learned performance model of this backend and device
  (shadertune.perfmodel; needs scikit-learn and a store with results of at
  least perfmodel.saved.MIN_PROBLEMS problems, some of this dtype) ranks the
  configs that were verified on some stored problem and are valid for this
  one, and the one it predicts fastest is taken. Only verified configs: matmul runs what auto
  picks without checking it, so a config never built and checked on this
  device is not a candidate (first-use tuning, `tune="first-use"`, times and
  verifies the model's picks from the whole space instead).
- 'nearest': else, among stored problems with the same backend, device,
  template hash, dtype and trans flags, the one nearest in shape by
      d = |log2(M'/M)| + |log2(N'/N)| + |log2(K'/K)|
  (ties: the smaller M', N', K'), whose fastest stored config that is valid for
  the new problem (backend.space(problem).why_invalid(cfg) is None) is taken;
  a tuned shape with no such config is passed over for the next nearest.
- 'default': else backend.default_config(problem).

`db` is a Store, a path, or None for the default store (see shadertune.db).
A missing store file is not created; an unusable one (other schema, not a
database) warns and falls back to the default, since matmul must still work.
"""
from __future__ import annotations

import math
import os
import pathlib
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field

from .config import Config
from .problem import Problem

HOWS = ("exact", "model", "nearest", "default")
TOP = 5                 # ranked alternatives an explanation lists


def shape_distance(a: Problem, b: Problem) -> float:
    """Sum of |log2| ratios of M, N, K (dimensions of 0 count as 1)."""
    return sum(abs(math.log2(max(x, 1) / max(y, 1)))
               for x, y in ((a.M, b.M), (a.N, b.N), (a.K, b.K)))


@dataclass
class Selection:
    """The config `auto` takes for one problem and the rule that gave it."""
    config: Config
    how: str                                   # one of HOWS
    problem: Problem
    backend: str
    device: str | None = None
    reason: str = ""                           # one line: why this rule gave the config
    measured_gflops: float | None = None       # exact: here; nearest: on `source`
    predicted_gflops: float | None = None      # model
    source: Problem | None = None              # nearest: the tuned problem it came from
    ranked: list = field(default_factory=list)  # model: (predicted GFLOP/s, config), best first
    model: str | None = None                   # model: its summary
    passed_over: list = field(default_factory=list)   # earlier rules that gave nothing, and why

    def to_dict(self) -> dict:
        return {"backend": self.backend, "device": self.device, "problem": self.problem.to_dict(),
                "how": self.how, "config": self.config.to_dict(), "reason": self.reason,
                "measured_gflops": self.measured_gflops, "predicted_gflops": self.predicted_gflops,
                "source": self.source.to_dict() if self.source else None,
                "ranked": [{"predicted_gflops": g, "config": c.to_dict()} for g, c in self.ranked],
                "model": self.model, "passed_over": list(self.passed_over)}

    def __str__(self) -> str:
        p = self.problem
        lines = [f"{self.backend} on {self.device or '?'}, problem {p.key}:",
                 f"  config ({self.how}): " + " ".join(f"{k}={v}" for k, v in self.config.items()),
                 f"  why: {self.reason}"]
        if self.model:
            lines.append(f"  model: {self.model}")
        if len(self.ranked) > 1:
            lines.append("  ranked by the model (predicted GFLOP/s):")
            lines += [f"    {g:10.3f}  " + " ".join(f"{k}={v}" for k, v in c.items())
                      for g, c in self.ranked]
        lines += [f"  passed over: {w}" for w in self.passed_over]
        return "\n".join(lines)


def select_config(backend, problem: Problem, db=None, *, tune=None) -> tuple[Config, str]:
    """(config, how) of select(); tune='first-use' (or a perfmodel.FirstUse) first
    times the model's picks when the store has no result for `problem`."""
    if tune is not None:
        from .perfmodel.firstuse import ensure_tuned, parse
        spec = parse(tune)
        if spec is not None:
            ensure_tuned(backend, problem, db, spec)
    s = select(backend, problem, db)
    return s.config, s.how


def select(backend, problem: Problem, db=None, *, use_model: bool = True) -> Selection:
    """The config `auto` takes for `problem` on `backend`, with the rule and reason."""
    from .db import Store, StoreError, default_path
    store, owned = db, False
    if not isinstance(db, Store):
        path = pathlib.Path(db).expanduser() if db is not None else default_path()
        if not os.path.exists(path):
            return _default(backend, problem, [f"no tuning store at {path}"])
        try:
            store, owned = Store(path), True
        except StoreError as e:
            warnings.warn(f"shadertune: ignoring the tuning store: {e}", RuntimeWarning, stacklevel=2)
            return _default(backend, problem, [f"unusable tuning store: {e}"])
    try:
        return _from_store(backend, problem, store, use_model)
    finally:
        if owned:
            store.close()


def _default(backend, problem: Problem, passed_over: list, device: str | None = None) -> Selection:
    from .errors import ContextError
    if device is None:
        try:
            device = backend.device().key
        except ContextError:    # no device to name (the default config may not need one)
            pass
    return Selection(backend.default_config(problem), "default", problem, backend.name, device,
                     reason="the backend's default config (no rule above gave one)",
                     passed_over=passed_over)


def _from_store(backend, problem: Problem, store, use_model: bool) -> Selection:
    device, th = backend.device().key, backend.template_hash()
    passed = []
    r = _exact(backend, problem, store, device, th)
    if r is not None:
        return Selection(r.config, "exact", problem, backend.name, device,
                         reason=f"the fastest verified result stored for this problem "
                                f"({r.gflops:.3f} GFLOP/s measured)", measured_gflops=r.gflops)
    passed.append("exact: no verified result stored for this problem")
    if use_model and min(problem.M, problem.N, problem.K) >= 1:
        s = _from_model(backend, problem, store, device, passed)
        if s is not None:
            return s
    space = None
    tuned = [p for p in store.tuned_problems(backend.name, device, th)
             if (p.dtype, p.trans_a, p.trans_b) == (problem.dtype, problem.trans_a, problem.trans_b)]
    tuned.sort(key=lambda p: (shape_distance(p, problem), p.M, p.N, p.K))
    for p in tuned:
        if space is None:
            space = backend.space(problem)
        for r in store.ranked(backend.name, device, p, th):
            if _runs_here(backend, space, problem, r.config):
                return Selection(r.config, "nearest", problem, backend.name, device,
                                 reason=f"the fastest config of the nearest tuned problem {p.key} "
                                        f"(shape distance {shape_distance(p, problem):.2f}) that is "
                                        f"valid here ({r.gflops:.3f} GFLOP/s measured there)",
                                 measured_gflops=r.gflops, source=p, passed_over=passed)
    passed.append("nearest: no tuned problem of this dtype and layout has a config valid here")
    return _default(backend, problem, passed, device)


def _runs_here(backend, space, problem: Problem, cfg) -> bool:
    """`cfg`, verified on another problem, is valid for this one and its kernel
    source generates: the space's rules and the code generator can disagree
    (GL: a space that accepts an unroll the pass's clamped step count does not
    divide), and a config taken from another shape must not fail in matmul."""
    from .errors import BuildError, InvalidConfig
    if space.why_invalid(cfg) is not None:
        return False
    try:
        backend.source(problem, cfg)
    except (InvalidConfig, BuildError):
        return False
    return True


def _exact(backend, problem: Problem, store, device: str, th: str):
    """The fastest stored result of `problem` whose config is valid in today's space
    (a config of an older space is not run); the first few are read first, since
    the fastest is nearly always valid."""
    first = store.ranked(backend.name, device, problem, th, limit=8)
    if not first:
        return None
    space = backend.space(problem)
    for r in first:
        if space.why_invalid(r.config) is None:
            return r
    rest = store.ranked(backend.name, device, problem, th)[len(first):] if len(first) == 8 else []
    return next((r for r in rest if space.why_invalid(r.config) is None), None)


# (model, trained_at, problem) -> (the TOP best-ranked verified configs that run
# here, how many were ranked): repeated auto calls for one shape rank once per
# process and model
_ranked: OrderedDict = OrderedDict()
_ranked_lock = threading.Lock()
_RANKED_KEEP = 256


def _from_model(backend, problem: Problem, store, device: str, passed: list) -> Selection | None:
    from .perfmodel import saved
    model, note = saved.model_for(backend, store)
    if model is None:
        passed.append(f"model: {note}")
        return None
    if problem.dtype not in model.meta["dtypes"]:    # another element type is another regime
        passed.append(f"model: trained on no {problem.dtype} problem")
        return None
    key = (id(model), model.meta["trained_at"], problem)
    with _ranked_lock:
        found = _ranked.get(key)
    if found is None:
        space = backend.space(problem)
        valid = [c for c in model.verified_configs if space.why_invalid(c) is None]
        top = []
        for g, c in model.rank(problem, valid):
            if len(top) == TOP:
                break
            if _runs_here(backend, space, problem, c):
                top.append((g, c))
        found = (top, len(valid))
        with _ranked_lock:
            _ranked[key] = found
            while len(_ranked) > _RANKED_KEEP:
                _ranked.popitem(last=False)
    top, n = found
    if not top:
        passed.append(f"model: none of the {len(model.verified_configs)} configs verified on other "
                      f"problems runs here")
        return None
    g, cfg = top[0]
    return Selection(cfg, "model", problem, backend.name, device,
                     reason=f"predicted fastest ({g:.3f} GFLOP/s) by the learned model among the "
                            f"{n} configs verified on other problems and valid here",
                     predicted_gflops=g, ranked=top, model=model.summary(), passed_over=passed)


def explain(A, B, *, backend: str = "gl", db=None, device_index: int | None = None) -> Selection:
    """Which config matmul(A, B, backend=backend, config="auto", db=db) runs, and why.

    For GL operands larger than the device's texture limit, matmul works in
    tiles: the selection shown is the one of the first (largest) tile."""
    import numpy as np

    from .backends import get_backend
    from .inputs import check_operands
    if backend not in ("gl", "cuda"):
        raise ValueError(f"explain: backend must be 'gl' or 'cuda', got {backend!r}")
    dtype = np.float32
    if backend == "cuda" and any(np.dtype(getattr(x, "dtype", np.float32)) == np.float64 for x in (A, B)):
        dtype = np.float64
    ops = check_operands(A, B, dtype=dtype)
    be = get_backend(backend, **({"device_index": device_index} if device_index is not None else {}))
    M, N, K = ops.M, ops.N, ops.K
    note = None
    if backend == "gl":
        lim = int(be.device().limits.get("max_texture_size", 4096))
        if max(M, N, K) > lim:
            note = f"matmul tiles {M}x{N}x{K} under the texture limit {lim}: first tile shown"
            M, N, K = min(M, lim), min(N, lim), min(K, lim)
    s = select(be, Problem(M, N, K, np.dtype(dtype).name), db)
    if note:
        s.passed_over.append(note)
    return s
