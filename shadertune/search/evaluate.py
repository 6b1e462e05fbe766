"""Evaluator: build -> run -> verify against float64 -> time, as one Result.

Every failure of one config becomes a Result with a status and a message
(invalid, compile_failed, run_failed, wrong), so nothing a kernel does can
crash the search and a wrong kernel is never best (Result.ok is False).
Only ContextError escapes: without a GPU context no config can run, so the
search stops with that one-line reason.

With a store, a config already measured for this backend, device, problem
and template hash is replayed instead of measured (`retune=True` measures
afresh), and each new Result is written as soon as it exists.
"""
from __future__ import annotations

from typing import Callable

import time

import numpy as np

from ..config import Config
from ..errors import BuildError, ContextError, InvalidConfig, RunError
from ..problem import Problem
from ..result import COMPILE_FAILED, INVALID, OK, RUN_FAILED, WRONG, Result

DEFAULT_TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def make_inputs(problem: Problem, seed: int = 0):
    """Seeded random A, B as stored (trans flags say A is K x M, B is N x K) and
    the float64 reference of op(A) @ op(B) from the very values the kernel gets."""
    rng = np.random.default_rng(seed)
    p = problem
    a_shape, b_shape = p.stored_shapes
    A = rng.uniform(-1.0, 1.0, a_shape).astype(p.dtype)
    B = rng.uniform(-1.0, 1.0, b_shape).astype(p.dtype)
    a64, b64 = A.astype(np.float64), B.astype(np.float64)
    ref = (a64.T if p.trans_a else a64) @ (b64.T if p.trans_b else b64)
    return A, B, ref


def relative_error(C, ref: np.ndarray) -> float:
    """Relative Frobenius error ||C - ref|| / ||ref|| (absolute when ref is zero)."""
    diff = np.linalg.norm(np.asarray(C, dtype=np.float64) - ref)
    norm = np.linalg.norm(ref)
    return float(diff / norm) if norm > 0 else float(diff)


class Evaluator:
    """evaluate(config) -> Result for one backend and problem (what strategies call)."""

    def __init__(self, backend, problem: Problem, *, store=None, retune: bool = False,
                 tolerance: float | None = None, repeats: int = 10, warmup: int = 2,
                 slow_ms: float = 1000.0, slow_factor: float = 3.0, slow_floor_ms: float = 20.0,
                 seed: int = 0, on_result: Callable[[Result, bool], None] | None = None):
        self.backend = backend
        self.problem = problem
        self.device = backend.device().key
        self.template_hash = backend.template_hash()
        self.store = store
        self.retune = retune
        self.tolerance = DEFAULT_TOLERANCE[problem.dtype] if tolerance is None else tolerance
        self.repeats = repeats
        self.slow_ms = slow_ms
        self.slow_factor = slow_factor
        self.slow_floor_ms = slow_floor_ms       # below it, run times are too noisy to compare
        self._best_run_ms: float | None = None   # fastest checked run of a correct config so far
        self.warmup = warmup
        self.on_result = on_result
        self.A, self.B, self.ref = make_inputs(problem, seed)
        self.measured = 0
        self.cached = 0

    def __call__(self, config: Config) -> Result:
        config = config if isinstance(config, Config) else Config(config)
        r = None
        if self.store is not None and not self.retune:
            r = self.store.get(self.backend.name, self.device, self.problem, config,
                               self.template_hash)
        from_store = r is not None
        if from_store:
            self.cached += 1
        else:
            r = self.measure(config)
            self.measured += 1
            if self.store is not None:
                self.store.put(r, self.template_hash)
        if self.on_result is not None:
            self.on_result(r, from_store)
        return r

    def _result(self, config, status, **kw) -> Result:
        return Result(self.backend.name, self.device, self.problem, config, status, **kw)

    def measure(self, config: Config) -> Result:
        try:
            kernel = self.backend.build(self.problem, config)
        except ContextError:
            raise
        except InvalidConfig as e:
            return self._result(config, INVALID, message=_line(e))
        except BuildError as e:
            return self._result(config, COMPILE_FAILED, message=_line(e))
        except Exception as e:           # a backend bug in one config must not end the search
            return self._result(config, COMPILE_FAILED, message=_line(e, typed=True))
        try:
            return self._check_and_time(config, kernel)
        finally:
            try:
                kernel.release()
            except Exception:
                pass

    def _check_and_time(self, config, kernel) -> Result:
        compile_ms = getattr(kernel, "compile_ms", None)
        try:
            t_run = time.perf_counter()
            C = np.asarray(kernel.run(self.A, self.B))
            run_ms = (time.perf_counter() - t_run) * 1e3
        except ContextError:
            raise
        except Exception as e:
            return self._result(config, RUN_FAILED, compile_ms=compile_ms,
                                message=_line(e, typed=not isinstance(e, RunError)))
        if C.shape != self.ref.shape:
            return self._result(config, WRONG, compile_ms=compile_ms,
                                message=f"output shape {C.shape}, expected {self.ref.shape}")
        bad = int(np.count_nonzero(~np.isfinite(C)))
        if bad:
            return self._result(config, WRONG, compile_ms=compile_ms,
                                message=f"{bad} of {C.size} output elements are NaN/Inf "
                                        f"(unwritten or overflowed)")
        err = relative_error(C, self.ref)
        if not err <= self.tolerance:
            return self._result(config, WRONG, compile_ms=compile_ms, error=err,
                                message=f"relative error {err:.3g} > tolerance {self.tolerance:g}")
        try:
            # A config whose checked run already took over `slow_ms`, or (past a noise floor)
            # over `slow_factor` times the fastest checked run of a correct config so far, is
            # timed once, without a further warm-up (the checked run was one): it cannot be
            # best, and slow corners of the space must not eat the search's time.
            slow = run_ms > self.slow_ms or (
                self._best_run_ms is not None and run_ms > self.slow_floor_ms
                and run_ms > self.slow_factor * self._best_run_ms)
            times = [float(t) for t in kernel.time(repeats=1 if slow else self.repeats,
                                                   warmup=0 if slow else self.warmup)]
        except ContextError:
            raise
        except Exception as e:
            return self._result(config, RUN_FAILED, compile_ms=compile_ms, error=err,
                                message="timing failed: " + _line(e, typed=not isinstance(e, RunError)))
        if not times or not all(np.isfinite(t) and t > 0 for t in times):
            return self._result(config, RUN_FAILED, compile_ms=compile_ms, error=err,
                                times_ms=[t for t in times if np.isfinite(t)],
                                message=f"timer gave no usable times: {times[:5]}")
        self._best_run_ms = run_ms if self._best_run_ms is None else min(self._best_run_ms, run_ms)
        return self._result(config, OK, times_ms=times, compile_ms=compile_ms, error=err)


def _line(e: BaseException, typed: bool = False) -> str:
    """The exception's message on one line, cut short (compiler logs can be long)."""
    text = " ".join(str(e).split())
    if len(text) > 400:
        text = text[:400] + " ..."
    text = text or type(e).__name__
    return f"{type(e).__name__}: {text}" if typed else text
