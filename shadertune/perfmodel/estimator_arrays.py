"""A fitted estimator as plain arrays: how a learned model is saved as data, not code.

A saved model is read from a folder beside the store, which another user may be able
to write (a lab's shared store); a pickle runs code when it is loaded, so a model is
never saved as one.  Instead the fitted scikit-learn estimator is taken apart into
its fitted arrays (the nodes of each tree, the layers of a network, the coefficients
of a linear model) and a small description of how they combine, and predictions are
computed from those arrays here, with numpy:

    spec, arrays = from_sklearn(estimator, n_features)   # after fitting
    est = Estimator.build(spec, arrays, n_features)      # checked: see below
    est.predict(X)                                        # == estimator.predict(X)

What is supported is what learners.make builds: ExtraTrees and RandomForest regressors
(the mean of their trees, compared in float32 as scikit-learn's trees compare),
HistGradientBoosting with the squared error (its baseline plus the sum of its trees,
compared in float64, numerical splits only), Ridge, StandardScaler, an MLP regressor
(relu, tanh, logistic or identity layers), a Pipeline of those and a VotingRegressor
(the weighted mean of its members).  Anything else raises ValueError when saved.

build() checks what it is given before anything is computed from it, since the arrays
come from a file: every array of the dtype and shape its node says, every child of a
tree node later in its tree than the node itself (so a walk down a tree ends) and
inside the tree, every feature index below n_features, every root a node, nesting at
most MAX_DEPTH deep.  A file that breaks any of this is refused (ValueError), never
followed out of bounds.

The predictions equal scikit-learn's to rounding (tests/test_saved_model_format.py);
they cost about 3x scikit-learn's compiled ones (2000 configs on the default
extratrees+hgb model: 0.5 s against 0.17 s on the loaded 2-core machine;
notes/perfmodel.md).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

MAX_DEPTH = 8                 # pipelines and votes nest no deeper than this
ACTIVATIONS = ("relu", "tanh", "logistic", "identity")


def _activate(name: str, x: np.ndarray) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "tanh":
        return np.tanh(x)
    if name == "logistic":
        return 1.0 / (1.0 + np.exp(-x))
    return x


# --- from a fitted scikit-learn estimator ----------------------------------------------

class _Arrays:
    """The arrays of a spec being made, named a0, a1, ..."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def add(self, a) -> str:
        name = f"a{len(self.arrays)}"
        self.arrays[name] = np.ascontiguousarray(a)
        return name


def _pack_trees(trees, out: _Arrays) -> dict:
    """Trees given as (left, right, feature, threshold, value, missing_go_to_left),
    leaves marked by left == -1, packed into one set of arrays: children[2i], [2i+1]
    the left and right child of node i (a leaf is its own children)."""
    children, feature, threshold, value, missing, roots = [], [], [], [], [], []
    offset = 0
    for left, right, feat, thr, val, miss in trees:
        n = len(left)
        leaf = left < 0
        ids = np.arange(n)
        ch = np.empty(2 * n, np.int64)
        ch[0::2] = np.where(leaf, ids, left) + offset
        ch[1::2] = np.where(leaf, ids, right) + offset
        children.append(ch)
        feature.append(np.where(leaf, 0, feat))
        threshold.append(np.asarray(thr, np.float64))
        value.append(np.asarray(val, np.float64))
        missing.append(np.asarray(miss, np.uint8))
        roots.append(offset)
        offset += n
    return {"children": out.add(np.concatenate(children).astype(np.int32)),
            "feature": out.add(np.concatenate(feature).astype(np.int32)),
            "threshold": out.add(np.concatenate(threshold)),
            "value": out.add(np.concatenate(value)),
            "missing_left": out.add(np.concatenate(missing)),
            "roots": out.add(np.asarray(roots, np.int32))}


def _sk_tree(t) -> tuple:
    t = t.tree_
    if t.n_outputs != 1 or t.value.shape[1:] != (1, 1):
        raise ValueError("only single-output regression trees are saved")
    miss = getattr(t, "missing_go_to_left", np.zeros(t.node_count, np.uint8))
    return (t.children_left, t.children_right, t.feature, t.threshold, t.value[:, 0, 0], miss)


def _hgb_tree(p) -> tuple:
    nd = p.nodes
    if nd["is_categorical"].any():
        raise ValueError("categorical splits are not saved")
    leaf = nd["is_leaf"].astype(bool)
    left = np.where(leaf, -1, nd["left"].astype(np.int64))
    right = np.where(leaf, -1, nd["right"].astype(np.int64))
    return (left, right, nd["feature_idx"], nd["num_threshold"], nd["value"], nd["missing_go_to_left"])


def _spec(est, out: _Arrays, depth: int = 0) -> dict:
    if depth > MAX_DEPTH:
        raise ValueError("estimators nested too deeply to save")
    from sklearn.ensemble import (ExtraTreesRegressor, HistGradientBoostingRegressor,
                                  RandomForestRegressor, VotingRegressor)
    from sklearn.linear_model import Ridge
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    if isinstance(est, (ExtraTreesRegressor, RandomForestRegressor)):
        return {"kind": "trees", "compare": "float32", "combine": "mean", "baseline": 0.0,
                **_pack_trees([_sk_tree(t) for t in est.estimators_], out)}
    if isinstance(est, HistGradientBoostingRegressor):
        if est.loss != "squared_error" or est.n_trees_per_iteration_ != 1:
            raise ValueError(f"a gradient-boosting loss {est.loss!r} is not saved")
        return {"kind": "trees", "compare": "float64", "combine": "sum",
                "baseline": float(np.ravel(est._baseline_prediction)[0]),
                **_pack_trees([_hgb_tree(p) for it in est._predictors for p in it], out)}
    if isinstance(est, Ridge):
        coef = np.asarray(est.coef_, np.float64)
        if coef.ndim != 1:
            raise ValueError("only single-output linear models are saved")
        return {"kind": "linear", "coef": out.add(coef), "intercept": float(est.intercept_)}
    if isinstance(est, StandardScaler):
        n = est.n_features_in_
        mean = est.mean_ if est.with_mean else np.zeros(n)
        scale = est.scale_ if est.with_std else np.ones(n)
        return {"kind": "scaler", "mean": out.add(np.asarray(mean, np.float64)),
                "scale": out.add(np.asarray(scale, np.float64))}
    if isinstance(est, MLPRegressor):
        if est.activation not in ACTIVATIONS or est.out_activation_ != "identity":
            raise ValueError(f"an MLP with activation {est.activation!r} is not saved")
        return {"kind": "mlp", "activation": est.activation,
                "coefs": [out.add(np.asarray(c, np.float64)) for c in est.coefs_],
                "intercepts": [out.add(np.asarray(b, np.float64)) for b in est.intercepts_]}
    if isinstance(est, Pipeline):
        return {"kind": "pipeline", "steps": [_spec(s, out, depth + 1) for _, s in est.steps]}
    if isinstance(est, VotingRegressor):
        w = None if est.weights is None else [float(x) for x in est.weights]
        return {"kind": "mean", "members": [_spec(e, out, depth + 1) for e in est.estimators_],
                "weights": w}
    raise ValueError(f"a {type(est).__name__} is not saved as arrays")


def from_sklearn(est) -> tuple[dict, dict[str, np.ndarray]]:
    """(spec, arrays) of a fitted estimator (see the module docstring); ValueError for
    an estimator this module does not take apart."""
    out = _Arrays()
    spec = _spec(est, out)
    return spec, out.arrays


# --- built from arrays, checked ------------------------------------------------------------

def _array(arrays: Mapping, name, kind: str, ndim: int) -> np.ndarray:
    if not isinstance(name, str) or name not in arrays:
        raise ValueError(f"no array {name!r}")
    a = arrays[name]
    if not isinstance(a, np.ndarray) or a.dtype.kind != kind or a.ndim != ndim:
        raise ValueError(f"array {name} is not a {ndim}-d array of kind {kind!r}")
    return a


class _Trees:
    def __init__(self, spec: Mapping, arrays: Mapping, n_features: int):
        ch = _array(arrays, spec["children"], "i", 1).astype(np.int64)
        self.feature = _array(arrays, spec["feature"], "i", 1).astype(np.int64)
        self.threshold = _array(arrays, spec["threshold"], "f", 1).astype(np.float64)
        self.value = _array(arrays, spec["value"], "f", 1).astype(np.float64)
        self.missing_left = _array(arrays, spec["missing_left"], "u", 1).astype(bool)
        self.roots = _array(arrays, spec["roots"], "i", 1).astype(np.int64)
        n = len(self.feature)
        if not (len(ch) == 2 * n and len(self.threshold) == len(self.value) == len(self.missing_left) == n):
            raise ValueError("tree arrays of different lengths")
        if n == 0 or len(self.roots) == 0:
            raise ValueError("no trees")
        ids = np.arange(n)
        left, right = ch[0::2], ch[1::2]
        self.leaf = (left == ids) & (right == ids)
        inner = ~self.leaf
        # a walk goes to later nodes only, inside the arrays: it ends, in bounds
        if ((left[inner] <= ids[inner]) | (right[inner] <= ids[inner]) |
                (left[inner] >= n) | (right[inner] >= n)).any():
            raise ValueError("a tree node's children are not later nodes of the tree")
        if ((self.feature[inner] < 0) | (self.feature[inner] >= n_features)).any():
            raise ValueError("a tree node reads a feature the model does not have")
        if ((self.roots < 0) | (self.roots >= n)).any():
            raise ValueError("a tree's root is not a node")
        self.children = ch
        self.compare32 = spec["compare"] == "float32"
        if spec["compare"] not in ("float32", "float64") or spec["combine"] not in ("mean", "sum"):
            raise ValueError("unknown tree comparison or combination")
        self.mean = spec["combine"] == "mean"
        self.baseline = float(spec["baseline"])

    def predict(self, X: np.ndarray) -> np.ndarray:
        if self.compare32:           # scikit-learn's trees compare float32 features
            X = X.astype(np.float32).astype(np.float64)
        n, nf = X.shape
        k = len(self.roots)
        node = np.tile(self.roots, n)                    # one walk per (row, tree)
        base = np.repeat(np.arange(n, dtype=np.int64) * nf, k)
        flat = X.ravel()
        nan = bool(np.isnan(flat).any())
        active = np.flatnonzero(~self.leaf[node])
        nd, b = node[active], base[active]
        while active.size:
            x = flat[b + self.feature[nd]]
            right = x > self.threshold[nd]               # x <= threshold goes left
            if nan:
                right = np.where(np.isnan(x), ~self.missing_left[nd], right)
            nd = self.children[2 * nd + right]
            going = ~self.leaf[nd]
            node[active[~going]] = nd[~going]
            active, nd, b = active[going], nd[going], b[going]
        leaves = self.value[node].reshape(n, k)
        out = leaves.mean(axis=1) if self.mean else leaves.sum(axis=1)
        return out + self.baseline


class _Linear:
    def __init__(self, spec, arrays, n_features):
        self.coef = _array(arrays, spec["coef"], "f", 1).astype(np.float64)
        if len(self.coef) != n_features:
            raise ValueError("linear coefficients for another number of features")
        self.intercept = float(spec["intercept"])

    def predict(self, X):
        return X @ self.coef + self.intercept


class _Scaler:
    def __init__(self, spec, arrays, n_features):
        self.mean = _array(arrays, spec["mean"], "f", 1).astype(np.float64)
        self.scale = _array(arrays, spec["scale"], "f", 1).astype(np.float64)
        if not len(self.mean) == len(self.scale) == n_features:
            raise ValueError("scaler arrays for another number of features")

    def transform(self, X):
        return (X - self.mean) / self.scale


class _MLP:
    def __init__(self, spec, arrays, n_features):
        if spec["activation"] not in ACTIVATIONS:
            raise ValueError(f"unknown activation {spec['activation']!r}")
        self.activation = spec["activation"]
        self.coefs = [_array(arrays, c, "f", 2).astype(np.float64) for c in spec["coefs"]]
        self.intercepts = [_array(arrays, b, "f", 1).astype(np.float64) for b in spec["intercepts"]]
        width = n_features
        if not self.coefs or len(self.coefs) != len(self.intercepts):
            raise ValueError("an MLP's layers and intercepts do not pair")
        for W, b in zip(self.coefs, self.intercepts):
            if W.shape[0] != width or b.shape != (W.shape[1],):
                raise ValueError("an MLP layer of the wrong shape")
            width = W.shape[1]
        if width != 1:
            raise ValueError("an MLP with more than one output")

    def predict(self, X):
        h = X
        for i, (W, b) in enumerate(zip(self.coefs, self.intercepts)):
            h = h @ W + b
            if i < len(self.coefs) - 1:
                h = _activate(self.activation, h)
        return h.ravel()


class _Pipeline:
    def __init__(self, spec, arrays, n_features, depth):
        steps = spec["steps"]
        if not isinstance(steps, list) or not steps:
            raise ValueError("a pipeline without steps")
        self.transforms = [_Scaler(s, arrays, n_features) if s.get("kind") == "scaler"
                           else _refuse(s) for s in steps[:-1]]
        self.last = _build(steps[-1], arrays, n_features, depth + 1)

    def predict(self, X):
        for t in self.transforms:
            X = t.transform(X)
        return self.last.predict(X)


def _refuse(spec):
    raise ValueError(f"a pipeline step {spec.get('kind')!r} that is not a scaler")


class _Mean:
    def __init__(self, spec, arrays, n_features, depth):
        members = spec["members"]
        if not isinstance(members, list) or not members:
            raise ValueError("a mean of no estimators")
        self.members = [_build(m, arrays, n_features, depth + 1) for m in members]
        w = spec.get("weights")
        self.weights = None if w is None else np.asarray([float(x) for x in w])
        if self.weights is not None and (len(self.weights) != len(self.members)
                                         or not np.isfinite(self.weights).all()
                                         or self.weights.sum() <= 0):
            raise ValueError("a mean's weights do not fit its members")

    def predict(self, X):
        return np.average(np.stack([m.predict(X) for m in self.members], axis=1), axis=1,
                          weights=self.weights)


def _build(spec, arrays, n_features: int, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ValueError("estimators nested too deeply")
    if not isinstance(spec, Mapping):
        raise ValueError("an estimator's description is not an object")
    kind = spec.get("kind")
    if kind == "trees":
        return _Trees(spec, arrays, n_features)
    if kind == "linear":
        return _Linear(spec, arrays, n_features)
    if kind == "mlp":
        return _MLP(spec, arrays, n_features)
    if kind == "pipeline":
        return _Pipeline(spec, arrays, n_features, depth)
    if kind == "mean":
        return _Mean(spec, arrays, n_features, depth)
    raise ValueError(f"unknown estimator kind {kind!r}")


class Estimator:
    """A fitted estimator rebuilt from its arrays: predict(X) -> one value per row."""

    def __init__(self, spec: dict, arrays: dict, n_features: int):
        self.spec, self.arrays, self.n_features = spec, arrays, n_features
        try:
            self._model = _build(spec, arrays, n_features)
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a saved estimator ({type(e).__name__}: {e})") from None

    @classmethod
    def of(cls, fitted, n_features: int) -> "Estimator":
        """From a fitted scikit-learn estimator (from_sklearn)."""
        spec, arrays = from_sklearn(fitted)
        return cls(spec, arrays, n_features)

    def predict(self, X) -> np.ndarray:
        X = np.asarray(X, np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"expected rows of {self.n_features} features, got shape {X.shape}")
        return self._model.predict(X)


__all__ = ["Estimator", "from_sklearn"]
