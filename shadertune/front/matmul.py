"""shadertune.matmul: numpy.matmul semantics on a tuned GPU kernel, one front door
for every backend.

    C = alpha * A @ B + beta * out

A call goes: check it (shadertune.call.inputs: shapes, dtypes, out, alpha/beta) ->
parse the config request (shadertune.front.requests) -> the backend's run_call(call,
plan) hook, which executes it and returns the result in the caller's array kind.
The plan resolves the config once per problem per call (a batch of a thousand
matrices reads the tuning store once) and takes kernels from the backend's
KernelCache, which releases what it drops.

Backends matmul drives: one per (name, device_index), shared by all threads, or
one per thread where the backend cannot be shared (GL: a context is current in
one thread; docs/threads.md).  A process forked from one that used them starts
with none (the parent's are left untouched: they cannot work in a child).
"""
from __future__ import annotations

import os
import pathlib
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import print_tuning
from ..selection import chain as select
from ..backends import backend_class
from ..backends.base import Backend
from ..core.config import Config
from .requests import ConfigRequest, parse_request, resolve
from ..db import changes
from ..errors import PrecisionWarning
from ..call.inputs import MatmulCall, check_call, single_out
from .kernel_cache import DEFAULT_SIZE, KernelCache
from ..names import BackendName, ConfigName, CudaArray, DeviceArrayT, TuneOnUse
from ..perfmodel.first_use_plan import FirstUse
from ..core.problem import Problem

_CACHE_SIZE = DEFAULT_SIZE           # the kernels a door keeps unless its backend says (kernels_kept)
_RESOLVED_MAX = 4096      # resolutions a door keeps (then it starts again)


class Door:
    """One backend as matmul drives it: the backend and its kernel cache."""

    # the stores' change counter (its `generation` counts this process's commits): a
    # backend's express lane compares it to know when to ask auto_config again
    changes = changes

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.kernels = KernelCache(backend.kernels_kept)
        # the thread a backend that serves one thread belongs to (its kernels are
        # released there); None for backends shared by threads
        self.thread: int | None = None if backend.shared_by_threads else threading.get_ident()
        # the backend's express lane for repeated calls (matmul), or None
        self.express = backend.express_lane(self)
        # what a config request other than 'auto' resolved to, per (problem, request,
        # adapt): such a resolution depends on the backend and the problem alone (its
        # space and defaults), so a call that repeats it is a lookup (CallPlan.config).
        # 'auto' reads the store, whose changes select_memo watches.
        self.resolved: dict[tuple[Problem, ConfigRequest, bool], Config] = {}

    def here(self) -> bool:
        """Whether the calling thread may use (and release) this door's kernels."""
        return self.thread is None or self.thread == threading.get_ident()

    def auto_config(self, problem: Problem, db: Any = None) -> Config:
        """What config='auto' takes for `problem` now (selection/chain.py; a kept selection costs
        a few stats; a config measured elsewhere verified first: select_config): the
        backend's express lane asks it, the selection being above the backends."""
        return select.select_config(self.backend, problem, db)[0]


class CallPlan:
    """One call's configs and kernels: each problem's config resolved once."""

    def __init__(self, door: Door, request: ConfigRequest, call: MatmulCall, db: Any = None) -> None:
        self.door, self.request, self.call, self.db = door, request, call, db
        self._configs: dict[tuple[Problem, bool], Config] = {}
        # what the backend ran, for its express lane to repeat: (launch, kernel,
        # config), set by a backend whose lane can (Door.express)
        self.repeat: tuple[Any, ...] | None = None

    def config(self, problem: Problem, *, adapt: bool = False) -> Config:
        key = (problem, adapt)
        cfg = self._configs.get(key)
        if cfg is None and self.request.kind != "auto":
            cfg = self.door.resolved.get((problem, self.request, adapt))
            if cfg is not None:
                self._configs[key] = cfg
                print_tuning.announce(self.door.backend, problem, self.request, cfg, self.db)
        if cfg is None:
            where = None     # the caller's shapes, named in errors of presets and knobs
            if self.request.kind in ("preset", "knobs"):
                where = self.call.where
                if (problem.M, problem.N, problem.K) != (self.call.M, self.call.N, self.call.K):
                    where += f" (its {problem.M}x{problem.N}x{problem.K} part)"
            cfg = self._configs[key] = resolve(self.door.backend, problem, self.request,
                                               db=self.db, where=where, adapt=adapt)
            if self.request.kind != "auto":
                kept = self.door.resolved
                if len(kept) >= _RESOLVED_MAX:
                    kept.clear()
                kept[(problem, self.request, adapt)] = cfg
            print_tuning.announce(self.door.backend, problem, self.request, cfg, self.db)
        return cfg

    def kernel(self, problem: Problem, *, adapt: bool = False) -> Any:
        cfg = self.config(problem, adapt=adapt)
        backend = self.door.backend
        return self.door.kernels.get((problem, cfg), lambda: backend.build(problem, cfg))


# --- the backends matmul drives ---------------------------------------------------
_DoorKey = tuple[str, "int | None"]
_shared: dict[_DoorKey, Door] = {}                   # (name, device_index) -> Door
_by_instance: weakref.WeakSet[Door] = weakref.WeakSet()   # the Doors of Backends given as objects
_local = threading.local()                           # .doors: this thread's Doors
_lock = threading.Lock()
_left_in_parent: list[Door] = []   # doors a forked child inherited: kept, never used or released
_NO_DOORS: dict[_DoorKey, Door] = {}   # a thread's doors before its first (never written)


def _thread_doors() -> dict[_DoorKey, Door]:
    doors: dict[_DoorKey, Door] | None = getattr(_local, "doors", None)
    if doors is None:
        doors = _local.doors = {}
    return doors


def _check_device_index(device_index: object) -> None:
    if device_index is not None and (isinstance(device_index, (bool, np.bool_))
                                     or not isinstance(device_index, (int, np.integer))
                                     or device_index < 0):
        raise ValueError(f"matmul: device_index must be a non-negative int, got {device_index!r}")


def door(backend: str | Backend = "gl", device_index: int | None = None) -> Door:
    """The Door for a backend name and device, or for a Backend instance."""
    # a backend shared by threads, asked for before (the common call): one dict
    # lookup, no lock (a dict read is atomic; a new door is made under the lock); a
    # backend that serves one thread (GL), asked for before in this thread: its own dict
    if type(backend) is str and (device_index is None or type(device_index) is int):
        key = (backend, device_index)
        d = _shared.get(key)
        if d is not None:
            return d
        mine: dict[_DoorKey, Door] = getattr(_local, "doors", _NO_DOORS)
        d = mine.get(key)
        if d is not None:
            return d
    if isinstance(backend, Backend):
        asked: Door | None = backend.__dict__.get("_matmul_door")     # asked for before: no lock
        if asked is not None:
            return asked
        with _lock:        # the door lives on the backend object, as long as it does
            kept: Door | None = backend.__dict__.get("_matmul_door")
            if kept is None:
                kept = backend.__dict__["_matmul_door"] = Door(backend)
                _by_instance.add(kept)
        return kept
    if not isinstance(backend, str):
        raise TypeError(f"matmul: backend must be a name ('gl', 'cuda') or a Backend, "
                        f"got {type(backend).__name__}")
    try:
        cls = backend_class(backend)
    except ValueError as e:
        raise ValueError(f"matmul: {e}") from None
    _check_device_index(device_index)
    key = (backend, None if device_index is None else int(device_index))
    if not cls.shared_by_threads:
        doors = _thread_doors()
        d = doors.get(key)
        if d is None:
            d = doors[key] = Door(cls.on_device(key[1]))
        return d
    with _lock:
        d = _shared.get(key)
        if d is None:
            d = _shared[key] = Door(cls.on_device(key[1]))
    return d


def backend(name: str | Backend = "gl", device_index: int | None = None) -> Backend:
    """The backend matmul uses for `name` on `device_index` in this thread."""
    return door(name, device_index).backend


def kernel(backend: Backend, problem: Problem, config: Mapping[str, Any]) -> Any:
    """The kernel matmul's cache holds for (problem, config) on `backend`, built if absent."""
    cfg = Config(config)
    d = _door_of(backend)
    return d.kernels.get((problem, cfg), lambda: backend.build(problem, cfg))


def _door_of(be: Backend) -> Door:
    for d in list(_thread_doors().values()) + list(_shared.values()):
        if d.backend is be:
            return d
    return door(be)


def _doors_here() -> list[Door]:
    """The doors whose kernels the calling thread may use and release."""
    with _lock:
        shared = list(_shared.values()) + list(_by_instance)
    return list(_thread_doors().values()) + [d for d in shared if d.here()]


def clear_cache() -> None:
    """Release the cached kernels of this thread's and every shared backend (another
    thread's GL kernels are released when that thread ends, with its context)."""
    for d in _doors_here():
        d.kernels.clear()


def cached_kernels() -> int:
    """Kernels cached for this thread's calls."""
    return sum(len(d.kernels) for d in _doors_here())


def _forget_after_fork() -> None:
    """In a forked child: start with no backends.  The parent's cannot work here (a GL
    context or CUDA module does not survive fork); they are kept, never released, since
    releasing them would call into a driver that is not there."""
    global _lock
    _left_in_parent.extend(_shared.values())
    _left_in_parent.extend(getattr(_local, "doors", {}).values())
    _shared.clear()
    _local.doors = {}
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


# --- the front door -------------------------------------------------------------
# What the keyword arguments take (the same for every overload below)
ConfigSpec = ConfigName | str | Mapping[str, Any] | Config | None   # str: also JSON text
TuneSpec = TuneOnUse | FirstUse | bool | None
if TYPE_CHECKING:
    from ..backends.gl.platform.arrays import GLArray
    from ..db import Store
    StoreSpec = str | os.PathLike[str] | Store | None
else:
    StoreSpec = Any

_OutT = TypeVar("_OutT", bound="np.ndarray[Any, Any] | CudaArray | GLArray")


# The result's type is the caller's: a GL array where one takes part and out is not
# given, a device operand's own kind (the first one's, A's before B's), else out's, else
# a numpy array (numpy.ndarray's own stubs type A @ B of 1-D operands as an array too,
# where numpy returns a scalar: so do these).
@overload
def matmul(A: GLArray, B: GLArray | ArrayLike, out: None = None, *,
           backend: BackendName | Backend = "gl", config: ConfigSpec = "auto", alpha: float = 1.0,
           beta: float = 0.0, device_index: int | None = None, db: StoreSpec = None,
           tune: TuneSpec = None) -> GLArray: ...
@overload
def matmul(A: ArrayLike, B: GLArray, out: None = None, *,
           backend: BackendName | Backend = "gl", config: ConfigSpec = "auto", alpha: float = 1.0,
           beta: float = 0.0, device_index: int | None = None, db: StoreSpec = None,
           tune: TuneSpec = None) -> GLArray: ...
@overload
def matmul(A: DeviceArrayT, B: CudaArray | ArrayLike, out: None = None, *,
           backend: BackendName | Backend = "gl", config: ConfigSpec = "auto", alpha: float = 1.0,
           beta: float = 0.0, device_index: int | None = None, db: StoreSpec = None,
           tune: TuneSpec = None) -> DeviceArrayT: ...
@overload
def matmul(A: ArrayLike, B: DeviceArrayT, out: None = None, *,
           backend: BackendName | Backend = "gl", config: ConfigSpec = "auto", alpha: float = 1.0,
           beta: float = 0.0, device_index: int | None = None, db: StoreSpec = None,
           tune: TuneSpec = None) -> DeviceArrayT: ...
@overload
def matmul(A: CudaArray | GLArray | ArrayLike, B: CudaArray | GLArray | ArrayLike, out: _OutT, *,
           backend: BackendName | Backend = "gl", config: ConfigSpec = "auto", alpha: float = 1.0,
           beta: float = 0.0, device_index: int | None = None, db: StoreSpec = None,
           tune: TuneSpec = None) -> _OutT: ...
@overload
def matmul(A: ArrayLike, B: ArrayLike, out: None = None, *,
           backend: BackendName | Backend = "gl", config: ConfigSpec = "auto", alpha: float = 1.0,
           beta: float = 0.0, device_index: int | None = None, db: StoreSpec = None,
           tune: TuneSpec = None) -> NDArray[Any]: ...
def matmul(A: Any, B: Any, out: Any = None, *, backend: str | Backend = "gl",
           config: ConfigSpec = "auto", alpha: float = 1.0, beta: float = 0.0,
           device_index: int | None = None, db: StoreSpec = None,
           tune: TuneSpec = None) -> Any:
    """Matrix product ``alpha * A @ B + beta * out`` with numpy.matmul semantics, on a
    tuned GPU kernel.

    Parameters
    ----------
    A, B : array_like
        Real operands: 1-D, 2-D or stacks of matrices, broadcast like
        ``numpy.matmul`` (any strides or memory order).  numpy arrays, anything
        ``numpy.asarray`` takes, and, on the CUDA backend, CuPy arrays and PyTorch
        CUDA tensors (computed where they are).
    out : ndarray, optional
        Where the result goes, as numpy's ``out`` (any floating dtype numpy's
        same-kind casting allows; its batch dimensions may broadcast).  With
        ``beta != 0`` it is also the C that is added.
    backend : {"gl", "cuda"} or Backend, optional
        ``"gl"`` (default): GLSL shaders through EGL (Mesa llvmpipe without a GPU),
        computing in float32.  ``"cuda"``: generated CUDA kernels (CuPy), float64
        where numpy's result is float64.  Or a :class:`shadertune.backends.Backend`
        instance (docs/backends.md).
    config : str, dict, Config or None, optional
        Which kernel: ``"auto"`` (default: the fastest verified config the store
        holds for this device and shape, else the learned model's pick, else the
        nearest tuned shape's, else the default; :func:`shadertune.explain` says
        which and why), ``"default"`` (or None: the backend's untuned default), a
        preset name (``backend.presets()``: ``"fast"``; GL's ``"jiang"``,
        ``"naive"``; CUDA's ``"ffma"``), or knobs as a dict, Config or JSON text
        (knobs left out come from the default config; docs/knobs.md lists them).
    alpha, beta : float, optional
        The scalars of ``alpha * A @ B + beta * out`` (beta needs ``out``).
    device_index : int, optional
        Which GPU: the EGL device for GL, the device id for CUDA (default: the
        first).
    db : str or os.PathLike or Store, optional
        The tuning store ``"auto"`` reads (default: ``$SHADERTUNE_DB``, else
        ``$XDG_CACHE_HOME/shadertune/tune.sqlite``; a missing store is not made).
    tune : {None, "first-use"} or FirstUse, optional
        With ``config="auto"``: None (default) only reads the store; ``"first-use"``
        (or ``shadertune.perfmodel.FirstUse(k, seconds)``) first times up to 8
        configs for 20 s at most, verified against float64 and stored, when the
        store has no verified result for this shape; later calls find it stored
        (docs/perfmodel.md).  It logs what it does on the ``shadertune`` logger.

    Returns
    -------
    ndarray or scalar
        numpy.matmul's result: ``out`` itself when given; a numpy scalar for 1-D @
        1-D; np.matrix for np.matrix inputs; a CuPy array or PyTorch tensor for
        those inputs on the CUDA backend.  bool @ bool is bool.  The dtype is
        float32 on GL (float64 operands warn with
        :class:`shadertune.errors.PrecisionWarning`: once per calling line under
        Python's default filter, every call under "always" or "error"), numpy's on CUDA.

    Raises
    ------
    ValueError
        Shapes that do not align or broadcast (naming both shapes, as numpy does),
        an unknown backend or config, a config not valid for the shape.
    TypeError
        Complex, string, object or masked operands; an integer ``out``; a config
        or ``tune`` of the wrong kind.
    shadertune.errors.ContextError
        No device for the backend (no EGL driver, no CUDA GPU), or a process forked
        after the device was used.

    See Also
    --------
    shadertune.tune : tune a shape so that ``config="auto"`` finds it stored.
    shadertune.explain : which config ``"auto"`` takes, and why.

    Notes
    -----
    Every tuned kernel was verified against a float64 reference before it was
    stored; ``"auto"`` runs only configs verified on this device or the backend's
    own candidate list.  Semantics and errors in detail: docs/semantics.md.

    Examples
    --------
    >>> import numpy as np, shadertune
    >>> A, B = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    >>> shadertune.matmul(A, B).shape
    (3, 5)
    >>> C = shadertune.matmul(A, B, config="default", alpha=2.0)
    >>> float(C[0, 0])
    8.0
    """
    if type(out) is tuple:
        out = single_out(out)
    # The express lane: a call like one this door ran before (same array kinds,
    # shapes, strides, dtypes, alignment, device, config and store), without
    # tune, repeats that launch without the analysis below (backends/cuda/express.py).
    d = door(backend, device_index)
    lane_call = (d.express is not None and tune is None and type(alpha) in _REAL
                 and type(beta) in _REAL and (out is not None or beta == 0)
                 and (lane_config := _lane_config(config)) is not None
                 and (db is None or type(db) is str or isinstance(db, pathlib.PurePath) or _is_store(db)))
    if lane_call:
        r = d.express.run(A, B, out, lane_config, float(alpha), float(beta), db)
        if r is not None:
            return r
    be = d.backend
    call = check_call(A, B, out, alpha=alpha, beta=beta, dtypes=be.dtypes)
    if call.resident is not None and call.resident != be.name:
        raise TypeError(f"matmul: a {call.resident.upper()} array (shadertune.{call.resident}) lives in "
                        f"the {call.resident} backend's memory, and the {be.name} backend does not read "
                        f"it: use backend={call.resident!r}, or pass its .numpy()")
    if call.dtype == "float32" and call.result_dtype.kind == "f" and call.result_dtype.itemsize >= 8:
        _warn_narrowed(be, call)
    request = parse_request(config, be, tune)
    if call.logical:
        return _logical(call, d, request, db)
    plan = CallPlan(d, request, call, db)
    result = be.run_call(call, plan)
    if lane_call and plan.repeat is not None:
        d.express.learn(A, B, out, lane_config, db, call, *plan.repeat, auto=request.kind == "auto")
    return _numpy_result(call, result)


def _warn_narrowed(be: Backend, call: MatmulCall) -> None:
    """Warn that numpy's float64 result is computed (and returned) in float32.  A
    warning, as numpy warns of a cast that loses what the caller gave (ComplexWarning),
    raised on every such call: the warnings module's own registry and the caller's
    filters decide what is shown (the default filter shows it once per calling line;
    "error" raises and "always" shows it on every call), and it names the caller's line."""
    warnings.warn(f"shadertune.matmul: {call.result_dtype} operands on the {be.name} backend are "
                  f"computed and returned in float32 (about 7 significant digits); a backend "
                  f"that computes in float64 (its dtypes) keeps numpy's precision",
                  PrecisionWarning, stacklevel=3)


_REAL = (float, int)   # alpha and beta types the express lane takes as they are


def _is_store(db: object) -> bool:
    """Whether db is a Store (a Store exists only once its module is imported:
    the check imports nothing)."""
    store = sys.modules.get("shadertune.db.store")
    return store is not None and isinstance(db, store.Store)


def _lane_config(config: object) -> Hashable | None:
    """The express lane's key for a config request: a name or JSON text as it is, a
    Config (hashable), a dict as its items (knobs resolve alike for one problem
    whatever their order; a dict in another order is only a first call again);
    None (the regular path) for anything else."""
    t = type(config)
    if t is str or t is Config:
        return config
    if t is dict:
        # the last dict's key, while that same dict holds the same items (a compare
        # allocates nothing; building and hashing the items is the cost saved)
        last = _last_knobs
        if last[0] is config:
            try:
                if config == last[1]:
                    return last[2]
            except Exception:       # noqa: BLE001 (a value changed to one that will not compare)
                pass
        knobs = cast("dict[str, Any]", config)
        key = ("knobs",) + tuple(knobs.items())
        _remember_knobs(knobs, key)
        return key
    return None


_last_knobs: tuple[Any, Any, Hashable] = (None, None, None)    # (dict, a copy of it, its lane key)


def _remember_knobs(config: dict[str, Any], key: tuple[Any, ...]) -> None:
    global _last_knobs
    try:
        hash(key)
    except TypeError:           # an unhashable value: the lane refuses it (never kept)
        return
    _last_knobs = (config, dict(config), key)


def _logical(call: MatmulCall, d: Door, request: ConfigRequest, db: Any) -> Any:
    """bool @ bool: numpy's logical OR of ANDs, as (count of true products) > 0 (a count
    of non-negative terms is never rounded to zero)."""
    from dataclasses import replace
    counts_call = replace(call, out=None, batch=call.batch)
    counts = d.backend.run_call(counts_call, CallPlan(d, request, counts_call, db))
    result = counts > 0
    if call.out is not None:
        call.out[...] = result
        return call.out
    return _numpy_result(call, result)


def _numpy_result(call: MatmulCall, result: Any) -> Any:
    """What numpy.matmul returns: out itself; a numpy scalar for 1-D @ 1-D; the input's
    ndarray subclass (np.matrix) where numpy would wrap the result in it."""
    if call.out is not None:
        return call.out
    if call.wrap is not None and isinstance(result, np.ndarray):
        return call.wrap.__array_wrap__(result, None, False)
    if isinstance(result, np.ndarray) and result.ndim == 0:
        return result[()]
    return result
