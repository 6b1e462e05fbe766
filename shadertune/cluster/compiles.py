"""Compile ahead on the hosts' cores while the GPUs time: one batch's plan.

A backend that compiles ahead (CUDA: NVRTC into a cubin cache on the host's
disk) gets each config of a batch compiled on every host of the device group
as the GPUs there time the batch.  A host compiles the batch in chunks, in the
batch's order, a chunk at a time on each of its workers' compile threads
(worker.compile_task, on its host resource: the host's cores, never the GPU
thread): the first chunk has one config per GPU of the host, so that every GPU
starts as soon as it can, the next ones the host's cores shared among its workers
(at least MIN_CHUNK: each chunk is a round trip and, on CUDA, a process pool
started).  A chunk is done once its compiles are under way (CUDA's precompile
compiles its first config there and then, and starts the rest); the evaluator times
configs[:ready()] while the chunks after them compile, so compiling overlaps timing.
Chunks run side by side on a host's workers (one each), so that one chunk's first
compile does not hold back the chunks after it: with one chunk at a time a host, a
batch of 8 on 4 GPUs waited two compiles in a row before its second half was sent.  Workers of one host share its
compile cache (the host is the worker's machine name), where a compile in progress
is marked (core/compile_marks.py): a build of it on another worker waits
for its cubin, so no config is compiled twice on a host.

A backend whose compiles serve only the process that made them (compile_scope
"process": GL's programs, compiled on the driver's threads of the worker's context)
gets the whole batch announced to every worker instead, one chunk each: any of them
may time any config, and each compiles them all on its driver's threads.

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
        # host -> {done: the prefix under way, next: the first config not handed out,
        #          flight: chunks sent, finished: {start: end} of chunks done past `done`,
        #          retry: (start, end) of chunks whose workers left, gpus}
        self._hosts: dict[str, dict] = {}
        for host, addrs in group.hosts().items():
            self._hosts[host] = {"done": 0, "next": 0, "flight": [], "finished": {},
                                 "retry": [], "gpus": len(addrs)}
            self._fill(host, addrs)

    def ready(self) -> int:
        """How many configs, from the batch's start, every host has compiled."""
        self._advance()
        return min((h["done"] for h in self._hosts.values()), default=len(self.configs))

    def cancel(self) -> None:
        for h in self._hosts.values():
            for chunk in h["flight"]:
                if not chunk["future"].done():
                    chunk["future"].cancel()
            h["flight"] = []

    def _advance(self) -> None:
        # the view of live workers is refreshed here: a caller that waits on compiles alone
        # (no evaluation in flight) must still see workers restarted under new addresses
        self.group.coordinator.refresh()
        live = self.group.hosts()
        for host, h in list(self._hosts.items()):
            if host not in live:
                for chunk in h["flight"]:
                    if not chunk["future"].done():
                        chunk["future"].cancel()
                del self._hosts[host]
                continue
            flying = []
            for chunk in h["flight"]:
                fut, addrs = chunk["future"], chunk["addrs"]
                if not fut.done():
                    if set(addrs) & set(live[host]):
                        flying.append(chunk)
                    else:                # its workers left (restarted ones have new addresses)
                        fut.cancel()
                        h["retry"].append((chunk["start"], chunk["end"]))
                    continue
                # (its workers died before its value was fetched: given up)
                status, value = outcome(fut, FETCH_POLL_SECONDS, lambda a=addrs: self.group.gone(a))
                if status == "finished":     # (one lost with its workers: the chunk counts as done)
                    self.seconds += float(value.get("seconds", 0.0))
                h["finished"][chunk["start"]] = chunk["end"]
            h["flight"] = flying
            while h["done"] in h["finished"]:
                h["done"] = h["finished"].pop(h["done"])
            self._fill(host, live[host])

    def _fill(self, host: str, addrs: list[str]) -> None:
        """Chunks sent to the host's live workers `addrs` until each has one (a retried
        one first)."""
        h = self._hosts[host]
        while addrs and len(h["flight"]) < len(addrs):
            if h["retry"]:
                start, end = h["retry"].pop(0)
            elif h["next"] < len(self.configs):
                start = h["next"]
                if self.group.compile_scope == "process":
                    size = len(self.configs)     # the worker's own: all of it at once
                else:
                    size = h["gpus"] if start == 0 else max(
                        MIN_CHUNK, self.group.host_cpus(host) // max(1, h["gpus"]))
                end = h["next"] = min(len(self.configs), start + max(1, size))
            else:
                return
            client = self.group.coordinator.client
            fut = client.submit(compile_task, self.group.spec, self.problem, self.configs[start:end],
                                pure=False, workers=addrs, allow_other_workers=False,
                                resources={self.group.host_resource: 1},
                                key=f"shadertune-compile-{uuid.uuid4().hex}")
            h["flight"].append({"future": fut, "start": start, "end": end, "addrs": addrs})
            fut.add_done_callback(lambda _f: self.wake())
