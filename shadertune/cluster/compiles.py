"""Compile ahead on the hosts' cores while the GPUs time: one batch's plan.

A backend that compiles ahead (CUDA: NVRTC into a cubin cache on the host's
disk) gets each config of a batch compiled on every host of the device group
as the GPUs there time the batch.  A host compiles the batch in chunks, in the
batch's order, one chunk at a time on one of its workers' compile thread
(worker.compile_task, on its host resource: the host's cores, never the GPU
thread): the first chunk has one config per GPU of the host, so that every GPU
starts as soon as it can, the next ones as many configs as the host has cores
(at least MIN_CHUNK: each chunk is a round trip and, on CUDA, a process pool
started).  A chunk is done once its compiles are under way (CUDA's precompile
starts them and returns); the evaluator times configs[:ready()] while the chunks
after them compile, so compiling overlaps timing.  Workers of one host share its
compile cache (the host is the worker's machine name), where a compile in progress
is marked (backends/cuda/compile_marks.py): a build of it on another worker waits
for its cubin, so no config is compiled twice on a host.

A host whose workers all left drops out of the plan (its next workers compile
what they time themselves, in build); a chunk that fails to compile is done
(each config then says why when it is built).
"""
from __future__ import annotations

import uuid
from typing import Callable

from .futures import FETCH_POLL_SECONDS, outcome
from .worker import compile_task

MIN_CHUNK = 8


class CompileAhead:
    def __init__(self, group, problem, configs, wake: Callable[[], None]):
        self.group = group
        self.problem = problem
        self.configs = list(configs)
        self.wake = wake                         # called when a chunk is done
        self.seconds = 0.0                       # compile seconds the workers reported
        self._hosts: dict[str, dict] = {}        # host -> {next, done, future}
        for host, addrs in group.hosts().items():
            self._hosts[host] = {"done": 0, "future": None, "gpus": len(addrs)}
            self._next_chunk(host)

    def ready(self) -> int:
        """How many configs, from the batch's start, every host has compiled."""
        self._advance()
        return min((h["done"] for h in self._hosts.values()), default=len(self.configs))

    def cancel(self) -> None:
        for h in self._hosts.values():
            if h["future"] is not None and not h["future"].done():
                h["future"].cancel()
            h["future"] = None

    def _advance(self) -> None:
        # the view of live workers is refreshed here: a caller that waits on compiles alone
        # (no evaluation in flight) must still see workers restarted under new addresses
        self.group.coordinator.refresh()
        live = self.group.hosts()
        for host, h in list(self._hosts.items()):
            fut = h["future"]
            if host not in live:
                if fut is not None and not fut.done():
                    fut.cancel()
                del self._hosts[host]
                continue
            if fut is not None and not fut.done() and not set(h["addrs"]) & set(live[host]):
                fut.cancel()             # its workers left (restarted ones have new addresses)
                h["future"] = None
                self._next_chunk(host)
                continue
            if fut is None:
                if h["done"] < len(self.configs):
                    self._next_chunk(host)   # its workers were away when the chunk was due
                continue
            if not fut.done():
                continue
            addrs = h["addrs"]           # (its workers died before its value was fetched: given up)
            status, value = outcome(fut, FETCH_POLL_SECONDS, lambda: self.group.gone(addrs))
            if status == "finished":     # (one lost with its workers: the chunk counts as done)
                self.seconds += float(value.get("seconds", 0.0))
            h["done"] = h.pop("end")
            h["future"] = None
            self._next_chunk(host)

    def _next_chunk(self, host: str) -> None:
        h = self._hosts[host]
        start = h["done"]
        if start >= len(self.configs):
            return
        size = h["gpus"] if start == 0 else max(MIN_CHUNK, self.group.host_cpus(host))
        end = min(len(self.configs), start + max(1, size))
        addrs = self.group.hosts().get(host) or []
        if not addrs:
            return
        client = self.group.coordinator.client
        fut = client.submit(compile_task, self.group.spec, self.problem, self.configs[start:end],
                            pure=False, workers=addrs, allow_other_workers=False,
                            resources={self.group.host_resource: 1},
                            key=f"shadertune-compile-{uuid.uuid4().hex}")
        h["future"], h["end"], h["addrs"] = fut, end, addrs
        fut.add_done_callback(lambda _f: self.wake())
