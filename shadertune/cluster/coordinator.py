"""The coordinator's view of a cluster for one backend: its workers, grouped by device.

A device group is the workers whose backend opened on the same device (same
backend, device key and template hash: one Dask resource, see worker.py).  A
search runs on one group: its evaluations ask for the group's resource, so
Dask spreads them over exactly these workers, and its racing bar and its store
rows are those of its one device.  Two identical GPUs make one group (the
evaluations split between them); two different GPUs make two groups, and each
tunes the table for its own device.

Flow control, not scheduling: a group lets at most as many evaluations be in
flight as it has live workers (shared by the searches running on it), and Dask
places each on an idle worker.  An evaluation therefore starts with the
freshest racing bar, and a worker that dies holds at most the one evaluation
it was running.

Faults: a worker that dies is restarted by its nanny and rejoins its group by
itself (its plugin opens the backend and offers the resource again as it
registers).  A worker whose backend does not open is reported and gets no
work; one whose GPU context fails mid-search is reported and retired from the
cluster.  A group with no live worker for NO_WORKER_SECONDS ends its searches
with ContextError.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

from ..errors import ContextError
from .remote import RemoteBackend
from .worker import WorkerStatus, call_task, worker_status

REFRESH_SECONDS = 1.0            # how stale the list of live workers may be
# How long a new coordinator waits for workers it could not ask yet (none registered,
# or one that did not answer in time: starting, or a transient connection error)
# before it says that no worker serves its backend.
STARTUP_WAIT_SECONDS = 15.0
NO_WORKER_SECONDS = 60.0         # a group without a live worker this long gives up


class Cancelled(Exception):
    """The table was stopped (another search failed, or the user interrupted)."""


class DeviceGroup:
    def __init__(self, coordinator: "Coordinator", status: WorkerStatus):
        self.coordinator = coordinator
        self.spec = coordinator.spec
        self.resource = status.resource
        self.device = status.device
        self.backend_name = status.backend
        self.default_strategy = status.default_strategy
        self.template_hash = status.template_hash
        self.backend = RemoteBackend(self)      # what tune() searches through
        self.live: dict[str, str] = {}           # address -> worker name
        self._in_flight = 0
        self._cond = threading.Condition()

    # --- flow control -------------------------------------------------------
    def acquire(self) -> bool:
        """Take one evaluation slot if a live worker is free for it."""
        self.coordinator.refresh()
        with self._cond:
            if self._in_flight < len(self.live):
                self._in_flight += 1
                return True
            return False

    def release(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

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

    # --- backend calls on one of the group's workers --------------------------
    def call(self, method: str, problem, *args):
        """backend.<method>(problem, *args) on a worker of this group (space, candidates, ...);
        a worker whose GPU context fails meanwhile is excluded and another one asked."""
        since = None
        while True:
            fut = self.coordinator.client.submit(call_task, self.spec, method, problem, *args,
                                                 pure=False, priority=10,
                                                 resources={self.resource: 1})
            try:
                while True:
                    try:
                        out = fut.result(timeout=1.0)
                        break
                    except TimeoutError:
                        self.coordinator.check_cancelled()
                        self.coordinator.refresh()
                        since = self.starving(since)
            finally:
                if not fut.done():
                    fut.cancel()
            if "context_error" not in out:
                return out["value"]
            self.coordinator.exclude(out["address"], out["worker"], out["context_error"])

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
        self.cancelled = threading.Event()
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

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def refresh(self, force: bool = False) -> None:
        """Live workers per group, from the scheduler (at most every REFRESH_SECONDS)."""
        with self._lock:
            if not force and time.monotonic() - self._checked < REFRESH_SECONDS:
                return
            self._checked = time.monotonic()
            workers = self.client.scheduler_info()["workers"]
            ours = {addr: w for addr, w in workers.items() if addr not in self.excluded}
            self._seen = set(ours)
            unknown = [addr for addr in ours if addr not in self.statuses]
            if unknown:
                self._learn(unknown)
            for g in self.groups.values():
                live = {addr: str(w.get("name", addr)) for addr, w in ours.items()
                        if w.get("resources", {}).get(g.resource, 0) >= 1}
                with g._cond:
                    g.live = live
                    g._cond.notify_all()
            for addr in [a for a in self.statuses if a not in workers]:
                del self.statuses[addr]

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
            elif st.serves:
                self.on_event(f"worker {st.name} (GPU {st.gpu}) excluded: {st.error}")

    def exclude(self, address: str, name: str, reason: str) -> None:
        """A worker's GPU context failed mid-search: report it and retire it (its
        queued work moves to the others)."""
        with self._lock:
            if address in self.excluded:
                return
            self.excluded[address] = reason
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

