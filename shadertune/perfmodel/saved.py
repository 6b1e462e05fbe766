"""Models saved next to the store, one per backend, device and template hash.

Two ways in, one per side of the layers:
- writers (a search when it ends, `python -m shadertune.perfmodel train`, sample,
  first-use tuning) call model_for(): it loads the saved model, or trains one
  when there is none, when it was trained on another scikit-learn or model
  format, or when the store has changed enough since (see is_stale);
- readers (`auto`: select.py, a search's cost model: guided.py) call
  saved_model() / trained_model(): the model as saved, never trained here nor
  checked against the store's growth.

Files: <store>.models/<backend>-<sha256(device)[:12]>-<template hash>.pkl,
written atomically (temp file + rename): two processes that train at once
each leave a whole model. A pickle runs code when loaded: a model file is
trusted as the store beside it is (both are the user's own cache).
"""
from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import pickle
import threading
import warnings

from ..errors import ShadertuneError
from . import learners
from .data import training_data
from .model import FORMAT, PerfModel

# Fewer tuned problems than this and the model cannot learn how the shape
# matters: the nearest-shape rule is used instead.
MIN_PROBLEMS = 3
MIN_ROWS = 20
# Retrain when the verified results changed by this share (and at least
# GROWTH_MIN_ROWS), or when a problem was added or removed: a first-use tune
# or a search of a new shape is new knowledge of how shapes matter.
GROWTH = 0.10
GROWTH_MIN_ROWS = 10

log = logging.getLogger(__name__)

_memory: dict[str, PerfModel] = {}           # model file -> the model model_for last had
_loaded: dict[str, tuple] = {}               # model file -> (its stamp, the model read from it)
_lock = threading.Lock()
_warned: set[str] = set()


def model_path(store_path, backend: str, device: str, template_hash: str) -> pathlib.Path:
    dev = hashlib.sha256(device.encode()).hexdigest()[:12]
    return pathlib.Path(str(store_path) + ".models") / f"{backend}-{dev}-{template_hash}.pkl"


def model_stamp(path) -> tuple | None:
    """The model file's identity, size and modification time (None: no file).  save()
    replaces the file, so a new model is a new file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def save(model: PerfModel, path) -> None:
    """Through the one output writer (shadertune.atomic): whole or not at all."""
    from ..atomic import output
    with output(path, "wb", stream_ok=False) as f:
        pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)


def load(path) -> PerfModel | None:
    """The saved model, or None when there is none or it cannot be used here
    (another format or scikit-learn version, an unreadable file)."""
    try:
        with open(path, "rb") as f:
            m = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError,
            ValueError, ModuleNotFoundError):
        return None
    if not isinstance(m, PerfModel) or m.meta.get("format") != FORMAT:
        return None
    try:
        if m.meta.get("sklearn") != learners.sklearn().__version__:
            return None
    except learners.ModelUnavailable:
        return None
    return m


def is_stale(model: PerfModel, problems: set[str], rows: int) -> bool:
    """Whether `model` should be retrained for a store that now holds verified
    results of `problems` (keys), `rows` of them in all."""
    if problems != set(model.problems):
        return True
    change = abs(rows - model.meta["rows"])
    return change >= GROWTH_MIN_ROWS and change >= GROWTH * model.meta["rows"]


def has_cost_model(backend, data) -> bool:
    """Whether `backend` has an analytical cost model (predict_ms gives times) for
    the configs of `data`."""
    if not len(data):
        return False
    try:
        return backend.predict_ms(data.problems[0], data.configs[:1]) is not None
    except (KeyError, ValueError, TypeError, ZeroDivisionError, ShadertuneError):
        return False


def model_for(backend, store, *, train: bool = True, learner: str = learners.DEFAULT,
              target: str | None = None, validate: bool = False,
              folds: int = 5) -> tuple[PerfModel | None, str]:
    """(model, note) for `backend` on its device from `store`; model is None when
    none can be had, and `note` then says why (for explanations).

    A model whose store has not changed since it was checked is used as it is
    (one count query); otherwise the store's verified results are read and the
    model retrained if is_stale() says so (train=False: never trains) on `target`
    (None: model.default_target of the backend).

    The guard: where the backend has an analytical cost model (predict_ms), a
    training also validates the learner on the store's problems (leave-problems-
    out, `folds` folds: validate.validate): on each held-out problem auto's pick
    (the fold's model over auto's candidates) against the backend's default
    config; the scores are saved with the model (meta 'guard'), and unless auto's
    picks were at least the default's speed on every held-out problem (within
    validate.NOISE) and on average, `auto` takes the default config
    (PerfModel.prefers_analytical).  A training then costs about `folds` + 1
    fits instead of one, and the backend's candidate list for each problem;
    a call that finds the model current pays nothing.
    validate=True validates even without a cost model (the summary's scores)."""
    try:
        learners.sklearn()
    except learners.ModelUnavailable as e:
        return None, f"no learned model: {e}"
    device = backend.device()
    th = backend.template_hash()
    path = model_path(store.path, backend.name, device.key, th)
    key = str(path)
    with _lock:
        m = _memory.get(key)
        if m is None:
            m = load(path)
        count = store.count()
        if m is not None and m.meta.get("store_count") == count:
            _memory[key] = m
            return m, "loaded"
        data = training_data(store, backend.name, device.key, th)
        problems = {p.key for p in data.distinct_problems}
        if m is not None and not is_stale(m, problems, len(data)):
            m.meta["store_count"] = count          # checked: the next call is one query
            _memory[key] = m
            return m, "loaded"
        if len(problems) < MIN_PROBLEMS or len(data) < MIN_ROWS:
            _memory.pop(key, None)
            return None, (f"no learned model: the store has {len(data)} verified results of "
                          f"{len(problems)} problems for {backend.name} on this device "
                          f"(a model needs {MIN_PROBLEMS} problems and {MIN_ROWS} results)")
        if not train:
            return m, "stale" if m is not None else "no learned model saved"
        cost = backend.predict_ms if has_cost_model(backend, data) else None
        log.info("training the learned model of %s on %s: %d verified results of %d problems%s",
                 backend.name, device.key, len(data), len(problems),
                 f", validated against the backend's analytical model ({folds} more fits)"
                 if validate or cost is not None else "")
        m = PerfModel.train(data, limits=device.limits, learner=learner, target=target)
        if validate or cost is not None:
            from .validate import guard_of, validate as run_validation
            v = run_validation(data, learner=learner, target=m.target, folds=folds,
                               limits=device.limits, cost_model=cost,
                               default=backend.default_config if cost is not None else None,
                               listed=backend.candidates if cost is not None else None)
            m.meta["validation"] = v
            m.meta["guard"] = guard_of(v)
        m.meta["store_count"] = count
        _memory[key] = m
        try:
            save(m, path)
            _loaded[key] = (model_stamp(path), m)
        except OSError as e:
            if key not in _warned:
                _warned.add(key)
                warnings.warn(f"shadertune: the performance model is used but not saved ({e})",
                              RuntimeWarning, stacklevel=2)
        return m, "trained"


def trained_model(backend, store) -> PerfModel | None:
    """The model last trained for `backend`'s device and templates on `store`, as it
    was saved: never trained here, nor checked against the store's growth (one
    file stat; a model file replaced since is read again).  None when none was
    saved or it cannot be loaded here."""
    device = backend.device()
    path = model_path(store.path, backend.name, device.key, backend.template_hash())
    key = str(path)
    st = model_stamp(path)
    with _lock:
        kept = _loaded.get(key)
        if kept is not None and kept[0] == st:
            return kept[1]
        m = load(path) if st is not None else None
        if m is None:
            _loaded.pop(key, None)
        else:
            _loaded[key] = (st, m)
    return m


def saved_model(backend, store) -> tuple[PerfModel | None, str]:
    """(model, note) for `auto`: the model saved for `backend`'s device and templates
    beside `store` (trained_model), else None and why (for explanations): no
    scikit-learn, too few verified results for a model, or none trained yet."""
    try:
        learners.sklearn()
    except learners.ModelUnavailable as e:
        return None, f"no learned model: {e}"
    m = trained_model(backend, store)
    if m is not None:
        return m, "saved"
    dev, th = backend.device().key, backend.template_hash()
    problems = [p for p in store.tuned_problems(backend.name, dev, th) if min(p.M, p.N, p.K) >= 1]
    counts = store.summary(("backend",), "backend = ? AND device = ? AND template_hash = ? AND "
                           "M > 0 AND N > 0 AND K > 0", [backend.name, dev, th])
    rows = int(counts[0]["correct"] or 0) if counts else 0
    if len(problems) < MIN_PROBLEMS or rows < MIN_ROWS:
        return None, (f"no learned model: the store has {rows} verified results of "
                      f"{len(problems)} problems for {backend.name} on this device "
                      f"(a model needs {MIN_PROBLEMS} problems and {MIN_ROWS} results)")
    return None, ("no learned model saved for this device and templates (a search, first-use "
                  "tuning or `python -m shadertune.perfmodel train` trains one)")


def train_if_stale(backend, store) -> tuple[PerfModel | None, str]:
    """What a writer calls when it has added results (a search's end): model_for, which
    trains only when the store changed enough since the saved model (is_stale); any
    failure to train is logged, never raised (the results are stored either way)."""
    try:
        return model_for(backend, store)
    except (ShadertuneError, ValueError, OSError) as e:
        log.warning("the learned model was not trained: %s", e)
        return None, f"not trained: {e}"


def forget() -> None:
    """Drop the models held in this process (the saved files stay)."""
    with _lock:
        _memory.clear()
        _loaded.clear()
