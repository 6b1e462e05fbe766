"""Features of one (problem, config) pair, in the spirit of ISAAC (seeds/004).

A row has three parts:
- the problem: log2 of M, N, K, of the flops and of the arithmetic intensity
  (flops per byte that must move), the aspect log2(M/N), the layout (trans_a,
  trans_b) and the element size;
- the knobs, encoded from the values seen in training: a knob whose values are
  numbers (or numeric text such as glsl '330') is one numeric column; text
  values (mc '1x4', unroll 'full') each get an indicator column, and a knob
  that mixes numbers and text gets both (its numeric column is 0 where the
  value is text). A knob a config lacks reads -1; a text value never seen in
  training sets no indicator;
- derived quantities of the backend (tiles, waves, passes, fetches, ...): the
  backend's own (Backend.model_features, a ModelFeatures of the backend's
  package, found by the backend's registered name), or a function registered
  here for a backend name (register_derived: a backend outside the registry,
  or a study of other features). It reads only the problem, the config and the
  device limits saved with the model, so features never need a GPU context.

The encoding is fixed when a model is trained and saved with it: a later
config is encoded exactly as the training configs were.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..backends import ModelFeatures, backend_class
from ..backends.base import log2_count as _log2
from ..core.config import Config
from ..errors import ShadertuneError
from ..core.problem import Problem

# Derived features registered here by backend name (they win over the backend's own):
# backend name -> function(problem, config, limits) -> {feature name: float}; the
# function must give the same names, in the same order, for every config of a backend
DERIVED: dict[str, Callable[[Problem, Config, Mapping], dict]] = {}
# backend name -> the derived feature that is log2 of the backend's analytical time
# of a config (any unit proportional to time: cycles): the baseline a model of the
# residual target corrects (model.py)
BASELINES: dict[str, str] = {}

MISSING = -1.0       # a knob the config does not have


# what a derived-feature function raises for a config it cannot describe
_UNDESCRIBED = (KeyError, ValueError, TypeError, ZeroDivisionError, ShadertuneError)


def register_derived(backend_name: str, *, baseline: str | None = None):
    """Decorator: `fn(problem, config, limits) -> dict` adds derived features for a
    backend; `baseline` names the one of them that is log2 of the backend's
    analytical time (the residual target's baseline), if there is one."""
    def deco(fn):
        DERIVED[backend_name] = fn
        if baseline is None:
            BASELINES.pop(backend_name, None)
        else:
            BASELINES[backend_name] = baseline
        return fn
    return deco


def model_features(backend_name: str) -> ModelFeatures | None:
    """The derived features of a backend: registered here by name, else the registered
    backend's own (Backend.model_features), else None (the knobs alone)."""
    fn = DERIVED.get(backend_name)
    if fn is not None:
        return ModelFeatures(fn, BASELINES.get(backend_name))
    try:
        return backend_class(backend_name).model_features
    except (ValueError, ImportError):
        return None


def baseline_of(backend_name: str) -> str | None:
    """The derived feature that is the backend's analytical time, if it has one."""
    spec = model_features(backend_name)
    return spec.baseline if spec is not None else None


def problem_features(p: Problem) -> dict:
    return {"log2_M": _log2(p.M), "log2_N": _log2(p.N), "log2_K": _log2(p.K),
            "log2_flops": _log2(p.flops), "log2_intensity": math.log2(max(p.flops, 1) / max(p.bytes, 1)),
            "log2_M_over_N": _log2(p.M) - _log2(p.N), "trans_a": float(p.trans_a),
            "trans_b": float(p.trans_b), "itemsize": float(p.itemsize)}


def _number(v) -> float | None:
    """The value as a number if it is one (bool and numeric text included), else None."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


class Featurizer:
    """(problem, configs) -> a float matrix, one row per config (see the module docstring)."""

    def __init__(self, backend_name: str, limits: Mapping | None = None):
        self.backend_name = backend_name
        self.limits = dict(limits or {})
        self.numeric: list[str] = []                  # knobs with a numeric column
        self.categories: dict[str, list[str]] = {}    # knob -> text values with an indicator
        self.names: list[str] = []

    def fit(self, problems_configs: Iterable[tuple[Problem, Config]]) -> "Featurizer":
        """Fix the knob encoding from the training pairs."""
        numeric, cats = set(), {}
        first, derived = None, None
        for p, cfg in problems_configs:
            first = first or p
            if derived is None:
                try:
                    derived = list(self._derived(p, cfg))
                except _UNDESCRIBED:
                    pass
            for k, v in cfg.items():
                if _number(v) is not None:
                    numeric.add(k)
                else:
                    cats.setdefault(k, set()).add(str(v))
        if first is None:
            raise ValueError("cannot fit features on no data")
        self.numeric = sorted(numeric)
        self.categories = {k: sorted(v) for k, v in sorted(cats.items())}
        self.names = (list(problem_features(first)) + [f"knob:{k}" for k in self.numeric]
                      + [f"knob:{k}={v}" for k, vs in self.categories.items() for v in vs]
                      + ([f"derived:{n}" for n in derived] + ["derived:missing"] if derived else []))
        return self

    def baseline_log_gflops(self, X: np.ndarray) -> np.ndarray | None:
        """Per row of X, the log GFLOP/s the backend's analytical model predicts, up to
        one constant (ln flops - ln analytical time); None when the backend has no
        analytical model among its derived features.  Rows whose derived features
        are missing read 0 (their own column, 'derived:missing', tells them apart)."""
        name = baseline_of(self.backend_name)
        col = f"derived:{name}" if name else None
        if col not in self.names:
            return None
        t = X[:, self.names.index(col)]
        flops = X[:, self.names.index("log2_flops")]
        missing = X[:, self.names.index("derived:missing")] > 0
        return np.where(missing, 0.0, math.log(2) * (flops - t))

    def _derived(self, p: Problem, cfg: Config, spec: ModelFeatures | None = None) -> dict:
        spec = spec if spec is not None else model_features(self.backend_name)
        return spec.derive(p, cfg, self.limits) if spec is not None else {}

    def transform(self, problem: Problem, configs: Sequence[Mapping]) -> np.ndarray:
        """One row per config. A config the backend's derived features cannot
        describe (a knob the function does not know, a shape it refuses) keeps
        its problem and knob columns; its derived ones read MISSING and the
        column 'derived:missing' reads 1 (a backend's new knobs must not hide
        its configs from the model)."""
        if not self.names:
            raise RuntimeError("Featurizer.transform before fit")
        pf = list(problem_features(problem).values())
        n_derived = sum(n.startswith("derived:") for n in self.names)
        spec = model_features(self.backend_name) if n_derived else None
        X = np.empty((len(configs), len(self.names)), np.float64)
        for i, cfg in enumerate(configs):
            cfg = cfg if isinstance(cfg, Config) else Config(cfg)
            derived = []
            if n_derived:
                try:
                    derived = list(self._derived(problem, cfg, spec).values()) + [0.0]
                except _UNDESCRIBED:
                    derived = [MISSING] * (n_derived - 1) + [1.0]
            row = list(pf)
            for k in self.numeric:
                v = cfg.get(k)
                num = _number(v) if v is not None else MISSING
                row.append(0.0 if num is None else num)
            for k, vs in self.categories.items():
                v = str(cfg.get(k))
                row.extend(1.0 if v == c else 0.0 for c in vs)
            X[i] = row + derived
        return X

    def rows(self, pairs: Sequence[tuple[Problem, Config]]) -> np.ndarray:
        """Feature rows of many (problem, config) pairs (grouped by problem internally)."""
        X = np.empty((len(pairs), len(self.names)), np.float64)
        by_problem: dict[Problem, list[int]] = {}
        for i, (p, _) in enumerate(pairs):
            by_problem.setdefault(p, []).append(i)
        for p, idx in by_problem.items():
            X[idx] = self.transform(p, [pairs[i][1] for i in idx])
        return X
