"""The express lane's graph means (shadertune/backends/cuda/graphs.py) on the
host-memory stand-in for CuPy: a call key's launches as executable graphs, one
per set of addresses and constants, give the kernels' bits for every kind of
call; a call whose addresses an executable graph holds costs no node update,
one whose addresses changed updates a graph before launching it (so no launch
runs on another call's addresses); a capture, a driver that refuses, a bad
SHADERTUNE_CUDA_LAUNCH. The driver's ctypes marshalling (graphs.Driver) runs
against a libcuda stand-in that reads what it is given as the driver would."""
import ctypes

import numpy as np
import pytest

import fake_cupy
import shadertune
from shadertune.backends.cuda import graphs
from shadertune.core.problem import Problem

from test_cuda_call_host import _ref, fake_kernel
from test_cuda_call_sequence import CASES
from test_cuda_steady import Backend
from test_host_overhead import cp  # noqa: F401  (fixture: the CuPy stand-in)


class FakeLibcuda:
    """The graph entry points of libcuda as graphs.Driver calls them through ctypes
    (handles written to the addresses given, node parameters read from the
    CUDA_KERNEL_NODE_PARAMS at the address given), over fake_cupy.FakeDriver."""

    def __init__(self, drv):
        def out(addr, value):
            ctypes.c_void_p.from_address(addr).value = value
            return 0

        def add(node_out, graph, deps, ndeps, params):
            after = ctypes.c_void_p.from_address(deps).value if ndeps else None
            assert (deps is None) == (ndeps == 0)
            return out(node_out, drv.add_kernel_node(graph, after, params))

        self.cuGraphCreate = lambda g_out, flags: out(g_out, drv.create())
        self.cuGraphAddKernelNode_v2 = add
        self.cuGraphInstantiateWithFlags = lambda e_out, graph, flags: out(e_out, drv.instantiate(graph))
        self.cuGraphExecKernelNodeSetParams_v2 = lambda ex, node, params: drv.set_params(ex, node, params)
        self.cuGraphExecDestroy = lambda ex: drv.destroy_exec(ex) or 0
        self.cuGraphDestroy = lambda g: drv.graphs.pop(g) and 0


@pytest.fixture
def drv(cp, monkeypatch):
    """The graph means on: SHADERTUNE_CUDA_LAUNCH=graphs, graphs.Driver over a libcuda
    stand-in whose graphs the stand-in's runtime.graphLaunch runs."""
    d = fake_cupy.FakeDriver()
    monkeypatch.setattr(fake_cupy, "DRIVER", d)
    monkeypatch.setattr(graphs, "_DRIVER", [graphs.Driver(FakeLibcuda(d))])
    monkeypatch.setenv("SHADERTUNE_CUDA_LAUNCH", "graphs")
    return d


def _operands(cp, rng, p):
    A = rng.uniform(-1, 1, p.stored_shapes[0]).astype(p.dtype)
    B = rng.uniform(-1, 1, p.stored_shapes[1]).astype(p.dtype)
    return A, B, cp.asarray(A), cp.asarray(B)


@pytest.mark.parametrize("p, cfg", CASES)
def test_graphs_give_the_kernels_bits_and_update_only_when_the_addresses_change(cp, rng, drv, p, cfg):
    A, B, dA, dB = _operands(cp, rng, p)
    k = fake_kernel(cp, p, cfg)
    sa, sb = (p.M * p.K, p.K * p.N) if p.batch > 1 else (0, 0)
    go = k.launcher(sa, sb, p.batch, graphs=True)
    assert go.graph is not None and len(go.graph.nodes) == 1 + (go.pack is not None) + (go.reduce is not None)
    st = cp.cuda.get_current_stream()
    want = _ref(p, A, B)
    outs = [cp.empty(p.out_shape, p.dtype) for _ in range(graphs.KEEP + 1)]

    def call(o, alpha=1.0, beta=0.0):
        o[...] = np.nan if beta == 0 else 1.0
        go(dA.data.ptr, dB.data.ptr, o.data.ptr, alpha, beta, st)
        return np.array(o)
    if go.need:
        call(outs[0])                              # the stream's first call: enqueue makes its buffers
        assert drv.instantiated == 0
    before = drv.updates, drv.instantiated
    got = call(outs[0])                            # a miss: an executable graph made and its nodes set
    assert drv.instantiated == before[1] + 1 and drv.updates == before[0] + len(go.graph.nodes)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    via = [c["via"] for f in (k._main, k._reduce, k._pack) if f for c in f.calls[-1:]]
    assert via and set(via) == {"graph"}
    n = drv.updates
    for _ in range(3):                             # the same addresses: launched as it is
        np.testing.assert_array_equal(call(outs[0]), got)
    assert drv.updates == n
    for o in outs[:2] * 3:                         # two results in turn: two graphs kept, no update after
        np.testing.assert_array_equal(call(o), got)
    assert drv.updates == n + len(go.graph.nodes)
    for o in outs * 2:                             # KEEP + 1 in turn: each call updates the oldest
        np.testing.assert_array_equal(call(o), got)
    assert len(go.graph.execs) == graphs.KEEP
    scaled = call(outs[1], 2.0, 0.5)               # other constants: another key
    np.testing.assert_allclose(scaled, 2 * want + 0.5, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(call(outs[1]), got)


def test_a_call_that_needs_enqueue_makes_no_graph(cp, drv):
    p = Problem(40, 24, 40, batch=3)
    k = fake_kernel(cp, p, CASES[4][1])
    assert k.launcher(p.M * p.K, p.K * p.N, 3, graphs=True).graph is not None
    # a workspace above WORKSPACE_KEEP: enqueue allocates per call, no graph
    from shadertune.backends.cuda import driver
    p, cfg = CASES[1]
    k = fake_kernel(cp, p, cfg)
    old = driver.WORKSPACE_KEEP
    driver.WORKSPACE_KEEP = 0
    try:
        go = k.launcher(0, 0, 1, graphs=True)
    finally:
        driver.WORKSPACE_KEEP = old
    assert go.kind == "enqueue" and go.graph is None


def test_matmul_through_graphs_repeats_the_regular_paths_bits(cp, rng, drv, checks):  # noqa: F811
    be = Backend()
    for p, cfg in CASES[:4]:
        A, B, dA, dB = _operands(cp, rng, p)
        dA = dA.T if p.trans_a else dA
        dB = dB.T if p.trans_b else dB
        first = np.array(shadertune.matmul(dA, dB, backend=be, config=cfg.key))
        again = [np.array(shadertune.matmul(dA, dB, backend=be, config=cfg.key)) for _ in range(3)]
        for r in again:
            np.testing.assert_array_equal(r, first)
        assert be.built[-1]._main.calls[-1]["via"] == "graph"
    assert len(checks) == 4


def test_a_call_in_a_capture_takes_enqueues_fresh_buffers_not_a_graph(cp, rng, drv):
    p, cfg = CASES[3]
    A, B, dA, dB = _operands(cp, rng, p)
    k = fake_kernel(cp, p, cfg)
    go = k.launcher(0, 0, 1, graphs=True)
    s = cp.cuda.Stream(non_blocking=True)
    C = cp.empty(p.out_shape, p.dtype)
    with s:
        for _ in range(2):
            go(dA.data.ptr, dB.data.ptr, C.data.ptr, 1.0, 0.0, s)
        made = drv.instantiated
        s.begin_capture()
        with fake_cupy.recording() as log:
            go(dA.data.ptr, dB.data.ptr, C.data.ptr, 1.0, 0.0, s)
        g = s.end_capture()
    assert drv.instantiated == made and [e for e in log if e[0] == "captured"] and k._pinned
    C[...] = np.nan
    g.launch(s)
    np.testing.assert_allclose(np.array(C), _ref(p, A, B), rtol=1e-4, atol=1e-4)


def test_a_driver_that_refuses_gives_the_launches_back_to_kernels(cp, rng, drv, monkeypatch, caplog):
    p, cfg = CASES[1]
    A, B, dA, dB = _operands(cp, rng, p)
    k = fake_kernel(cp, p, cfg)
    go = k.launcher(0, 0, 1, graphs=True)
    st = cp.cuda.get_current_stream()
    C = cp.empty(p.out_shape, p.dtype)
    go(dA.data.ptr, dB.data.ptr, C.data.ptr, 1.0, 0.0, st)
    monkeypatch.setattr(drv, "set_params", lambda *a: 700)        # CUDA_ERROR_ILLEGAL_ADDRESS, say
    C[...] = np.nan
    with caplog.at_level("WARNING", logger="shadertune.cuda"):
        go(dA.data.ptr, dB.data.ptr, C.data.ptr, 1.0, 0.0, st)
    assert go.graph is None and k._main.calls[-1]["via"] == "launchKernel"
    assert "CUDA graphs given up" in caplog.text and "cuGraphExecKernelNodeSetParams" in caplog.text
    np.testing.assert_allclose(np.array(C), _ref(p, A, B), rtol=1e-4, atol=1e-4)
    # no graph entry points at all: kernels from the start
    monkeypatch.setattr(graphs, "_DRIVER", [None])
    assert k.launcher(0, 0, 1, graphs=True).graph is None


def test_the_launch_means_variable_is_checked(cp, monkeypatch):
    monkeypatch.setenv("SHADERTUNE_CUDA_LAUNCH", "graph")
    with pytest.raises(ValueError, match="SHADERTUNE_CUDA_LAUNCH='graph'"):
        graphs.wanted()
    for v, want in (("graphs", True), ("kernels", False), ("", graphs.DEFAULT_MEANS == "graphs")):
        monkeypatch.setenv("SHADERTUNE_CUDA_LAUNCH", v)
        assert graphs.wanted() is want
    monkeypatch.delenv("SHADERTUNE_CUDA_LAUNCH")
    assert graphs.wanted() is (graphs.DEFAULT_MEANS == "graphs")


def test_the_driver_reports_a_failure_by_name():
    class Lib(FakeLibcuda):
        def __init__(self):
            super().__init__(fake_cupy.FakeDriver())
            self.cuGraphCreate = lambda g_out, flags: 2

            def name(rc, out):
                buf = ctypes.c_char_p(b"CUDA_ERROR_OUT_OF_MEMORY")
                ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = buf.value
                return 0
            self.cuGetErrorName = name
    with pytest.raises(graphs.DriverError, match="cuGraphCreate: CUDA_ERROR_OUT_OF_MEMORY"):
        graphs.Driver(Lib()).create()
