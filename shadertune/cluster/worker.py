"""Worker side: each worker process opens its backend once, on its own GPU, and
evaluates configs with the search's own Evaluator, without a store (workers
send Results; the coordinator alone writes the store).

A worker is started with one BackendPlugin per backend it serves (engine.py).
Set up as the worker starts, before it registers with the scheduler, the plugin
opens the backend on the worker's GPU (GL: EGL device_index; CUDA: device id;
a module:Class backend: Class(device_index=gpu)) and offers one unit of the
resource named after (backend, device key, template hash) in the worker's
registration.  Every evaluation asks for one unit of its device's resource, so
it runs only on a worker with that very device and templates, one at a time per
worker: kernels never time side by side on one GPU.  Offered at registration,
not later: a worker restarted after a crash is given the evaluations waiting
for its device as it joins (Dask does not re-place waiting tasks when a joined
worker adds resources, dask/distributed#6677).  A worker whose backend does not
open offers no such resource, gets no work, and reports its error through
worker_status().

All GPU work of a process runs on one thread of its own (gpu_thread): a GL
context is current on the thread that made it, and Dask's task threads are not
guaranteed to be that thread.

Compiling and ranking are host work, timing is GPU work: every worker also
offers one unit of a host resource, and the coordinator's host tasks run on the
worker's second Dask thread, never on its GPU thread: compiling ahead
(compile_task, where the backend's precompile is its own: CUDA's NVRTC in a
process pool), so that one batch compiles on the host's cores while the GPUs
time the last one, and the cost model over a long list of configs (the model
strategy ranking a whole space: host_call_task).  Such hooks must not touch the
device.

Inputs are made on the worker from the search's seed (never shipped): one
Evaluator per (search, problem), the least recently used ones dropped past
KEEP_INPUT_BYTES of inputs and packed operands.  A large list of configs (the
model strategy ranking a whole space) travels as indices into the problem's
enumerated space, which the worker enumerates itself (configs_at).
"""
from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import socket
import sys
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np
from distributed import WorkerPlugin, get_worker

from ..core.cpus import usable_cpus
from ..backends.base import Backend, DeviceInfo
from ..core.children import leave_ctrl_c_to_the_parent
from ..errors import ContextError, ShadertuneError
from ..search.evaluate import Evaluator, _line
from ..search.ranking import children, forget_children
from .engine import GPU_ENV, quick_stream

# constructor keyword that picks the GPU, per backend name
DEVICE_OPTION = {"gl": "device_index", "cuda": "device_id"}


def _make_cuda_device_current(gpu: int) -> None:
    # CUDABackend(device_id) reads that device's limits, but CuPy launches on the calling
    # thread's current device: make it the worker's GPU on the GPU thread
    from ..backends.cuda.device import import_cupy
    import_cupy().cuda.Device(gpu).use()


# what else binds the GPU thread to the worker's GPU, per backend name
BIND_GPU_THREAD = {"cuda": _make_cuda_device_current}
KEEP_INPUT_BYTES = 4 << 30
KEEP_ENUMERATED = 4              # problems whose enumerated space a worker keeps (configs_at)
HOST_CALLS = ("predict_at",)     # backend calls that run beside the GPU thread (host_call_task)

_gpu_thread: ThreadPoolExecutor | None = None


def gpu_thread() -> ThreadPoolExecutor:
    """The one thread of this process that touches its GPU."""
    global _gpu_thread
    if _gpu_thread is None:
        _gpu_thread = ThreadPoolExecutor(1, thread_name_prefix="shadertune-gpu")
    return _gpu_thread


def gpu_index(worker) -> int:
    """$SHADERTUNE_GPU, else the worker's name when it is an integer, else 0."""
    env = os.environ.get(GPU_ENV)
    if env is not None:
        return int(env)
    try:
        return int(worker.name)
    except (TypeError, ValueError):
        return 0


def open_backend(spec: str, gpu: int) -> Backend:
    """The backend named `spec` ('gl', 'cuda' or module:Class) on GPU `gpu`."""
    if ":" in spec:
        import importlib
        mod, cls = spec.split(":", 1)
        try:
            factory = getattr(importlib.import_module(mod), cls)
        except (ImportError, AttributeError) as e:
            raise ShadertuneError(f"cannot load backend {spec!r}: {e}") from None
        return factory(device_index=gpu)
    from ..backends import get_backend
    if spec not in DEVICE_OPTION:
        raise ValueError(f"unknown backend {spec!r}; expected one of {sorted(DEVICE_OPTION)} "
                         f"or module:Class")
    return get_backend(spec, **{DEVICE_OPTION[spec]: gpu})


def _leave_ctrl_c_to_the_parent() -> None:
    """A worker process ignores SIGINT: the process that started the workers (the search
    with --workers, or the worker command) stops and closes them on Ctrl-C.  Only in a
    process a nanny started (a multiprocessing child)."""
    if multiprocessing.parent_process() is not None:
        leave_ctrl_c_to_the_parent()


# How long a thread that wants the interpreter lock waits before the running thread must
# hand it over (CPython's default: 5 ms), in a worker process: its GPU thread works in
# Python (launches, timing, verification) while its event loop thread waits to take the
# next task in and send a result out, and each of a message's steps on the loop may wait
# this long for the lock.  (Set in the workers only, which are shadertune's processes; the
# coordinator may be a user's program.)
SWITCH_INTERVAL = 0.0005


def plugin_name(spec: str) -> str:
    return f"shadertune:{spec}"


def resource_name(spec: str, device_key: str, template_hash: str) -> str:
    """One Dask resource per (backend, device, templates): what an evaluation asks for."""
    digest = hashlib.sha1(f"{spec}\n{device_key}\n{template_hash}".encode()).hexdigest()[:16]
    return f"shadertune-{digest}"


def host_resource_name(resource: str) -> str:
    """The resource a host task asks for: one per worker, on its second thread."""
    return f"{resource}-host"


def compiles_ahead(backend: Backend) -> bool:
    """Whether the backend compiles ahead (its precompile is its own, not the base's
    nothing): only then does the coordinator compile ahead on the hosts."""
    return type(backend).precompile is not Backend.precompile


@dataclass(frozen=True)
class WorkerStatus:
    """What the coordinator learns about one worker for one backend."""
    address: str
    name: str
    gpu: int | None
    serves: bool = True                  # started with this backend's plugin
    backend: str | None = None           # Backend.name (the store's backend column)
    default_strategy: str | None = None  # Backend.default_strategy
    device: DeviceInfo | None = None
    template_hash: str | None = None
    resource: str | None = None          # None: no usable backend; `error` says why
    error: str | None = None
    host: str | None = None              # its machine's name: one compile cache, one set of cores
    pid: int | None = None
    cpus: int | None = None              # cores its process may use
    compiles: bool = False               # its backend compiles ahead (on the host resource)
    compile_scope: str = "host"          # Backend.compile_scope: who can use its compiles
    open_seconds: float | None = None    # how long opening the backend took


class BackendPlugin(WorkerPlugin):
    """Opens backend `spec` once per worker process and evaluates on it (given to the
    worker when it is made: Worker(plugins=...))."""

    def __init__(self, spec: str):
        self.spec = spec
        self.name = plugin_name(spec)
        self.ready = False                   # set up on a worker (the fields below filled)
        self.worker_name = self.address = self.gpu = None
        self.backend: Backend | None = None
        self.backend_name: str | None = None
        self.default_strategy: str | None = None
        self.error: str | None = None
        self.device = self.template_hash = self.resource = None
        self._session = None
        self._evaluators: OrderedDict = OrderedDict()
        self._enumerated: OrderedDict = OrderedDict()    # problem -> space.configs()
        self.compiles = False
        self.open_seconds: float | None = None

    async def setup(self, worker) -> None:
        _leave_ctrl_c_to_the_parent()
        sys.setswitchinterval(SWITCH_INTERVAL)
        quick_stream(worker.batched_stream)          # its results' way to the scheduler
        self.worker_name = str(worker.name)
        self.address = worker.address
        self.gpu = gpu_index(worker)
        await asyncio.get_running_loop().run_in_executor(gpu_thread(), self._open)
        self.ready = True
        if self.resource is not None:
            # the worker has not registered yet: its registration offers these
            for name in (self.resource, host_resource_name(self.resource)):
                worker.state.total_resources[name] = 1
                worker.state.available_resources[name] = 1

    async def teardown(self, worker) -> None:
        await asyncio.get_running_loop().run_in_executor(gpu_thread(), self._close)

    def _open(self) -> None:
        t0 = time.perf_counter()
        try:
            if self.spec in BIND_GPU_THREAD:
                BIND_GPU_THREAD[self.spec](self.gpu)
            backend = open_backend(self.spec, self.gpu)
            device = backend.device()
            template_hash = backend.template_hash()
            # a worker is a tuning worker for its whole life: the backend holds what a
            # search holds (GL: the larger texture pool) until the worker closes
            session = backend.search_session()
            session.__enter__()
        except Exception as e:           # reported by the coordinator; the worker gets no work
            self.error = _line(e, typed=not isinstance(e, ContextError))
            return
        self.backend, self.backend_name, self.device, self.template_hash, self._session = \
            backend, backend.name, device, template_hash, session
        self.default_strategy = backend.default_strategy
        self.resource = resource_name(self.spec, device.key, template_hash)
        self.compiles = compiles_ahead(backend)
        self.open_seconds = time.perf_counter() - t0

    def _close(self) -> None:
        self._evaluators.clear()
        self._enumerated.clear()
        if self._session is not None:
            self._session.__exit__(None, None, None)
            self._session = None

    def status(self) -> WorkerStatus:
        return WorkerStatus(self.address, self.worker_name, self.gpu, True, self.backend_name,
                            self.default_strategy, self.device, self.template_hash,
                            self.resource if self.backend else None, self.error,
                            host=socket.gethostname(), pid=os.getpid(), cpus=usable_cpus(),
                            compiles=bool(self.backend) and self.compiles,
                            compile_scope=self.backend.compile_scope if self.backend else "host",
                            open_seconds=self.open_seconds)

    # --- on the GPU thread ----------------------------------------------------
    def _lost(self, e: ContextError) -> dict:
        """The GPU context failed: every later task here fails at once with this reason."""
        self.error = _line(e)
        self.backend = None
        self._evaluators.clear()
        self._enumerated.clear()
        return self._lost_reply()

    def _lost_reply(self) -> dict:
        return {"context_error": self.error, "worker": self.worker_name, "address": self.address}

    def evaluate(self, search: str, problem, config, options: dict, best_ms: float | None) -> dict:
        """One config measured by the local Evaluator (no store here), racing against
        `best_ms` (the best median so far of this search on this device, kept by the
        coordinator); the Result goes back with the seconds its measurement took."""
        if self.backend is None:
            return self._lost_reply()
        try:
            ev = self._evaluator(search, problem, options)
            ev.set_best(best_ms)
            before = dict(ev.stage_seconds)
            t0 = time.perf_counter()
            r = ev.measure(config)
            seconds = time.perf_counter() - t0
        except ContextError as e:
            return self._lost(e)
        stages = {k: v - before.get(k, 0.0) for k, v in ev.stage_seconds.items()}
        return {"result": r, "seconds": seconds, "worker": self.worker_name,
                "address": self.address, "stage_seconds": stages}

    def call(self, method: str, problem, *args) -> dict:
        """backend.space / default_config / candidates / predict_ms / source / precompile
        for the coordinator (RemoteBackend): {"value": ...}, or the lost-context reply;
        any other error of the backend is raised (the coordinator gets it as it is)."""
        if self.backend is None:
            return self._lost_reply()
        b = self.backend
        fn = {"space": b.space, "default_config": b.default_config, "candidates": b.candidates,
              "predict_ms": b.predict_ms, "source": b.source, "precompile": b.precompile,
              "predict_at": self._predict_at,
              "host_predictor": lambda _problem: b.host_predictor()}[method]
        try:
            return {"value": fn(problem, *args)}
        except ContextError as e:
            return self._lost(e)

    def _predict_at(self, problem, where):
        """predict_ms of the configs at `where` (see configs_at), as a float array: in
        the worker's ranking process where the backend offers a host predictor (the
        enumeration and the model hold the interpreter lock for seconds on a large
        space, and the GPU thread's evaluations would wait for it), else here."""
        predictor = self.backend.host_predictor()
        if predictor is not None:
            import cloudpickle         # Dask's own pickler: spaces hold their rules' closures
            payload = cloudpickle.dumps((predictor, self.backend.space(problem), problem, where,
                                         self.worker_name))
            try:
                return children().submit(predict_at_in_child, payload).result()
            except BrokenProcessPool:  # the child died (memory?): once more, here
                forget_children()
        pred = self.backend.predict_ms(problem, self.configs_at(problem, where))
        return None if pred is None else np.asarray(pred, dtype=np.float64)

    def configs_at(self, problem, where) -> list:
        """The configs that `where` names in this worker's enumeration (configs_at)."""
        return configs_at(self._enumerated, self.backend.space(problem), problem, where,
                          self.worker_name)

    def precompile(self, problem, configs) -> dict:
        """Compile `configs` ahead on this host's cores (not on the GPU thread: the
        backend's precompile must not touch the device).  Never fails: a config that
        does not compile says so when it is evaluated."""
        t0 = time.perf_counter()
        backend = self.backend
        if backend is None:
            return {"seconds": 0.0, "error": self.error}
        try:
            backend.precompile(problem, configs)
            error = None
        except Exception as e:
            error = _line(e, typed=True)
        return {"seconds": time.perf_counter() - t0, "error": error}

    def _evaluator(self, search: str, problem, options: dict) -> Evaluator:
        key = (search, problem)
        ev = self._evaluators.pop(key, None)
        if ev is None:
            ev = Evaluator(self.backend, problem, store=None, **options)
        self._evaluators[key] = ev            # most recently used last
        while len(self._evaluators) > 1 and sum(map(_held_bytes, self._evaluators.values())) \
                > KEEP_INPUT_BYTES:
            self._evaluators.popitem(last=False)
        return ev


def _held_bytes(ev: Evaluator) -> int:
    """Inputs (made at an Evaluator's first measurement) and packed operands it holds."""
    made = ev.__dict__.get("_inputs")
    inputs = 0 if made is None else sum(a.nbytes for a in made[:3])
    return inputs + ev.operands.bytes


# --- tasks (run in a Dask task thread; the work hops to the GPU thread) ---------

def _plugin(spec: str) -> BackendPlugin:
    return get_worker().plugins[plugin_name(spec)]


def evaluate_task(spec: str, search: str, problem, config, options: dict, best_ms):
    t0 = time.perf_counter()
    p = _plugin(spec)
    out = gpu_thread().submit(p.evaluate, search, problem, config, options, best_ms).result()
    t1 = time.perf_counter()
    out["task_seconds"] = t1 - t0      # this worker's share of the round trip
    # on this worker's clock: the coordinator measures the worker's idle time between
    # its evaluations (the cluster's cost to the GPU, dispatch and return included)
    out["span"] = (t0, t1)
    return out


def compile_task(spec: str, problem, configs):
    """Runs on the task thread it is given (the host resource's), not the GPU thread."""
    return _plugin(spec).precompile(problem, configs)


def host_call_task(spec: str, method: str, problem, *args):
    """A backend call that is host work (HOST_CALLS), on the host resource's thread."""
    if method not in HOST_CALLS:
        raise ValueError(f"{method!r} is not host work")
    return _plugin(spec).call(method, problem, *args)


def configs_at(enumerated: OrderedDict, space, problem, where, worker_name) -> list:
    """The configs that `where` = (size, indices, samples) names in this process's
    enumeration of the problem's `space` (the coordinator's copy of the space
    enumerates alike: same code, same device limits), the enumeration kept in
    `enumerated` for KEEP_ENUMERATED problems.  samples, (index, key) pairs, check
    that; a space that enumerates differently here is an error, never a wrong list."""
    size, indices, samples = where
    configs = enumerated.pop(problem, None)
    if configs is None:
        configs = space.configs()
    enumerated[problem] = configs
    while len(enumerated) > KEEP_ENUMERATED:
        enumerated.popitem(last=False)
    if len(configs) != size or any(configs[i].key != key for i, key in samples):
        raise ShadertuneError(f"the space of {problem.key} enumerates differently on worker "
                              f"{worker_name} ({len(configs)} configs, the coordinator's "
                              f"{size})")
    return [configs[i] for i in indices]


# A ranking in one of the search layer's children (search.ranking.children: spawned,
# not forked, as the worker holds a GPU context), each keeping its own enumerations.
_child_enumerated: OrderedDict = OrderedDict()     # in a child: problem -> configs


def predict_at_in_child(payload: bytes):
    import cloudpickle
    predictor, space, problem, where, worker_name = cloudpickle.loads(payload)
    pred = predictor(problem, configs_at(_child_enumerated, space, problem, where, worker_name))
    return None if pred is None else np.asarray(pred, dtype=np.float64)


def call_task(spec: str, method: str, problem, *args):
    p = _plugin(spec)
    return gpu_thread().submit(p.call, method, problem, *args).result()


def worker_status(spec: str, dask_worker=None) -> WorkerStatus:
    """For client.run: this worker's status for backend `spec`."""
    p = dask_worker.plugins.get(plugin_name(spec))
    if p is None or not p.ready:
        return WorkerStatus(dask_worker.address, str(dask_worker.name), None, serves=False,
                            error=f"not started to serve backend {spec!r}")
    return p.status()
