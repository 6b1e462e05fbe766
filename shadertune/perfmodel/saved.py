"""Models saved next to the store, one per backend, device and template hash.

Two ways in, one per side of the layers:
- writers (a search when it ends, `python -m shadertune.perfmodel train`, sample,
  first-use tuning) call model_for(): it loads the saved model, or trains one
  when there is none, when it was trained on another scikit-learn or model
  format, or when the store has changed enough since (see is_stale);
- readers (`auto`: selection/chain.py, a search's cost model: guided.py) call
  saved_model() / trained_model(): the model as saved, never trained here nor
  checked against the store's growth.

Files: <store>.models/<backend>-<sha256(device)[:12]>-<template hash>.npz,
written atomically (temp file + rename): two processes that train at once
each leave a whole model.

The format is data, not code: a store and its models may be shared, and the
folder beside a store may be writable by another user, so loading a model must
never run code from it.  The file is a numpy .npz (uncompressed, read with
allow_pickle=False) holding the estimator's fitted arrays (estimator_arrays.py)
and one JSON text ("header": the featurizer's encoding, the meta, the verified
configs, how the arrays combine).  Reading it is bounded (MAX_BYTES of arrays,
jsonio's bounds on the JSON) and checked (estimator_arrays.Estimator.build): a
file that breaks either is no model, never a crash nor a walk out of bounds.

Models saved before this format are pickles (<...>.pkl).  A pickle runs code when
loaded, so one is loaded only when it belongs to the running user and neither
its group nor others may write it (checked on the opened file); any other is
ignored with one warning per file and process (RuntimeWarning): a writer (a
search's end, `perfmodel train`) then trains and saves a model in this format.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import pickle
import stat
import threading
import warnings
import zipfile

import numpy as np

from ..core import jsonio
from ..core.config import Config
from ..errors import ShadertuneError
from . import learners
from .data import training_data
from .estimator_arrays import Estimator
from .features import Featurizer
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
MAX_BYTES = 256 << 20        # a saved model's arrays, uncompressed (the default model: ~10 MB)
SUFFIX, LEGACY_SUFFIX = ".npz", ".pkl"


def model_path(store_path, backend: str, device: str, template_hash: str) -> pathlib.Path:
    dev = hashlib.sha256(device.encode()).hexdigest()[:12]
    return pathlib.Path(str(store_path) + ".models") / f"{backend}-{dev}-{template_hash}{SUFFIX}"


def legacy_path(path) -> pathlib.Path:
    """Where the same model was saved as a pickle, before the format was data."""
    return pathlib.Path(path).with_suffix(LEGACY_SUFFIX)


def model_stamp(path) -> tuple | None:
    """The model file's identity, size and modification time (None: no file; where
    there is none, the old pickle's, which load() reads then).  save() replaces the
    file, so a new model is a new file."""
    for name in (path, legacy_path(path)):
        try:
            st = os.stat(name)
        except OSError:
            continue
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns
    return None


def _header(model: PerfModel, spec: dict) -> dict:
    f = model.featurizer
    return {"format": FORMAT, "backend": model.backend, "device": model.device,
            "template_hash": model.template_hash, "limits": model.limits, "learner": model.learner,
            "target": model.target, "meta": model.meta,
            "featurizer": {"backend_name": f.backend_name, "limits": f.limits, "numeric": f.numeric,
                           "categories": f.categories, "names": f.names},
            "verified": {d: [[c.to_dict(), err] for c, err in v] for d, v in model.verified.items()},
            "estimator": spec}


def _plain(v):
    """numpy scalars in the meta (validation scores) as JSON numbers."""
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"a {type(v).__name__} in a model's meta cannot be saved")


def save(model: PerfModel, path) -> None:
    """Through the one output writer (shadertune.core.atomic): whole or not at all; data
    only (the module docstring)."""
    from ..core.atomic import output
    est = model.estimator
    if not isinstance(est, Estimator):                   # a model read from an old pickle
        est = Estimator.of(est, len(model.featurizer.names))
    header = json.dumps(_header(model, est.spec), allow_nan=True, default=_plain)
    with output(path, "wb", stream_ok=False) as f:
        np.savez(f, header=np.array(header), **est.arrays)


def _model_of(header: dict, arrays: dict) -> PerfModel:
    fz = header["featurizer"]
    feat = Featurizer(str(fz["backend_name"]), fz["limits"])
    feat.numeric = [str(k) for k in fz["numeric"]]
    feat.categories = {str(k): [str(v) for v in vs] for k, vs in fz["categories"].items()}
    feat.names = [str(n) for n in fz["names"]]
    verified = {str(d): [(Config(c), float(err)) for c, err in v]
                for d, v in header["verified"].items()}
    meta = dict(header["meta"])
    return PerfModel(backend=str(header["backend"]), device=str(header["device"]),
                     template_hash=str(header["template_hash"]), limits=header["limits"],
                     learner=str(header["learner"]), target=str(header["target"]), featurizer=feat,
                     estimator=Estimator(header["estimator"], arrays, len(feat.names)), meta=meta,
                     verified=verified)


def _read(path) -> PerfModel | None:
    """The model in a file of this format, or None (module docstring: bounded, checked)."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            with zipfile.ZipFile(f) as z:
                if sum(i.file_size for i in z.infolist()) > MAX_BYTES:
                    log.warning("saved model %s is over %d bytes: not read", path, MAX_BYTES)
                    return None
            f.seek(0)
            with np.load(f, allow_pickle=False) as npz:
                header = jsonio.loads(str(npz["header"][()]))
                arrays = {k: npz[k] for k in npz.files if k != "header"}
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            return None
        return _model_of(header, arrays)
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            zipfile.BadZipFile) as e:
        log.info("saved model %s not used: %s", path, e)
        return None


def _owned_and_safe(st: os.stat_result) -> bool:
    """A file this user owns that neither its group nor others may write."""
    return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _read_legacy(path) -> PerfModel | None:
    """A model saved as a pickle: unpickled only when the opened file is the running
    user's own and not writable by group or others; otherwise one warning, no model."""
    try:
        f = open(path, "rb")
    except OSError:
        return None
    with f:
        try:
            safe = _owned_and_safe(os.fstat(f.fileno()))
        except OSError:
            return None
        if not safe:
            key = str(path)
            if key not in _warned:
                _warned.add(key)
                warnings.warn(f"shadertune: ignoring the saved model {path}: a pickle (the old "
                              f"model format) that another user owns or may write, which would "
                              f"run its code; a search or `python -m shadertune.perfmodel train` "
                              f"on this store saves one as data", RuntimeWarning, stacklevel=4)
            return None
        try:
            m = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError,
                ValueError, ModuleNotFoundError, IndexError):
            return None
    # the last format saved as a pickle (7) reads as this one but for the estimator,
    # which is taken apart into its arrays as a new model's is
    if not isinstance(m, PerfModel) or m.meta.get("format") != 7:
        return None
    try:
        m.estimator = Estimator.of(m.estimator, len(m.featurizer.names))
    except (ValueError, AttributeError, TypeError, ImportError):
        return None
    m.meta["format"] = FORMAT
    m.meta["legacy"] = True          # a writer saves it again, as data (model_for)
    return m


def load(path) -> PerfModel | None:
    """The saved model, or None when there is none or it cannot be used here
    (another format or scikit-learn version, an unreadable file, a pickle that is
    not the running user's own: the module docstring)."""
    path = pathlib.Path(path)
    if os.path.lexists(path):
        m = _read(path)
    elif os.path.lexists(legacy_path(path)):
        m = _read_legacy(legacy_path(path))
    else:
        return None
    if m is None:
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
        if m is not None and m.meta.pop("legacy", False):
            _save_quietly(m, path, key)  # a model read from an old pickle, saved as data
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
        _save_quietly(m, path, key)
        return m, "trained"


def _save_quietly(m: PerfModel, path, key: str) -> None:
    """Save a model a writer has; a failure to save warns once (the model is used)."""
    try:
        save(m, path)
        _loaded[key] = (model_stamp(path), m)
    except (OSError, ValueError) as e:
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"shadertune: the performance model is used but not saved ({e})",
                          RuntimeWarning, stacklevel=3)


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
