"""A call key's launches as executable CUDA graphs (the express lane's graph means).

One cuLaunchKernel costs the host several microseconds (5-7 us a launch on the
H100 host through CuPy's launchKernel, bench-cuda-call), a graph launch of the
same kernels about 2 us whatever their number. So the express lane may keep,
per call key (driver.SteadyLaunch), a graph of its launches (a chain: the pack,
then the GEMM, then the reduce kernel) and launch that instead:

    g = GraphLaunch(driver, bound_launches, cupy.cuda.runtime.graphLaunch)
    ...write this call's addresses and constants into the BoundLaunches' arrays...
    g.launch(key, stream_ptr)        # key: everything those arrays now hold

A kernel node's parameters are copied into the executable graph when it is
made or updated (cuGraphExecKernelNodeSetParams), and a launch runs what the
graph held then; updates after it do not touch launches already queued
(CUDA's rule for executable graphs), so an update never races a queued launch.
A call key's arguments change between calls (a fresh result each call, the
caller's operands, the stream's workspace): GraphLaunch keeps up to KEEP
executable graphs, each for one key (the addresses and constants its nodes
hold); a call whose key one of them holds launches it as it is (no driver call
but the launch), any other updates the least recently used one's nodes, then
launches it. A loop that drops each result before the next call is given the
same block by the caching allocator, and one that keeps the last result
alternates between two: both hit.

Launches of one executable graph are ordered after each other whatever the
stream (CUDA's rule), which is safe and costs two keys on two streams some
concurrency.

The driver's graph entry points come from libcuda through ctypes (CuPy wraps
graph launch but not node updates): Driver below; `driver()` is None where
libcuda cannot be loaded or lacks them, and the lane then launches kernels as
before.  Where the stream captures a graph, the lane does not use these (a
captured call takes enqueue's fresh buffers, capture.py).
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

KEEP = 4       # executable graphs a GraphLaunch keeps (keys: addresses and constants)
# How the express lane launches a key's kernels: "kernels" (cuLaunchKernel per
# kernel, parameter arrays of the key's own) or "graphs" (this module). Graphs are
# the default: a graph launch costs a few us of host time whatever the number of
# kernels, which puts a cached call's host cost below torch.matmul's on Hopper
# (BENCHMARKS.md); where the driver refuses graphs the key launches as kernels.
MEANS_VARIABLE = "SHADERTUNE_CUDA_LAUNCH"
MEANS = ("kernels", "graphs")
DEFAULT_MEANS = "graphs"


def wanted() -> bool:
    """Whether a call key learned now launches through graphs: $SHADERTUNE_CUDA_LAUNCH
    ('graphs', the default, or 'kernels'); read when a key is learned, not per call."""
    v = os.environ.get(MEANS_VARIABLE) or DEFAULT_MEANS
    if v not in MEANS:
        raise ValueError(f"{MEANS_VARIABLE}={v!r}: the express lane's launch means is 'kernels' or 'graphs'")
    return v == "graphs"


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h); its first ten fields are _v1's, so
    the same structure serves the unversioned entry points of older drivers."""
    _fields_ = [("func", ctypes.c_void_p), ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint),
                ("blockDimZ", ctypes.c_uint), ("sharedMemBytes", ctypes.c_uint),
                ("kernelParams", ctypes.c_void_p), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


class DriverError(RuntimeError):
    """A graph entry point of the driver failed (its CUresult's name in the message)."""


class Driver:
    """The graph entry points of libcuda (a ctypes.CDLL or a stand-in with the same
    names): graphs built node by node, instantiated, their kernel nodes updated."""

    def __init__(self, lib):
        def entry(names, argtypes):
            for name in names:
                f = getattr(lib, name, None)
                if f is not None:
                    f.restype = ctypes.c_int
                    f.argtypes = argtypes
                    return f
            raise AttributeError(f"libcuda has none of {', '.join(names)}")
        P, U = ctypes.c_void_p, ctypes.c_uint
        self.lib = lib
        self._create = entry(["cuGraphCreate"], [P, U])
        self._add = entry(["cuGraphAddKernelNode_v2", "cuGraphAddKernelNode"], [P, P, P, ctypes.c_size_t, P])
        self._instantiate = entry(["cuGraphInstantiateWithFlags"], [P, P, ctypes.c_ulonglong])
        self.set_params = entry(["cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams"], [P, P, P])
        self._destroy_exec = entry(["cuGraphExecDestroy"], [P])
        self._destroy = entry(["cuGraphDestroy"], [P])
        self._name = getattr(lib, "cuGetErrorName", None)

    def check(self, rc: int, what: str) -> None:
        if rc:
            name = ctypes.c_char_p()
            if self._name is not None and not self._name(rc, ctypes.byref(name)) and name.value:
                raise DriverError(f"{what}: {name.value.decode()} ({rc})")
            raise DriverError(f"{what}: CUresult {rc}")

    def create(self) -> int:
        g = ctypes.c_void_p()
        self.check(self._create(ctypes.addressof(g), 0), "cuGraphCreate")
        return g.value

    def add_kernel_node(self, graph: int, after: int | None, params: KernelNodeParams) -> int:
        node = ctypes.c_void_p()
        dep = ctypes.c_void_p(after or 0)
        self.check(self._add(ctypes.addressof(node), graph, ctypes.addressof(dep) if after else None,
                             1 if after else 0, ctypes.addressof(params)), "cuGraphAddKernelNode")
        return node.value

    def instantiate(self, graph: int) -> int:
        e = ctypes.c_void_p()
        self.check(self._instantiate(ctypes.addressof(e), graph, 0), "cuGraphInstantiateWithFlags")
        return e.value

    def destroy_exec(self, e: int) -> None:
        self._destroy_exec(e)

    def destroy(self, graph: int, execs) -> None:
        for e in execs:
            self._destroy_exec(e)
        self._destroy(graph)


_DRIVER: list = []      # [Driver or None], looked up once
_lock = threading.Lock()


def driver() -> Driver | None:
    """libcuda's graph entry points, or None where they cannot be had (no libcuda
    by that name, a driver without them)."""
    if not _DRIVER:
        with _lock:
            if not _DRIVER:
                try:
                    lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
                    _DRIVER.append(Driver(lib))
                except (OSError, AttributeError):
                    _DRIVER.append(None)
    return _DRIVER[0]


def node_params(bound) -> KernelNodeParams:
    """A kernel node's parameters for a launch.BoundLaunch: its function, grid,
    block and shared memory, and its parameter array (whose values the driver
    copies when the node is made or updated)."""
    f, gx, gy, gz, bx, by, bz, smem = bound.head
    return KernelNodeParams(f, gx, gy, gz, bx, by, bz, smem, bound.p.address, None, None, None)


class GraphLaunch:
    """The launches of `bound` (launch.BoundLaunch objects, run in this order, each
    after the one before) as executable graphs, one per key (see the module).
    `graph_launch(exec, stream_ptr)` launches an executable graph (CuPy's
    runtime.graphLaunch). The BoundLaunches' parameter arrays must hold the
    values `key` names when launch() is called; the owner (SteadyLaunch) writes
    them on a miss only (`hit(key)` says whether it must)."""

    __slots__ = ("drv", "bound", "params", "graph", "nodes", "execs", "last_key", "last_exec", "graph_launch",
                 "__weakref__")

    def __init__(self, drv: Driver, bound, graph_launch):
        self.drv, self.bound, self.graph_launch = drv, tuple(bound), graph_launch
        # the structures point at the BoundLaunches' arrays: kept as long as the graph is
        self.params = tuple(node_params(b) for b in self.bound)
        self.execs: dict = {}           # key -> executable graph, least recently used first
        self.last_key = self.last_exec = None
        self.graph = drv.create()
        try:
            nodes, after = [], None
            for prm in self.params:
                after = drv.add_kernel_node(self.graph, after, prm)
                nodes.append(after)
            self.nodes = tuple(nodes)
        except BaseException:
            drv.destroy(self.graph, ())
            raise

    def hit(self, key) -> bool:
        return key == self.last_key or key in self.execs

    def launch(self, key, stream_ptr: int) -> None:
        """Launch the graph whose nodes hold `key`'s values: the last one, a kept
        one, or the least recently used one updated (a new one while fewer than
        KEEP are kept) from the BoundLaunches' arrays."""
        if key == self.last_key:
            self.graph_launch(self.last_exec, stream_ptr)
            return
        ex = self.execs.pop(key, None)
        if ex is None:
            if len(self.execs) < KEEP:
                ex = self.drv.instantiate(self.graph)
            else:
                old = next(iter(self.execs))
                ex = self.execs.pop(old)
            if self.last_exec == ex:         # (a key being replaced)
                self.last_key = self.last_exec = None
            try:
                for node, prm in zip(self.nodes, self.params):
                    self.drv.check(self.drv.set_params(ex, node, ctypes.addressof(prm)),
                                   "cuGraphExecKernelNodeSetParams")
            except BaseException:            # half updated: never launched
                self.drv.destroy_exec(ex)
                raise
        self.execs[key] = ex            # the most recently used last
        self.last_key, self.last_exec = key, ex
        self.graph_launch(ex, stream_ptr)

    def close(self) -> None:
        """Destroy the graphs (an executable graph still running is freed when done:
        CUDA's rule); nothing may launch this afterwards."""
        execs, self.execs = list(self.execs.values()), {}
        self.last_key = self.last_exec = None
        graph, self.graph = self.graph, None
        if graph is not None:
            self.drv.destroy(graph, execs)

    def __del__(self):
        try:
            self.close()
        except Exception:        # noqa: BLE001 (interpreter shutdown: the driver may be gone)
            pass
