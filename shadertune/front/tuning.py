"""shadertune.tune: tune shapes so that matmul(config="auto") finds them in the store.

It is the search (shadertune.search) as a library call in the front door's layer:
the problem a matmul call would resolve a config for (Backend.problem_of), the
learned model saved beside the store as the search's cost model where there is
one, every config verified against float64 and stored as it is measured, and the
learned model trained afterwards when the store changed enough: tune, then train,
as the search command line does (perfmodel.tuning_run; tuning writes, `auto` only
reads).
"""
from __future__ import annotations

import logging
import math
import numbers
import os
import pathlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike

from .matmul import backend as matmul_backend
from ..backends import config_text
from ..backends.base import Backend
from ..core.config import Config
from ..db import Store
from ..call.inputs import check_call
from ..names import BackendName, DTypeName, StrategyName
from ..perfmodel.tuning_run import TuningRun
from ..core.problem import Problem
from ..core.result import Result
from ..search import Budget, get_strategy
from ..search.progress import Progress

log = logging.getLogger("shadertune.tuning")    # its documented name

# the search time per shape when neither evaluations nor seconds are given
DEFAULT_SECONDS = 60.0


@dataclass(frozen=True)
class TuneResult:
    """What tuning one shape found.

    Attributes
    ----------
    problem : Problem
        The shape tuned (M, N, K, dtype, trans flags).
    backend, device : str
        The backend's name and the device's key in the store (renderer | driver).
    config : Config or None
        The fastest config verified against float64; None when none passed.
    gflops, ms, error : float or None
        Its speed (GFLOP/s and the median milliseconds of its timed runs) and its
        relative error against the float64 reference.
    evaluated : int
        Configs evaluated (measured now or replayed from the store).
    seconds : float
        Wall seconds the search took.
    store : pathlib.Path
        The store the results are in (what ``matmul(..., db=store)`` reads).
    entry : dict
        The search's report entry for the problem, as ``python -m shadertune.search
        --report`` writes it (every Result in evaluation order, the space sizes,
        where the time went; shadertune/search/report_json.py).
    """
    problem: Problem
    backend: str
    device: str
    config: Config | None
    gflops: float | None
    ms: float | None
    error: float | None
    evaluated: int
    seconds: float
    store: pathlib.Path
    entry: dict[str, Any] = field(repr=False, compare=False)

    def __str__(self) -> str:
        return f"{self.problem.label} on {self.backend} ({self.device}): {self.summary()}"

    def summary(self, *, full_config: bool = False) -> str:
        """The best config (the knobs that act on it; every knob with `full_config`),
        its speed and error, and what the search took."""
        if self.config is None and not self.evaluated:
            return "nothing was measured within the time limit"
        if self.config is None:
            return (f"no config passed verification in {self.evaluated} evaluations "
                    f"({self.seconds:.1f} s)")
        knobs = config_text(self.backend, self.config, full=full_config)
        return (f"{knobs}: {self.gflops:.3g} GFLOP/s ({self.ms:.4g} ms, error "
                f"{self.error:.1e}); {self.evaluated} configs in {self.seconds:.1f} s")


# A shape tune() takes: N, "MxNxK" (or "M,N,K"), (M, N, K) or a Problem.
Shape = int | str | tuple[int, int, int] | Problem
# A list of shapes, each tuned in turn: of several kinds (a list written in the call), or
# of one kind (a list[int] made before: a list of the union would not take it)
Shapes = list[int] | list[str] | list[tuple[int, int, int]] | list[Problem]
StoreSpec = str | os.PathLike[str] | Store | None


@overload
def tune(shape: list[Shape], /, *, backend: BackendName | Backend = "gl", evaluations: int | None = None,
         seconds: float | None = None, db: StoreSpec = None, strategy: StrategyName | None = None,
         dtype: DTypeName = "float32", device_index: int | None = None, train: bool = True,
         progress: bool = True) -> list[TuneResult]: ...
@overload
def tune(shape: Shapes, /, *, backend: BackendName | Backend = "gl", evaluations: int | None = None,
         seconds: float | None = None, db: StoreSpec = None, strategy: StrategyName | None = None,
         dtype: DTypeName = "float32", device_index: int | None = None, train: bool = True,
         progress: bool = True) -> list[TuneResult]: ...
@overload
def tune(shape: Shape, /, *, backend: BackendName | Backend = "gl", evaluations: int | None = None,
         seconds: float | None = None, db: StoreSpec = None, strategy: StrategyName | None = None,
         dtype: DTypeName = "float32", device_index: int | None = None, train: bool = True,
         progress: bool = True) -> TuneResult: ...
@overload
def tune(shape: ArrayLike, B: ArrayLike, /, *, backend: BackendName | Backend = "gl",
         evaluations: int | None = None, seconds: float | None = None, db: StoreSpec = None,
         strategy: StrategyName | None = None, dtype: DTypeName = "float32",
         device_index: int | None = None, train: bool = True, progress: bool = True) -> TuneResult: ...
def tune(shape: Any, B: ArrayLike | None = None, /, *, backend: str | Backend = "gl",
         evaluations: int | None = None, seconds: float | None = None, db: StoreSpec = None,
         strategy: str | None = None, dtype: str = "float32", device_index: int | None = None,
         train: bool = True, progress: bool = True) -> TuneResult | list[TuneResult]:
    """Tune a matmul shape on a backend and store what was measured, so that
    ``shadertune.matmul(..., config="auto")`` runs the fastest verified config.

    Parameters
    ----------
    shape : int, str, tuple, Problem, array_like, or a list of shapes
        What to tune: ``N`` (N x N x N), ``"MxNxK"`` or ``"M,N,K"``, the tuple
        ``(M, N, K)``, a :class:`shadertune.Problem` (dtype and trans flags
        included), or the first operand ``A`` of a matmul call with ``B`` (the
        problem ``matmul(A, B)`` resolves a config for: its main tile where GL
        tiles it).  A list tunes each of its shapes in turn (``[256, 512]``: two
        square sizes), training the model once at the end.
    B : array_like, optional
        The second operand, when ``shape`` is the first.
    backend : {"gl", "cuda"} or Backend, optional
        The backend to tune on (default ``"gl"``): matmul's instance for it.
    evaluations : int, optional
        At most this many configs per shape.
    seconds : float, optional
        No evaluation starts after this many seconds per shape.  With neither
        budget given, 60 seconds per shape.
    db : str or os.PathLike or Store, optional
        The tuning store (default: ``$SHADERTUNE_DB``, else
        ``$XDG_CACHE_HOME/shadertune/tune.sqlite``); made when missing.  A store
        tuned before is resumed: configs measured there are replayed, not timed.
    strategy : {"phased", "model", "random", "exhaustive"}, optional
        The search strategy (default: the backend's, ``phased`` for GL and
        ``model`` for CUDA; docs/search.md).
    dtype : {"float32", "float64"}, optional
        The element type of shapes given as sizes (default float32).
    device_index : int, optional
        Which device (GL: EGL device; CUDA: device id).
    train : bool, optional
        Train the learned performance model afterwards when the store changed
        enough since it was last trained (default True; it needs scikit-learn,
        ``pip install shadertune[model]``, and takes about a second per thousand
        stored results).  False leaves that to a later search or ``python -m
        shadertune.perfmodel train``.
    progress : bool, optional
        Show the search's progress (default True): a tqdm bar on a terminal, a
        widget in a notebook (tqdm.auto), else a line when a shape starts, every
        10 s and when it ends, on stderr.  Each shape's start and end (with the
        device and the best config) are logged at INFO on the ``shadertune``
        logger either way.

    Returns
    -------
    TuneResult or list of TuneResult
        One per shape (a list when a list was given): the best verified config,
        its GFLOP/s, milliseconds and error, and the search's report entry.

    Raises
    ------
    ValueError
        A shape, budget or strategy that is not valid, or an environment
        variable the backend reads (``SHADERTUNE_GL_*``) with a value it does not
        take (checked before the store is opened); shapes of operands that do
        not align.
    TypeError
        A shape of an unknown kind.
    shadertune.db.StoreError
        A store that cannot be used or written (results measured before the
        failure are kept).
    shadertune.errors.ContextError
        No device for the backend.

    See Also
    --------
    shadertune.matmul : runs what was tuned (``config="auto"``).
    shadertune.explain : which config ``auto`` takes for a call, and why.

    Examples
    --------
    >>> import shadertune
    >>> r = shadertune.tune((32, 32, 32), evaluations=4, db="tune.sqlite", train=False)
    >>> r.config is not None and r.gflops > 0
    True
    """
    budget = _budget(evaluations, seconds)
    if strategy is not None:
        get_strategy(strategy)                       # ValueError naming the strategies
    be = matmul_backend(backend, device_index)
    many = isinstance(shape, list) and B is None
    problems = [_problem(s, None, be, dtype) for s in shape] if many else [_problem(shape, B, be, dtype)]
    for p in problems:
        if p.dtype not in be.dtypes:
            raise ValueError(f"tune: the {be.name} backend computes in {', '.join(be.dtypes)}, "
                             f"not {p.dtype} ({p.label})")
    # the environment and the device before the store: a variable the backend reads with
    # a value it does not take, or a backend that cannot run here (no CuPy, no device
    # `device_index`), fails without making a store file
    type(be).check_environment()
    device = be.device()
    store = db if isinstance(db, Store) else Store(db)
    try:
        out = []
        with TuningRun(be, store, train=train) as run:     # tune, then train the model
            for i, p in enumerate(problems, 1):
                log.info("tuning %s on %s (%s): %s, store %s", p.label, be.name, device.key,
                         _limits(budget), store.path)
                bar = Progress(p.label, index=i, count=len(problems), total=budget.max_evals,
                               time_limit=budget.seconds, mode=None if progress else "off")
                try:
                    entry = run.search(p, strategy=strategy, budget=budget, on_result=_counted(bar),
                                       on_phase=bar.phase)
                except BaseException:
                    bar.close(incomplete=True)
                    raise
                bar.close()
                r = _result(p, be.name, device.key, store.path, entry)
                log.info("tuned %s on %s (%s): %s", p.label, be.name, device.key, r.summary())
                out.append(r)
    finally:
        if store is not db:
            store.close()
    return out if many else out[0]


def _limits(budget: Budget) -> str:
    parts = ([f"at most {budget.max_evals} evaluations"] if budget.max_evals else []) + \
            ([f"{budget.seconds:g} s"] if budget.seconds else [])
    return ", ".join(parts) or "no limit"


def _counted(bar: Progress) -> Callable[[Result, bool], None]:
    """The search's on_result as the progress counts it."""
    def on_result(result: Result, cached: bool) -> None:
        bar.update(result, cached)
    return on_result


def _budget(evaluations: Any, seconds: Any) -> Budget:
    if evaluations is not None and (isinstance(evaluations, bool)
                                    or not isinstance(evaluations, numbers.Integral) or int(evaluations) < 1):
        raise ValueError(f"tune: evaluations must be a positive int, got {evaluations!r}")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, numbers.Real)
                                or not 0 < float(seconds) < math.inf):
        raise ValueError(f"tune: seconds must be a positive finite number, got {seconds!r}")
    if evaluations is None and seconds is None:
        seconds = DEFAULT_SECONDS
    return Budget(None if evaluations is None else int(evaluations),
                  None if seconds is None else float(seconds))


def _problem(shape: Any, B: ArrayLike | None, be: Backend, dtype: str) -> Problem:
    """The Problem a shape (or the operands A, B) names."""
    if B is not None:
        call = check_call(shape, B, None, alpha=1.0, beta=0.0, dtypes=be.dtypes)
        return be.problem_of(call)[0]
    if isinstance(shape, Problem):
        return shape
    if isinstance(shape, str) or (isinstance(shape, numbers.Integral) and not isinstance(shape, bool)):
        problem = Problem.parse(str(shape), dtype)
    elif (isinstance(shape, Sequence) and len(shape) == 3
          and all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in shape)):
        problem = Problem(int(shape[0]), int(shape[1]), int(shape[2]), dtype)
    elif isinstance(shape, np.ndarray) or hasattr(shape, "__array__"):
        raise ValueError("tune: give both operands, tune(A, B), or a shape (M, N, K)")
    else:
        raise TypeError(f"tune: a shape is N, 'MxNxK', (M, N, K), a Problem or operands A, B; "
                        f"got {type(shape).__name__}")
    if min(problem.M, problem.N, problem.K) < 1:
        raise ValueError(f"tune: sizes must be positive, got {problem.M}x{problem.N}x{problem.K}")
    return problem


def _result(problem: Problem, backend: str, device: str, store: pathlib.Path,
            entry: dict[str, Any]) -> TuneResult:
    best = entry["best"]
    return TuneResult(problem=problem, backend=backend, device=device,
                      config=Config(best["config"]) if best else None,
                      gflops=best["gflops"] if best else None, ms=best["median_ms"] if best else None,
                      error=best["error"] if best else None, evaluated=entry["evaluated"],
                      seconds=entry["seconds"], store=pathlib.Path(store), entry=entry)
