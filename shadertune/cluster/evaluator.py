"""The coordinator's evaluator: a batch of configs goes out to a device group's
workers, the Results come back, and the coordinator alone writes them to the store.

ClusterEvaluator is what a strategy evaluates through (the evaluator contract of
search/contract.py: evaluate(config), evaluate.many(configs, stop)); the store
side (replaying stored Results judged under this tolerance, writing new ones as
they arrive, the racing bar) is the local Evaluator's, search.evaluate.RecordingEvaluator,
so a killed coordinator loses only the evaluations in flight and a rerun resumes
from the store.  The racing bar (best median so far) is this search's on this
device: every evaluation carries the bar known when it starts.

Faults: a worker killed mid-evaluation costs that evaluation only: Dask runs it
again on another worker, and after its worker died allowed-failures + 1 times
(engine.DASK_CONFIG) it is recorded as run_failed with that reason.  A worker
whose GPU context fails is excluded (Coordinator.exclude) and its evaluation
goes to another worker.
"""
from __future__ import annotations

import queue
import time
import uuid
from collections import deque
from typing import Callable

from distributed.scheduler import KilledWorker

from ..config import Config
from ..errors import ShadertuneError
from ..problem import Problem
from ..result import RUN_FAILED, Result
from ..search.evaluate import RecordingEvaluator, _line
from .coordinator import Cancelled, DeviceGroup
from .worker import evaluate_task


class ClusterEvaluator(RecordingEvaluator):
    """evaluate(config) -> Result and evaluate.many(configs, stop) -> [Result] for one
    problem on one device group.  on_result(result, from_store, worker) is called on
    the coordinator for each Result (worker: its name; None for a stored one or one
    recorded after its workers died)."""

    def __init__(self, group: DeviceGroup, problem: Problem, *, store=None, retune: bool = False,
                 tolerance: float | None = None, repeats: int = 10, warmup: int = 2, seed: int = 0,
                 on_result: Callable[[Result, bool, str | None], None] | None = None,
                 on_phase: Callable[[str], None] | None = None):
        super().__init__(group.backend, problem, store=store, retune=retune, tolerance=tolerance,
                         seed=seed, on_result=on_result, on_phase=on_phase)
        self.group = group
        # what the workers' Evaluators are made with; inputs come from the seed there
        self.options = {"tolerance": self.tolerance, "repeats": repeats, "warmup": warmup,
                        "seed": seed}
        self.search = uuid.uuid4().hex       # one Evaluator per worker for this search

    def __call__(self, config) -> Result:
        return self.many([config])[0]

    def many(self, configs, stop: Callable[[], bool] | None = None) -> list[Result]:
        """Results for `configs` in their order; each distinct config is evaluated once.

        As the contract's default does, the configs to measure are announced first
        (prefetch).  When stop() (asked before each evaluation starts, e.g. the time
        limit) says so, no more start: the evaluations in flight finish and the
        Results of the configs up to the last one started are returned (a shorter list)."""
        configs = [c if isinstance(c, Config) else Config(c) for c in configs]
        done: dict[Config, Result] = {}
        todo = deque()
        for c in dict.fromkeys(configs):
            r = self.stored(c)
            if r is None:
                todo.append(c)
            else:
                done[c] = r
                self._replayed(r, None)
        if todo:
            self._precompile(todo)
            self._farm_out(todo, done, stop)
        out = []
        for c in configs:                          # the prefix whose Results exist
            if c not in done:
                break
            out.append(done[c])
        return out

    def prefetch(self, configs) -> None:
        """Configs the strategy evaluates next: a worker of the group precompiles those not
        stored, as the local Evaluator does (CUDA: NVRTC in parallel into that host's cubin
        cache, where the group's other workers on that host find them; GL: nothing).
        It takes an evaluation slot meanwhile, and never fails the search: a config that
        cannot compile says so when it is evaluated."""
        self._precompile([c for c in (Config(c) for c in dict.fromkeys(configs))
                          if self.stored(c) is None])

    def _precompile(self, todo) -> None:
        if len(todo) < 2:
            return
        t0 = time.perf_counter()
        starved_since = None
        while not self.group.acquire():
            starved_since = self.group.starving(starved_since)
            self.group.wait_for_slot(0.5)
        try:
            self.group.call("precompile", self.problem, todo)
        except Cancelled:
            raise
        except Exception:                # ContextError too: the evaluations meet it again
            pass
        finally:
            self.group.release()
            self.stage_seconds["build"] += time.perf_counter() - t0

    # --- farming out ------------------------------------------------------------
    def _farm_out(self, todo: deque, done: dict, stop: Callable[[], bool] | None) -> None:
        client = self.group.coordinator.client
        finished: queue.Queue = queue.Queue()       # futures, put there as they finish
        running: dict = {}                         # future -> config
        starved_since = None
        try:
            while todo or running:
                self.group.coordinator.check_cancelled()
                if todo and stop is not None and stop():
                    todo.clear()                   # the ones started still finish
                    continue
                while todo and self.group.acquire():
                    c = todo.popleft()
                    f = client.submit(evaluate_task, self.group.spec, self.search, self.problem, c,
                                      self.options, self._best_ms, pure=False,
                                      key=f"shadertune-eval-{uuid.uuid4().hex}",
                                      resources={self.group.resource: 1})
                    running[f] = c
                    f.add_done_callback(finished.put)
                if not running:                    # every worker busy with other searches, or none
                    starved_since = self.group.starving(starved_since)
                    self.group.wait_for_slot(0.5)
                    continue
                try:
                    f = finished.get(timeout=0.5)
                except queue.Empty:                # still running, or waiting for a worker
                    self.group.coordinator.refresh()
                    starved_since = self.group.starving(starved_since)
                    continue
                if f.status not in ("finished", "error", "cancelled"):
                    # its result was lost with its worker before it reached us: Dask
                    # computes it again, and the callback fires again when it is done
                    f.add_done_callback(finished.put)
                    continue
                c = running.pop(f)
                self.group.release()
                r = self._outcome(f, c)
                if r is None:
                    todo.appendleft(c)              # its worker lost its GPU: again elsewhere
                else:
                    done[c] = r
        finally:
            for f in running:
                f.cancel()
                self.group.release()

    def _outcome(self, f, config: Config) -> Result | None:
        """The Result of a finished future (written and noted), or None to evaluate again."""
        if f.status == "finished":
            out = f.result()
            if "context_error" in out:
                self.group.coordinator.exclude(out["address"], out["worker"], out["context_error"])
                return None
            for k, v in out["stage_seconds"].items():
                self.stage_seconds[k] = self.stage_seconds.get(k, 0.0) + v
            self._record(out["result"], out["seconds"], out["worker"])
            return out["result"]
        if f.status == "cancelled":
            self.group.coordinator.check_cancelled()
            raise ShadertuneError(f"the cluster dropped the evaluation of {config.key} (its "
                                  f"scheduler was lost or restarted); results so far are in the "
                                  f"store, rerun to resume")
        e = f.exception()
        if isinstance(e, KilledWorker):
            r = Result(self.backend.name, self.device, self.problem, config, RUN_FAILED,
                       message=f"its worker died {e.allowed_failures + 1} times while "
                               f"evaluating it (killed or crashed)")
            self._record(r, None, None)
            return r
        raise ShadertuneError(f"evaluating {config.key} on the cluster failed: {_line(e, typed=True)}")
