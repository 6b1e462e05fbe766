"""Evaluator: build -> run -> verify against float64 -> time, as one Result.

Every failure of one config becomes a Result with a status and a message
(invalid, compile_failed, run_failed, wrong, slow), so nothing a kernel does can
crash the search and a wrong kernel is never best (Result.ok is False).
Only what no config could escape escapes: ContextError (without a GPU context no
config can run) and InputsError (the inputs do not fit in memory), and the
settings are checked when the evaluator is made (shadertune.core.arguments: a negative
seed, a tolerance that is not a finite positive number, repeats < 1), so that an
error the arguments cause is never stored as a config's verdict.

With a store, a config already measured for this backend, device, problem
and template hash is replayed instead of measured (`retune=True` measures
afresh), its verdict judged again under this evaluator's tolerance (a verdict
that needs a new measurement is measured: shadertune.core.verdict), and each new
Result is written as soon as it exists, with the seconds its measurement took.
The inputs and their float64 reference are made at the first measurement: a
search replayed from the store makes none.

Timing races against the best median so far ("best"), so that a search spends
its time on the configs that can win.  For a kernel that times its own checked
run on the device (`checked_run`, the GL kernels):
- a run whose first passes project over abandon_factor x best is abandoned
  part-way: status 'slow', never verified, never counted;
- a run under slow_floor_ms is timed as any kernel is (warm-up, `repeats`):
  there, run-to-run noise is large;
- otherwise the checked run was the warm-up.  Over slow_ms, or over
  race_factor x best, its own time is the one time kept (the Result's message
  says so); else one more run, and if that is over contend_factor x best it
  is the one time; else runs until three in a row agree within 1%, at most
  `repeats`.  The best config is therefore always timed warm, repeatedly.
Racing needs run times that repeat: on a software renderer (device limit
`software_renderer`, e.g. llvmpipe, whose runs swing by 20-30%) and for other
kernels, a checked run over slow_ms, or over slow_factor x the fastest checked
run of a correct config (past the floor), is timed once; the rest get warm-up
and `repeats`.
"""
from __future__ import annotations

import functools
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from ..core.arguments import check_measurement
from ..core.config import Config
from ..core.cpus import usable_cpus
from ..errors import BuildError, ContextError, InvalidConfig, RunError, ShadertuneError, TooSlow
from ..core.problem import Problem
from ..core.result import COMPILE_FAILED, INVALID, OK, RUN_FAILED, SLOW, WRONG, Result
from ..core.verdict import DEFAULT_TOLERANCE, over_tolerance, rejudge
from .contract import BaseEvaluator
from .operands import OperandCache


def make_operands(problem: Problem, seed: int = 0):
    """Seeded random A, B as stored (trans flags say A is K x M, B is N x K):
    what every config of a search is verified on."""
    rng = np.random.default_rng(seed)
    a_shape, b_shape = problem.stored_shapes
    A = rng.uniform(-1.0, 1.0, a_shape).astype(problem.dtype)
    B = rng.uniform(-1.0, 1.0, b_shape).astype(problem.dtype)
    return A, B


def make_inputs(problem: Problem, seed: int = 0):
    """make_operands' A, B and the float64 reference of op(A) @ op(B) from the
    very values the kernel gets."""
    p = problem
    A, B = make_operands(p, seed)
    a64, b64 = A.astype(np.float64), B.astype(np.float64)
    ref = np.matmul(np.swapaxes(a64, -1, -2) if p.trans_a else a64,
                    np.swapaxes(b64, -1, -2) if p.trans_b else b64)   # a batch: stacks
    return A, B, ref


def inputs_bytes(problem: Problem) -> int:
    """Bytes make_inputs holds at its peak: A and B in their dtype and as float64, the
    float64 reference, and the float64 draw of the larger operand."""
    a_shape, b_shape = problem.stored_shapes
    n_a, n_b = math.prod(a_shape), math.prod(b_shape)
    n_c = problem.batch * problem.M * problem.N
    item = np.dtype(problem.dtype).itemsize
    return (n_a + n_b) * (item + 8) + n_c * 8 + max(n_a, n_b) * 8


def memory_available() -> int | None:
    """Bytes this machine can give without swapping (Linux's MemAvailable; else the free
    pages), or None where neither is known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _row_blocks(C: np.ndarray):
    step = max(1, (1 << 18) // max(1, C[0].size))
    return [slice(i, i + step) for i in range(0, C.shape[0], step)]


def _map_blocks(fn, blocks):
    """fn over row blocks, on threads when there are many (numpy lets go of the GIL)."""
    if len(blocks) < 8:
        return [fn(b) for b in blocks]
    with ThreadPoolExecutor(max_workers=min(8, usable_cpus())) as pool:
        return list(pool.map(fn, blocks))


def _bad_and_sq_diff(C: np.ndarray, ref: np.ndarray) -> tuple[int, float]:
    """(NaN/Inf elements of C, sum((C - ref)^2) in float64), by blocks of rows on
    threads for large C: no full-size float64 temporary."""
    def block(sl):
        c = C[sl]
        d = (np.asarray(c, np.float64) - ref[sl]).ravel()
        # numpy's own loop, not BLAS: a BLAS dot wakes OpenBLAS's thread pool (a thread
        # a core) at every evaluation, and its threads spin on the cores where the GL
        # driver compiles and the other workers of the host time
        return int(np.count_nonzero(~np.isfinite(c))), float(np.einsum("i,i->", d, d))
    small = C.ndim < 2 or C.size <= 1 << 18
    parts = _map_blocks(block, [...] if small else _row_blocks(C))
    return sum(n for n, _ in parts), math.fsum(sq for _, sq in parts)


def relative_error(C, ref: np.ndarray, ref_norm: float | None = None) -> float:
    """Relative Frobenius error ||C - ref|| / ||ref|| (absolute when ref is zero)."""
    C = np.asarray(C)
    ref = np.asarray(ref)
    if C.shape != ref.shape:
        raise ValueError(f"C has shape {C.shape}, the reference {ref.shape}")
    return check_output(C, ref, float(np.linalg.norm(ref)) if ref_norm is None else ref_norm)[1]


def check_output(C: np.ndarray, ref: np.ndarray, ref_norm: float) -> tuple[int, float]:
    """(number of NaN/Inf elements, relative error): one pass over C's blocks."""
    bad, sq = _bad_and_sq_diff(C, ref)
    return bad, relative_of(sq, ref_norm)


def relative_of(sq_diff: float, ref_norm: float) -> float:
    """The relative Frobenius error from the sum of squared differences (absolute
    where the reference is zero)."""
    diff = math.sqrt(sq_diff)
    return diff / ref_norm if ref_norm > 0 else diff


class InputsError(ShadertuneError):
    """The search's inputs cannot be made (memory): no config can be measured."""


# where a search's time goes (seconds per stage, summed over measured configs)
STAGES = ("build", "check", "verify", "time", "release", "store")


class RecordingEvaluator(BaseEvaluator):
    """The store side of an evaluator for one backend, device and problem, which the
    local Evaluator and a cluster's (shadertune.cluster) share: a stored Result is
    replayed as judged under this tolerance, a new one is written as soon as it
    exists, the best median so far (the racing bar) follows both, and each goes to
    on_result.  Subclasses say how a config is measured."""

    def __init__(self, backend, problem: Problem, *, store=None, retune: bool = False,
                 tolerance: float | None = None, seed: int = 0,
                 on_result: Callable[..., None] | None = None,
                 on_phase: Callable[[str], None] | None = None):
        # an argument error stops here, before any config is measured or stored as failed
        check_measurement(seed=seed, tolerance=tolerance)
        self.backend = backend
        self.problem = problem
        self.device_info = backend.device()
        self.device = self.device_info.key
        self.template_hash = backend.template_hash()
        self.store = store
        self.retune = retune
        self.tolerance = DEFAULT_TOLERANCE[problem.dtype] if tolerance is None else tolerance
        self.seed = seed
        self.on_result = on_result
        self.on_phase = on_phase
        self._best_ms: float | None = None       # best median of a correct config so far
        self.measured = 0
        self.cached = 0
        # the strategy's phases as they began: {"at": evaluations before it, "label"}
        self.phases: list[dict] = []
        # configs timed ahead on idle workers, and those of them the search asked for
        self.ahead = {"timed": 0, "asked": 0}
        self.stage_seconds = dict.fromkeys(STAGES, 0.0)

    def stored(self, config: Config) -> Result | None:
        """The stored Result judged under this tolerance, or None: measure it."""
        if self.store is None or self.retune:
            return None
        r = self.store.get(self.backend.name, self.device, self.problem, config, self.template_hash)
        return None if r is None else rejudge(r, self.tolerance)

    def phase(self, label: str) -> None:
        self.phases.append({"at": self.measured + self.cached, "label": label})
        if self.on_phase is not None:
            self.on_phase(label)

    def timed_ahead(self, timed: int = 0, asked: int = 0) -> None:
        self.ahead["timed"] += timed
        self.ahead["asked"] += asked

    def _clock(self, stage: str, t0: float) -> float:
        now = time.perf_counter()
        self.stage_seconds[stage] += now - t0
        return now

    def _replayed(self, r: Result, *where) -> None:
        """A Result replayed from the store."""
        self.cached += 1
        self._note(r, True, *where)

    def _record(self, r: Result, seconds: float, *where) -> None:
        """A Result measured for this search (in `seconds`): into the store at once."""
        self.measured += 1
        if self.store is not None:
            t0 = time.perf_counter()
            self.store.put(r, self.template_hash, seconds=seconds, seed=self.seed)
            self._clock("store", t0)
        self._note(r, False, *where)

    def _note(self, r: Result, from_store: bool, *where) -> None:
        # `where`: what a subclass adds for on_result (a cluster: the worker's name)
        if r.ok and (self._best_ms is None or r.median_ms < self._best_ms):
            self._best_ms = r.median_ms
        if self.on_result is not None:
            self.on_result(r, from_store, *where)


class Evaluator(RecordingEvaluator):
    """evaluate(config) -> Result for one backend and problem (what strategies call).

    A batch (many) is evaluated one config after another here, after the whole
    batch is announced (prefetch); the strategy's phase names go to on_phase."""

    def __init__(self, backend, problem: Problem, *, store=None, retune: bool = False,
                 tolerance: float | None = None, repeats: int = 10, warmup: int = 2,
                 slow_ms: float = 1000.0, slow_factor: float = 3.0, slow_floor_ms: float = 20.0,
                 race_factor: float = 1.1, contend_factor: float = 1.02,
                 abandon_factor: float = 1.5, operand_cache_bytes: int = 2 << 30,
                 race: bool | None = None, seed: int = 0,
                 on_result: Callable[[Result, bool], None] | None = None,
                 on_phase: Callable[[str], None] | None = None):
        check_measurement(seed=seed, tolerance=tolerance, repeats=repeats, warmup=warmup)
        super().__init__(backend, problem, store=store, retune=retune, tolerance=tolerance,
                         seed=seed, on_result=on_result, on_phase=on_phase)
        # None: race unless the device says its run times swing (a CPU renderer)
        self.race = (not (self.device_info.limits or {}).get("software_renderer", False)) \
            if race is None else race
        self.repeats = repeats
        self.warmup = warmup
        self.slow_ms = slow_ms
        self.slow_factor = slow_factor
        self.slow_floor_ms = slow_floor_ms       # below it, run times are too noisy to compare
        self.race_factor = race_factor
        self.contend_factor = contend_factor
        self.abandon_factor = abandon_factor
        self._best_run_ms: float | None = None   # fastest checked run of a correct config
        self.operands = OperandCache(operand_cache_bytes)   # A and B never change

    @functools.cached_property
    def _inputs(self):
        need, have = inputs_bytes(self.problem), memory_available()
        if have is not None and need > have:
            # refused before allocating: where the kernel overcommits memory, numpy's
            # allocation succeeds and filling it pages the machine to a halt
            raise InputsError(f"the inputs of {self.problem.label} and their float64 reference do "
                              f"not fit in this machine's memory (they need {need / 2**30:.1f} GiB, "
                              f"{have / 2**30:.1f} GiB is available)")
        try:
            A, B, ref = make_inputs(self.problem, self.seed)
        except MemoryError:
            raise InputsError(f"the inputs of {self.problem.label} and their float64 reference do "
                              f"not fit in this machine's memory") from None
        return A, B, ref, float(np.linalg.norm(ref))

    A = property(lambda self: self._inputs[0])
    B = property(lambda self: self._inputs[1])
    ref = property(lambda self: self._inputs[2])
    ref_norm = property(lambda self: self._inputs[3])

    def prefetch(self, configs) -> None:
        """Configs the strategy evaluates next: the backend's precompile (CUDA: NVRTC
        in a process pool) builds those not in the store at once, in parallel, so
        that each build() finds its kernel compiled.  Never fails the search: a config
        that cannot compile says so when it is built."""
        todo = [c for c in map(Config, configs) if self.stored(c) is None]
        if len(todo) < 2:
            return
        t0 = time.perf_counter()
        try:
            self.backend.precompile(self.problem, todo)
        except ContextError:
            raise
        except Exception:
            pass
        finally:
            self._clock("build", t0)

    def set_best(self, median_ms: float | None) -> None:
        """The racing bar as known elsewhere: a cluster's coordinator keeps the best
        median per device and search, and a worker measures against it (None: no best yet)."""
        self._best_ms = median_ms

    def __call__(self, config: Config) -> Result:
        config = config if isinstance(config, Config) else Config(config)
        r = self.stored(config)
        if r is not None:
            self._replayed(r)
            return r
        t0 = time.perf_counter()
        r = self.measure(config)
        self._record(r, time.perf_counter() - t0)
        return r

    def _result(self, config, status, **kw) -> Result:
        return Result(self.backend.name, self.device, self.problem, config, status, **kw)

    def measure(self, config: Config) -> Result:
        # the inputs are the search's, not the config's: a failure making them stops the
        # search (InputsError) instead of becoming this config's stored verdict
        self._inputs
        t0 = time.perf_counter()
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
        finally:
            self._clock("build", t0)
        try:
            return self._check_and_time(config, kernel)
        finally:
            t0 = time.perf_counter()
            try:
                kernel.release()
            except Exception:
                pass
            self._clock("release", t0)

    def _check_and_time(self, config, kernel) -> Result:
        compile_ms = kernel.compile_ms
        bar = self._best_ms
        device_ms = None                 # the checked run's own time, where the kernel gives it
        try:
            t_run = time.perf_counter()
            limit = (None if bar is None or not self.race
                     else max(self.abandon_factor * bar, self.slow_floor_ms))
            # compared where the output lies (a device's: nothing copied back), else here
            out = kernel.checked_compare(self.A, self.B, self.ref, cache=self.operands)
            if out is None:
                C, device_ms = kernel.checked_run(self.A, self.B, limit_ms=limit, cache=self.operands)
                out = np.asarray(C)
            run_ms = (time.perf_counter() - t_run) * 1e3
        except ContextError:
            raise
        except TooSlow as e:
            self._clock("check", t_run)
            return self._result(config, SLOW, compile_ms=compile_ms,
                                message=f"{e} ({self.abandon_factor:g}x the best so far)")
        except Exception as e:
            self._clock("check", t_run)
            return self._result(config, RUN_FAILED, compile_ms=compile_ms,
                                message=_line(e, typed=not isinstance(e, RunError)))
        t0 = self._clock("check", t_run)
        return self._verify_and_time(config, kernel, out, compile_ms, bar, device_ms, run_ms, t0)

    def _verify_and_time(self, config, kernel, out, compile_ms, bar, device_ms, run_ms, t0) -> Result:
        """`out`: the output C on the host, or checked_compare's (shape, NaN/Inf
        elements, sum of squared differences)."""
        shape = out.shape if isinstance(out, np.ndarray) else tuple(out[0])
        if shape != self.ref.shape:
            return self._result(config, WRONG, compile_ms=compile_ms,
                                message=f"output shape {shape}, expected {self.ref.shape}")
        if isinstance(out, np.ndarray):
            bad, err = check_output(out, self.ref, self.ref_norm)
        else:
            bad, err = int(out[1]), relative_of(float(out[2]), self.ref_norm)
        t0 = self._clock("verify", t0)
        if bad:
            return self._result(config, WRONG, compile_ms=compile_ms,
                                message=f"{bad} of {math.prod(shape)} output elements are NaN/Inf "
                                        f"(unwritten or overflowed)")
        if not err <= self.tolerance:
            return self._result(config, WRONG, compile_ms=compile_ms, error=err,
                                message=over_tolerance(err, self.tolerance))
        try:
            if device_ms is not None and self.race:
                times, note = self._race(kernel, float(device_ms), bar)
            else:
                run_ms = run_ms if device_ms is None else float(device_ms)
                times, note = self._time_without_racing(kernel, run_ms)
        except ContextError:
            raise
        except Exception as e:
            return self._result(config, RUN_FAILED, compile_ms=compile_ms, error=err,
                                message="timing failed: " + _line(e, typed=not isinstance(e, RunError)))
        finally:
            self._clock("time", t0)
        times = [float(t) for t in times]
        if not times or not all(np.isfinite(t) and t > 0 for t in times):
            return self._result(config, RUN_FAILED, compile_ms=compile_ms, error=err,
                                times_ms=[t for t in times if np.isfinite(t)],
                                message=f"timer gave no usable times: {times[:5]}")
        self._best_run_ms = run_ms if self._best_run_ms is None else min(self._best_run_ms, run_ms)
        return self._result(config, OK, times_ms=times, compile_ms=compile_ms, error=err,
                            message=note)

    def _time_without_racing(self, kernel, run_ms: float) -> tuple[list, str]:
        """No racing (a kernel without a device-timed checked run, or a CPU renderer):
        the checked run's time says only whether the config is far too slow to win
        (then it is timed once, without warm-up); the rest get warm-up and repeats."""
        slow = run_ms > self.slow_ms or (
            self._best_run_ms is not None and run_ms > self.slow_floor_ms
            and run_ms > self.slow_factor * self._best_run_ms)
        if slow:
            return kernel.time(repeats=1, warmup=0), "timed once: its checked run was slow"
        return kernel.time(repeats=self.repeats, warmup=self.warmup), ""

    def _race(self, kernel, cold: float, bar: float | None) -> tuple[list, str]:
        """Times for a kernel whose checked run took `cold` ms on the device (see the
        module docstring)."""
        if cold < self.slow_floor_ms:
            return kernel.time(repeats=self.repeats, warmup=self.warmup), ""
        if cold > self.slow_ms or (bar is not None and cold > self.race_factor * bar):
            return [cold], (f"timed once (its checked run): over {self.race_factor:g}x the "
                            f"best so far ({bar:.4g} ms)" if bar is not None and cold <= self.slow_ms
                            else f"timed once (its checked run): over {self.slow_ms:g} ms")
        times = list(kernel.time(repeats=1, warmup=0))
        if bar is not None and times[0] > self.contend_factor * bar:
            return times, (f"timed once: over {self.contend_factor:g}x the best so far "
                           f"({bar:.4g} ms)")
        while len(times) < self.repeats:
            times += kernel.time(repeats=1, warmup=0)
            last = times[-3:]
            if len(last) == 3 and max(last) <= 1.01 * min(last):
                break
        return times, ""


def _line(e: BaseException, typed: bool = False) -> str:
    """The exception's message on one line, cut short (compiler logs can be long)."""
    text = " ".join(str(e).split())
    if len(text) > 400:
        text = text[:400] + " ..."
    text = text or type(e).__name__
    return f"{type(e).__name__}: {text}" if typed else text
