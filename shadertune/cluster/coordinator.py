"""The coordinator's view of a cluster for one backend: its workers, grouped by device.

A device group is the workers whose backend opened on the same device (same
backend, device key and template hash: one Dask resource, see worker.py).  A
search runs on one group: its evaluations ask for the group's resource, so
Dask spreads them over exactly these workers, and its racing bar and its store
rows are those of its one device.  Two identical GPUs make one group (the
evaluations split between them); two different GPUs make two groups, and each
tunes the table for its own device.

Placement: a group hands each evaluation to a live worker with none in flight
(shared by the searches running on it) and pins it there; an evaluation
therefore starts with the freshest racing bar, no GPU idles while another has a
queue, and a worker that dies holds at most the one evaluation it was running.
Dask's own placement is not used for evaluations: it weighs the compile tasks a
worker's host thread runs into its occupancy and sent 123 of a table's 128
evaluations to one of two GPUs (notes/cluster.md).  A pinned evaluation whose
worker died waits in Dask for that worker for good, so the evaluator sends it
again itself and counts the deaths (evaluator.py).

Faults, each reported through on_event as it happens:
- a worker process that dies (killed, crashed): its nanny says how on the
  scheduler's exit topic (engine.WORKER_EXIT_TOPIC) and restarts it; it rejoins
  its group by itself (its plugin opens the backend and offers the resource
  again as it registers); a worker that leaves without a word (its host or
  network went away) is reported once it has been gone GONE_SECONDS;
- a worker whose backend does not open gets no work; one whose GPU context
  fails mid-search is retired from the cluster;
- the scheduler lost (stopped, restarted): Dask's client reconnects to the
  same address for its connect time-out; the evaluations it dropped are asked
  again (evaluator.py), and the workers of `python -m shadertune.cluster worker`
  rejoin it by themselves;
- a group with no live worker for NO_WORKER_SECONDS ends its searches with
  ContextError.
The coordinator never puts a time-out on Future.result() (futures.py says why).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from ..errors import ContextError, ShadertuneError
from .engine import WORKER_EXIT_TOPIC, exit_reason
from .futures import outcome, wait_done
from .remote import RemoteBackend
from .worker import WorkerStatus, call_task, host_call_task, host_resource_name, worker_status

REFRESH_SECONDS = 1.0            # how stale the list of live workers may be
# How long a new coordinator waits for workers it could not ask yet (none registered,
# or one that did not answer in time: starting, or a transient connection error)
# before it says that no worker serves its backend.
STARTUP_WAIT_SECONDS = 15.0
NO_WORKER_SECONDS = 60.0         # a group without a live worker this long gives up
GONE_SECONDS = 3.0               # a worker gone this long without its nanny's word is reported
RECONNECT_SECONDS = 60.0         # how long a call waits for the client to reconnect
DROPPED_TRIES = 5                # a call whose future the cluster drops this often in a row fails
CALL_POLL_SECONDS = 1.0          # how often a waiting call looks at the cluster
# Evaluations sent to one worker at a time: the one its GPU runs and one queued behind
# it, so that a result's way back to the coordinator and the next config's way out
# (~15-30 ms a round trip on Dask, against 40-100 ms of a CUDA evaluation) overlap the
# GPU's work.  The worker runs them one after the other (each takes its device
# resource, of which it has one), in the order they were sent.
EVALUATIONS_PER_WORKER = 2


class Cancelled(Exception):
    """The table was stopped (another search failed, or the user interrupted)."""


def _scheduler_view():
    """A function for client.run_on_scheduler giving (scheduler id, {address: {name,
    resources}}) of every worker.  Made here so that it travels by value: a scheduler
    started with plain `dask scheduler` need not import shadertune.  (Client.scheduler_info
    lists 5 workers unless asked for all, and answers from its last copy when the
    scheduler cannot be reached.)"""
    def view(dask_scheduler=None):
        return dask_scheduler.id, {addr: {"name": str(ws.name), "resources": dict(ws.resources)}
                                   for addr, ws in dask_scheduler.workers.items()}
    return view


class DeviceGroup:
    def __init__(self, coordinator: "Coordinator", status: WorkerStatus):
        self.coordinator = coordinator
        self.spec = coordinator.spec
        self.resource = status.resource
        self.host_resource = host_resource_name(status.resource)   # the workers' second thread
        self.compiles = status.compiles         # its backend compiles ahead (compiles.py)
        self.compile_scope = status.compile_scope
        self.device = status.device
        self.backend_name = status.backend
        self.default_strategy = status.default_strategy
        self.template_hash = status.template_hash
        self.backend = RemoteBackend(self)      # what tune() searches through
        self.live: dict[str, str] = {}           # address -> worker name
        self._busy: dict[str, int] = {}          # address -> its evaluations in flight
        self._freed: dict[str, float] = {}       # address -> when its last evaluation ended
        self.ended: dict[str, float] = {}        # address -> its last evaluation's end, its clock
        self._cond = threading.Condition()

    # --- placement ------------------------------------------------------------
    def acquire(self, beyond: bool = False) -> str | None:
        """The address of a live worker with fewer than EVALUATIONS_PER_WORKER
        evaluations in flight, now taken for one more (the fewest in flight, then the
        one idle longest), or None; `beyond`: the least busy live worker even past that
        bound (configs timed ahead, queued behind the searches' own: evaluator.py)."""
        self.coordinator.refresh()
        with self._cond:
            free = [a for a in self.live if beyond or self._busy.get(a, 0) < EVALUATIONS_PER_WORKER]
            if not free:
                return None
            addr = min(free, key=lambda a: (self._busy.get(a, 0), self._freed.get(a, 0.0)))
            self._busy[addr] = self._busy.get(addr, 0) + 1
            return addr

    def release(self, addr: str) -> None:
        with self._cond:
            n = self._busy.pop(addr, 0) - 1
            if n > 0:
                self._busy[addr] = n
            self._freed[addr] = time.monotonic()
            self._cond.notify_all()

    def alive(self, addr: str) -> bool:
        """Whether the worker at `addr` is still one of the group's (as of the last refresh)."""
        with self._cond:
            return addr in self.live

    def gone(self, addrs) -> bool:
        """Whether none of the workers at `addrs` is one of the group's any more (the
        list of live workers refreshed first): a fetch of a value they held gives up."""
        self.coordinator.refresh()
        return not any(self.alive(a) for a in addrs)

    def wait_for_slot(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait(timeout)
        self.coordinator.check_cancelled()

    def starving(self, since: float | None) -> float | None:
        """Watch for a group left without workers: pass the time it was first seen
        waiting (None at first); raises ContextError after NO_WORKER_SECONDS without
        a live worker, and returns the time to pass next."""
        now = time.monotonic()
        if self.live:
            return None
        if since is not None and now - since > NO_WORKER_SECONDS:
            raise ContextError(f"no worker with device {self.device.key!r} has been alive for "
                               f"{NO_WORKER_SECONDS:g} s; results so far are in the store")
        return now if since is None else since

    def hosts(self) -> dict[str, list[str]]:
        """The live workers that compile ahead, by what shares a compile: {host:
        [addresses]} where the backend's compiles serve its host (compile_scope "host"),
        each worker on its own ({address: [address]}) where they serve their process."""
        out: dict[str, list[str]] = {}
        for addr in self.live:
            st = self.coordinator.statuses.get(addr)
            if st is not None and st.compiles and st.host is not None:
                out.setdefault(addr if self.compile_scope == "process" else st.host, []).append(addr)
        return out

    def host_cpus(self, host: str) -> int:
        cpus = [st.cpus for a, st in self.coordinator.statuses.items()
                if st.host == host and a in self.live and st.cpus]
        return max(cpus, default=1)

    # --- backend calls on one of the group's workers --------------------------
    def call(self, method: str, problem, *args, host: bool = False):
        """backend.<method>(problem, *args) on a worker of this group (space, candidates, ...);
        a worker whose GPU context fails meanwhile is excluded and another one asked, and
        a call the cluster dropped (its scheduler was lost) is asked again.  host: host
        work (worker.HOST_CALLS), on a worker's second thread, beside its GPU's."""
        coord = self.coordinator
        since = None
        dropped = 0

        def waiting() -> None:
            nonlocal since
            coord.check_cancelled()
            coord.refresh()
            since = self.starving(since)
        while True:
            fut = coord.client.submit(host_call_task if host else call_task, self.spec, method,
                                      problem, *args, pure=False, priority=10,
                                      resources={self.host_resource if host else self.resource: 1})
            try:
                wait_done(fut, CALL_POLL_SECONDS, waiting)
            finally:
                if not fut.done():
                    fut.cancel()
            status, value = outcome(fut)
            if status == "error":
                raise value
            if status == "cancelled":
                dropped += 1
                if dropped >= DROPPED_TRIES:
                    raise ShadertuneError(f"the cluster dropped the call {method} {dropped} times "
                                          f"({value}); results so far are in the store, rerun to "
                                          f"resume")
                coord.await_connection()
                continue
            if "context_error" not in value:
                return value["value"]
            coord.exclude(value["address"], value["worker"], value["context_error"])

    def __repr__(self) -> str:
        return f"DeviceGroup({self.device.key!r}, workers={sorted(self.live.values())})"


class Coordinator:
    """The device groups of the workers that serve backend `spec` (workers started with
    its plugin: engine.local_cluster, python -m shadertune.cluster worker), kept up to
    date as workers die, restart and join."""

    def __init__(self, client, spec: str, on_event: Callable[[str], None] | None = None):
        self.client = client
        self.spec = spec
        self.on_event = on_event or (lambda message: None)
        self.groups: dict[str, DeviceGroup] = {}          # resource -> group
        self.statuses: dict[str, WorkerStatus] = {}        # address -> status
        self.excluded: dict[str, str] = {}                 # address -> reason
        self._lock = threading.Lock()
        self._checked = 0.0
        self._seen: set[str] = set()                      # the workers the last refresh saw
        self._scheduler_id: str | None = None
        self.connected = True
        self._members: dict[str, WorkerStatus] = {}       # name -> status, every worker of a group
        self._gone: dict[str, float] = {}                 # name -> when it left, not yet explained
        self._explained: dict[str, float] = {}            # name -> when its nanny's word came
        self.cancelled = threading.Event()
        try:
            client.subscribe_topic(WORKER_EXIT_TOPIC, self._worker_exited)
        except Exception:                # an older Dask: workers are still reported, without why
            pass
        self.refresh(force=True)
        deadline = time.monotonic() + STARTUP_WAIT_SECONDS
        while not self.groups and self._unanswered() and time.monotonic() < deadline:
            time.sleep(0.25)
            self.refresh(force=True)
        if not self.groups:
            failed = [f"{s.name}: {s.error}" for s in self.statuses.values() if s.serves]
            if failed:
                raise ContextError(f"no worker could open backend {spec!r}: {'; '.join(failed)}")
            raise ContextError(f"no worker of the cluster serves backend {spec!r} (start them "
                               f"with: python -m shadertune.cluster worker ADDRESS --gpus 0,1 "
                               f"--backends {spec})")

    @property
    def scheduler_id(self) -> str | None:
        """The id of the scheduler last reached (a new one after a restart)."""
        return self._scheduler_id

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    # --- the live workers ---------------------------------------------------
    def refresh(self, force: bool = False) -> None:
        """Live workers per group, from the scheduler (at most every REFRESH_SECONDS)."""
        with self._lock:
            if not force and time.monotonic() - self._checked < REFRESH_SECONDS:
                return
            self._checked = time.monotonic()
            try:
                scheduler_id, workers = self.client.run_on_scheduler(_scheduler_view())
            except Exception as e:       # the scheduler is gone (its client reconnects meanwhile)
                self._disconnected(e)
                return
            if not self.connected or scheduler_id != self._scheduler_id:
                if self._scheduler_id is not None:
                    restarted = scheduler_id != self._scheduler_id
                    self.on_event(f"connected to the scheduler again"
                                  f"{' (restarted)' if restarted else ''}"
                                  + (": its workers rejoin as they come back, the evaluations it "
                                     "dropped are sent again" if restarted else ""))
                    self._gone.clear()   # everyone left with the old one: no one to report
                    self._members.clear()
                self.connected = True
                self._scheduler_id = scheduler_id
            ours = {addr: w for addr, w in workers.items() if addr not in self.excluded}
            self._seen = set(ours)
            unknown = [addr for addr in ours if addr not in self.statuses]
            if unknown:
                self._learn(unknown)
            live_names = set()
            for g in self.groups.values():
                live = {addr: w["name"] for addr, w in ours.items()
                        if w["resources"].get(g.resource, 0) >= 1}
                live_names.update(live.values())
                with g._cond:
                    g.live = live
                    g._cond.notify_all()
            for addr in [a for a in self.statuses if a not in workers]:
                del self.statuses[addr]
            self._note_departures(live_names)

    def _disconnected(self, e: BaseException) -> None:
        if self.client.status in ("closing", "closed"):
            raise ShadertuneError("the connection to the Dask scheduler is closed (it did not come "
                                  "back in time); results so far are in the store, rerun to resume")
        if self.connected:
            self.connected = False
            self.on_event(f"lost the connection to the scheduler ({type(e).__name__}); waiting for "
                          f"it to come back")
        for g in self.groups.values():
            with g._cond:
                g.live = {}

    def await_connection(self) -> None:
        """Return once the client is connected to a scheduler (after one was lost)."""
        deadline = time.monotonic() + RECONNECT_SECONDS
        while self.client.status != "running":
            self.check_cancelled()
            if self.client.status in ("closing", "closed") or time.monotonic() > deadline:
                raise ShadertuneError("the connection to the Dask scheduler was lost and not "
                                      "restored; results so far are in the store, rerun to resume")
            time.sleep(0.2)
        self.refresh(force=True)

    def _note_departures(self, live_names: set) -> None:
        """Workers of a group that left: reported when their nanny's word comes
        (_worker_exited), else after GONE_SECONDS; a worker back again is reported too."""
        now = time.monotonic()
        for name in list(self._gone):
            if name in live_names:
                del self._gone[name]
                self.on_event(f"worker {name} rejoined")
        for name in self._members:
            if name not in live_names and name not in self._gone and self.connected:
                self._gone[name] = now
        for name, since in list(self._gone.items()):
            told = self._explained.get(name, -1.0)
            if told >= since - GONE_SECONDS:
                continue                 # its nanny said why
            if now - since >= GONE_SECONDS:
                st = self._members[name]
                self.on_event(f"worker {name} (GPU {st.gpu}, pid {st.pid} on {st.host}) left the "
                              f"cluster: its connection to the scheduler closed (its host or network "
                              f"went away, or it was stopped); its evaluation runs again elsewhere")
                self._explained[name] = now

    def _worker_exited(self, event) -> None:
        """The scheduler's exit topic: a nanny saw its worker process die."""
        _, msg = event
        name = str(msg.get("name"))
        st = self._members.get(name)
        # (one that joined moments ago may not be learned yet: reported all the same)
        gpu = st.gpu if st is not None else msg.get("gpu")
        pid = msg.get("pid") or (st.pid if st is not None else None)
        where = f" on {st.host}" if st is not None else ""
        self._explained[name] = time.monotonic()
        self.on_event(f"worker {name} (GPU {gpu}, pid {pid}{where}) died: "
                      f"{exit_reason(msg.get('exitcode'))}; its evaluation runs again on another "
                      f"worker, and its nanny restarts it")

    def _unanswered(self) -> bool:
        """The last refresh saw no worker, or one whose status is not known yet."""
        return not self._seen or any(a not in self.statuses for a in self._seen)

    def _learn(self, addresses: list[str]) -> None:
        """Ask new workers how their backend opened: a new device makes a new group,
        a failure is reported once."""
        try:
            found = self.client.run(worker_status, self.spec, workers=addresses,
                                    on_error="return")
        except OSError:
            return                       # gone already
        for addr, st in found.items():
            if not isinstance(st, WorkerStatus):
                continue                 # it went away meanwhile: asked again if it is back
            self.statuses[addr] = st
            if st.resource is not None:
                if st.resource not in self.groups:
                    self.groups[st.resource] = DeviceGroup(self, st)
                self._members[st.name] = st
            elif st.serves:
                self.on_event(f"worker {st.name} (GPU {st.gpu}) excluded: {st.error}")

    def exclude(self, address: str, name: str, reason: str) -> None:
        """A worker's GPU context failed mid-search: report it and retire it (its
        queued work moves to the others)."""
        with self._lock:
            if address in self.excluded:
                return
            self.excluded[address] = reason
            self._members.pop(name, None)
        self.on_event(f"worker {name} excluded: {reason}")

        def retire():
            try:
                self.client.retire_workers([address], close_workers=True)
            except Exception:            # gone already, or its GPU hangs: it gets no work either way
                pass
        # in the background: a worker whose GPU hangs may not close soon, and the
        # search need not wait for it (it is out of every group from now on)
        threading.Thread(target=retire, name="shadertune-retire", daemon=True).start()
        self.refresh(force=True)

    def names(self) -> list[str]:
        return sorted({n for g in self.groups.values() for n in g.live.values()})
