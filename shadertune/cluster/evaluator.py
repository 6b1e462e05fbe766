"""The coordinator's evaluator: a batch of configs goes out to a device group's
workers, the Results come back, and the coordinator alone writes them to the store.

ClusterEvaluator is what a strategy evaluates through (the evaluator contract of
search/contract.py: evaluate(config), evaluate.many(configs, stop)); the store
side (replaying stored Results judged under this tolerance, writing new ones as
they arrive, the racing bar) is the local Evaluator's, search.evaluate.RecordingEvaluator,
so a killed coordinator loses only the evaluations in flight and a rerun resumes
from the store.  The racing bar (best median so far) is this search's on this
device: every evaluation carries the bar known when it starts.

Per-evaluation scheduling: each config of a batch is one Dask task, sent when a
worker of the group has room (coordinator.EVALUATIONS_PER_WORKER: the one it runs and
one queued behind it), so no GPU idles while another has a queue, nor while a result
and the next config travel.  Where the backend compiles ahead, the batch compiles on the
hosts' cores chunk by chunk (compiles.py) and a config is sent once its host's chunk
is under way: the GPUs time one chunk while the next compiles.

Faults: a worker killed mid-evaluation costs that evaluation only: the
evaluator sees the worker leave its group, sends the evaluation again to
another worker (it was pinned to the dead one: coordinator.py), and after
KILLS_TO_FAIL deaths of its workers records it as run_failed with that reason.  A worker
whose GPU context fails is excluded (Coordinator.exclude) and its evaluation
goes to another worker.  An evaluation the cluster dropped because its
scheduler was lost is sent again once the client has reconnected.

`timings` says where the cluster's own time goes: the round trips of the
evaluations (submitted, to its Result fetched here), the workers' time inside
them (task_seconds), each worker's idle seconds before an evaluation since its last
one (idle_s: what dispatch and return cost the GPUs where nothing was queued), each
worker's busy seconds, and how many batches of each size the strategy sent (its steps
of one config keep one worker busy).
"""
from __future__ import annotations

import queue
import time
import uuid
from collections import deque
from typing import Callable

from distributed.scheduler import KilledWorker

from ..core.config import Config
from ..errors import ShadertuneError
from ..core.problem import Problem
from ..core.result import RUN_FAILED, Result
from ..search.evaluate import RecordingEvaluator, _line
from .compiles import CompileAhead
from .coordinator import DROPPED_TRIES, DeviceGroup
from .engine import DASK_CONFIG
from .futures import FETCH_POLL_SECONDS, outcome
from .worker import compile_task, evaluate_task

_WAKE = object()                          # a compile chunk is done: look again
# An evaluation whose worker died this often is recorded as run_failed instead of
# killing another (Dask's own count for the tasks it places: allowed-failures + 1).
KILLS_TO_FAIL = DASK_CONFIG["distributed.scheduler.allowed-failures"] + 1


class ClusterEvaluator(RecordingEvaluator):
    """evaluate(config) -> Result and evaluate.many(configs, stop) -> [Result] for one
    problem on one device group.  on_result(result, from_store, worker) is called on
    the coordinator for each Result (worker: its name; None for a stored one or one
    recorded after its workers died)."""

    def __init__(self, group: DeviceGroup, problem: Problem, *, store=None, retune: bool = False,
                 tolerance: float | None = None, repeats: int = 10, warmup: int = 2, seed: int = 0,
                 on_result: Callable[[Result, bool, str | None], None] | None = None,
                 on_phase: Callable[[str], None] | None = None, parallelism: int | None = None):
        super().__init__(group.backend, problem, store=store, retune=retune, tolerance=tolerance,
                         seed=seed, on_result=on_result, on_phase=on_phase)
        self.group = group
        self._parallelism = parallelism
        # what the workers' Evaluators are made with; inputs come from the seed there
        self.options = {"tolerance": self.tolerance, "repeats": repeats, "warmup": warmup,
                        "seed": seed}
        self.search = uuid.uuid4().hex       # one Evaluator per worker for this search
        self.timings = {"evaluations": 0, "round_trip_s": 0.0, "task_s": 0.0, "compile_s": 0.0,
                        "idle_s": 0.0, "busy_s": {}, "batches": {}}
        # configs timed ahead that run on past their batch (the evaluator contract's
        # `carries`): future -> (config, when sent, worker, scheduler); those finished
        # are put on _landed by their callback and taken in by _settle, here alone
        self._carried: dict = {}
        self._landed: queue.Queue = queue.Queue()
        self._ahead_done: dict[Config, Result] = {}    # measured and recorded, not collected yet

    @property
    def parallelism(self) -> int:
        """Evaluations this search may run at once (the evaluator contract): as given (a
        table shares its group's workers among its searches), else the group's live
        workers.  A strategy fills its batches' idle rounds with configs timed ahead."""
        if self._parallelism is not None:
            return self._parallelism
        return max(1, len(self.group.live))

    def __call__(self, config) -> Result:
        return self.many([config])[0]

    # --- configs timed ahead, carried past their batch (search/contract.py) ---------
    carries = True

    def carried(self) -> frozenset:
        self._settle()
        return frozenset(entry[0] for entry in self._carried.values())

    def collect(self) -> list[tuple[Config, Result]]:
        self._settle()
        out = list(self._ahead_done.items())
        self._ahead_done.clear()
        return out

    def finish(self, wait: bool = True) -> list[Result]:
        """The search ended: the Results of its evaluations timed ahead that it never
        collected, waited for (they were counted against its budget when sent), in the
        order they finished; without `wait` (the search failed) those still running are
        cancelled instead (never recorded) and their workers' slots freed."""
        if wait:
            self._settle(until_empty=True)
        carried, self._carried = self._carried, {}
        for f, (_, _, addr, _) in carried.items():
            f.cancel()
            self.group.release(addr)
        return [r for _, r in self.collect()]

    def _settle(self, until_empty: bool = False) -> None:
        """Take in the carried evaluations that finished (recorded now, kept for
        collect), and drop those whose worker left the group (sent to nobody else: they
        were ahead of the search); `until_empty`: until none is carried."""
        while True:
            try:
                f = self._landed.get(timeout=0.5) if until_empty and self._carried else \
                    self._landed.get_nowait()
            except queue.Empty:
                if not (until_empty and self._carried):
                    break
                self.group.coordinator.check_cancelled()
                self.group.coordinator.refresh()
                self._drop_the_dead()
                continue
            entry = self._carried.pop(f, None)
            if entry is None:                 # taken into a batch meanwhile
                continue
            c, sent, addr, _ = entry
            self.group.release(addr)
            if f.status in ("finished", "error", "cancelled"):
                r = self._outcome(f, c, sent, addr)
                if r is not None:
                    self._ahead_done[c] = r
            else:                             # its result was lost with its worker
                f.cancel()
        self._drop_the_dead()

    def _drop_the_dead(self) -> None:
        for f, (c, _, addr, _) in list(self._carried.items()):
            if not f.done() and not self.group.alive(addr):
                del self._carried[f]
                f.cancel()
                self.group.release(addr)

    def many(self, configs, stop: Callable[[], bool] | None = None, ahead=()) -> list[Result]:
        """Results for `configs` in their order; each distinct config is evaluated once.

        When stop() (asked before each evaluation starts, e.g. the time limit) says
        so, no more start: the evaluations in flight finish and the Results of the
        configs up to the last one started are returned (a shorter list).

        `ahead`: configs timed ahead (Tracker.many), sent once `configs` are all sent
        and a worker has room; those still running when `configs` are in run on
        (carried), and a later batch that asks for one waits for it."""
        self._settle()
        configs, ahead = ([c if isinstance(c, Config) else Config(c) for c in cs] for cs in (configs, ahead))
        done: dict[Config, Result] = {}
        todo = deque()
        adopted: dict = {}
        flying = {entry[0]: f for f, entry in self._carried.items()}
        for c in dict.fromkeys(configs):
            if c in self._ahead_done:             # timed ahead, measured since the Tracker looked
                done[c] = self._ahead_done.pop(c)
                continue
            if c in flying:                       # timed ahead, still running: waited for
                adopted[flying[c]] = self._carried.pop(flying[c])
                continue
            r = self.stored(c)
            if r is None:
                todo.append(c)
            else:
                done[c] = r
                self._replayed(r, None)
        sent = set(todo) | set(done) | {entry[0] for entry in adopted.values()}
        later = deque(c for c in dict.fromkeys(ahead) if c not in sent and c not in flying
                      and c not in self._ahead_done and self.stored(c) is None)
        if todo or adopted or later:
            if todo:
                sizes = self.timings["batches"]           # how parallel the strategy's steps were
                sizes[len(todo)] = sizes.get(len(todo), 0) + 1
            self._farm_out(todo, done, stop, adopted=adopted, ahead=later)
        out = []
        for c in configs:                          # the prefix whose Results exist
            if c not in done:
                break
            out.append(done[c])
        return out

    def prefetch(self, configs) -> None:
        """Configs the strategy evaluates next: compiled ahead on each of the group's hosts
        (CUDA), or announced to every worker (GL: compile_scope "process"), without
        waiting; nothing where the backend does not compile ahead."""
        from distributed import fire_and_forget
        todo = [c for c in (Config(c) for c in dict.fromkeys(configs)) if self.stored(c) is None]
        if not self.group.compiles or len(todo) < 2:
            return
        client = self.group.coordinator.client
        for addrs in self.group.hosts().values():
            fire_and_forget(client.submit(compile_task, self.group.spec, self.problem, todo,
                                          pure=False, workers=addrs, allow_other_workers=False,
                                          resources={self.group.host_resource: 1}))

    # --- farming out ------------------------------------------------------------
    def _submit(self, client, c: Config, addr: str, ahead: bool = False):
        # a search's own evaluations before its configs timed ahead, on a worker where
        # both wait for the GPU (Dask runs the higher priority first)
        return client.submit(evaluate_task, self.group.spec, self.search, self.problem, c,
                             self.options, self._best_ms, pure=False,
                             key=f"shadertune-eval-{uuid.uuid4().hex}",
                             workers=[addr], allow_other_workers=False,
                             resources={self.group.resource: 1}, priority=0 if ahead else 1)

    def _farm_out(self, todo: deque, done: dict, stop: Callable[[], bool] | None,
                  adopted: dict | None = None, ahead: deque | None = None) -> None:
        """Evaluate `todo` into `done`, and wait for the `adopted` evaluations (carried
        ones this batch asks for); then send `ahead` as workers have room: what of it is
        still running when this batch's own are in is carried on."""
        client = self.group.coordinator.client
        finished: queue.Queue = queue.Queue()       # futures, put there as they finish
        running: dict = dict(adopted or {})        # future -> (config, when sent, worker, scheduler)
        speculative: set = set()                   # of running: configs timed ahead
        deaths: dict[Config, int] = {}             # config -> its workers that died under it
        ahead = ahead if ahead is not None else deque()
        planned = list(todo) + list(ahead)
        order = {c: i for i, c in enumerate(planned)}
        plan = (CompileAhead(self.group, self.problem, planned, wake=lambda: finished.put(_WAKE))
                if self.group.compiles and len(planned) > 1 else None)
        dropped = 0
        starved_since = None
        carried_on = False

        def arrived(f) -> None:
            finished.put(f)

        def send(c: Config, addr: str, is_ahead: bool = False) -> None:
            f = self._submit(client, c, addr, ahead=is_ahead)
            running[f] = (c, time.perf_counter(), addr, self.group.coordinator.scheduler_id)
            if is_ahead:
                speculative.add(f)
            f.add_done_callback(arrived)

        def position(c) -> int:          # a config sent again from a carried one: not planned
            return order.get(c, -1)
        for f in running:
            f.add_done_callback(arrived)
        try:
            while True:             # until this batch's own are in (after one pass for the ahead)
                self.group.coordinator.check_cancelled()
                if todo and stop is not None and stop():
                    todo.clear()                   # the ones started still finish
                    continue
                ready = plan.ready() if plan is not None else len(order)
                while todo and position(todo[0]) < ready:
                    addr = self.group.acquire()
                    if addr is None:
                        break
                    send(todo.popleft(), addr)
                # the configs ahead, once this batch's own are all out (compiled first
                # while those run; once they are in, all of them that have a worker: so
                # that what is timed ahead does not depend on how fast a batch came in)
                while not todo and ahead and (position(ahead[0]) < ready
                                              or len(running) == len(speculative)):
                    if stop is not None and stop():
                        ahead.clear()
                        break
                    # once this batch's own are in, every one of them goes out (queued
                    # behind what runs: the same configs are timed ahead however fast
                    # the batch came in)
                    addr = self.group.acquire(beyond=len(running) == len(speculative))
                    if addr is None:
                        break
                    send(ahead.popleft(), addr, is_ahead=True)
                if not todo and len(running) == len(speculative):
                    break                          # this batch's own are in
                if not running:                    # every worker busy with other searches, or
                    starved_since = self.group.starving(starved_since)   # compiling, or none
                    if todo and position(todo[0]) < ready:
                        self.group.wait_for_slot(0.5)
                    else:
                        self._wait(finished, 0.5)
                    continue
                item = self._wait(finished, 0.5)
                self.group.coordinator.refresh()
                self._send_again_from_the_dead(running, todo, done, deaths, speculative)
                if item is None:                   # still running, or waiting for a worker
                    starved_since = self.group.starving(starved_since)
                    continue
                if item is _WAKE or item not in running:   # (one sent again: its callback still fires)
                    continue
                f = item
                if f.status not in ("finished", "error", "cancelled"):
                    # its result was lost with its worker before it reached us: sent
                    # again once that worker is seen gone
                    f.add_done_callback(arrived)
                    continue
                c, sent, addr, _ = running.pop(f)
                self.group.release(addr)
                r = self._outcome(f, c, sent, addr)
                if f in speculative:               # ahead: kept for collect (or dropped)
                    speculative.discard(f)
                    if r is not None:
                        self._ahead_done[c] = r
                elif r is None:
                    dropped += 1
                    if dropped > DROPPED_TRIES * max(1, len(order)):
                        raise ShadertuneError("the cluster keeps dropping this search's "
                                              "evaluations; results so far are in the store, "
                                              "rerun to resume")
                    todo.appendleft(c)              # to be evaluated again, elsewhere
                else:
                    done[c] = r
            carried_on = True
        finally:
            for f, entry in running.items():
                if carried_on and f in speculative:
                    self._carried[f] = entry       # runs on past this batch
                    f.add_done_callback(self._landed.put)
                else:
                    f.cancel()
                    self.group.release(entry[2])
            if plan is not None:
                plan.cancel()
                self.timings["compile_s"] += plan.seconds

    def _send_again_from_the_dead(self, running: dict, todo: deque, done: dict, deaths: dict,
                                  speculative: set = frozenset()) -> None:
        """Evaluations pinned to a worker that left the group (Dask would keep them
        waiting for it): cancelled and sent again, first in line; one whose workers
        died KILLS_TO_FAIL times under it is recorded as run_failed instead.  A death
        counts against the evaluation the worker was running, the first sent of its
        evaluations in flight (it runs them in the order sent), not the one queued
        behind it.  One sent before the scheduler was lost is sent again without a
        death counted (its workers rejoin the new scheduler)."""
        coord = self.group.coordinator
        if not coord.connected:
            return                  # the cluster's answers wait for the connection
        lost = [(f, entry) for f, entry in running.items()
                if not f.done() and not self.group.alive(entry[2])]
        first_sent: dict[str, float] = {}
        for _, (_, sent, addr, _) in lost:
            first_sent[addr] = min(sent, first_sent.get(addr, sent))
        for f, (c, sent, addr, scheduler) in sorted(lost, key=lambda x: x[1][1], reverse=True):
            del running[f]
            f.cancel()
            self.group.release(addr)
            if f in speculative:        # ahead of the search: dropped, not sent again
                speculative.discard(f)
                continue
            if scheduler == coord.scheduler_id and sent == first_sent[addr]:
                deaths[c] = deaths.get(c, 0) + 1
            if deaths.get(c, 0) >= KILLS_TO_FAIL:
                r = Result(self.backend.name, self.device, self.problem, c, RUN_FAILED,
                           message=f"its worker died {deaths[c]} times while evaluating it "
                                   f"(killed or crashed)")
                self._record(r, None, None)
                done[c] = r
            else:
                todo.appendleft(c)

    def _wait(self, finished: queue.Queue, timeout: float):
        try:
            return finished.get(timeout=timeout)
        except queue.Empty:
            return None

    def _idle_before(self, addr: str, span) -> float:
        """The worker's idle seconds between its last evaluation (of any search of the
        group) and this one, `span` = (start, end) on its clock: what dispatch, return and
        the coordinator cost its GPU where the next evaluation was not already queued."""
        if span is None:
            return 0.0
        start, end = span
        last = self.group.ended.get(addr)
        self.group.ended[addr] = end if last is None else max(last, end)
        return 0.0 if last is None else max(0.0, start - last)

    def _outcome(self, f, config: Config, sent: float, addr: str) -> Result | None:
        """The Result of a finished future (written and noted), or None to evaluate again."""
        # its worker died before its value was fetched: given up, evaluated again
        status, value = outcome(f, FETCH_POLL_SECONDS, lambda: self.group.gone((addr,)))
        round_trip = time.perf_counter() - sent      # sent to its Result here (fetched too)
        if status == "finished":
            out = value
            if "context_error" in out:
                self.group.coordinator.exclude(out["address"], out["worker"], out["context_error"])
                return None
            for k, v in out["stage_seconds"].items():
                self.stage_seconds[k] = self.stage_seconds.get(k, 0.0) + v
            t = self.timings
            t["evaluations"] += 1
            t["round_trip_s"] += round_trip
            t["idle_s"] += self._idle_before(addr, out.get("span"))
            t["task_s"] += out.get("task_seconds", out["seconds"])
            t["busy_s"][out["worker"]] = t["busy_s"].get(out["worker"], 0.0) + \
                out.get("task_seconds", out["seconds"])
            self._record(out["result"], out["seconds"], out["worker"])
            return out["result"]
        if status == "cancelled":
            # the scheduler was lost (once the client is connected again the evaluation
            # is sent again), or the worker holding its value died before the fetch
            self.group.coordinator.check_cancelled()
            self.group.coordinator.await_connection()
            return None
        e = value
        if isinstance(e, KilledWorker):
            r = Result(self.backend.name, self.device, self.problem, config, RUN_FAILED,
                       message=f"its worker died {e.allowed_failures + 1} times while "
                               f"evaluating it (killed or crashed)")
            self._record(r, None, None)
            return r
        raise ShadertuneError(f"evaluating {config.key} on the cluster failed: {_line(e, typed=True)}")
