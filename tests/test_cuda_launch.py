"""The CUDA driver's launches through prebuilt parameter arrays
(backends/cuda/launch.py) on the host-memory stand-in for CuPy
(tests/fake_cupy.py, whose driver.launchKernel reads the arguments back from
the void* array by the kernel's CUDA signature): the byte layout of each
signature, that it is the rendered kernels' own, the K_G workspace kept per
stream, the RawKernel call where the binding is missing, and launches from
two threads at once. The GPU tests (test_cuda_gpu*.py) compare the two paths
on the device."""
import ctypes
import re
import struct
import sys
import threading

import numpy as np
import pytest

import fake_cupy
from shadertune.backends.cuda import codegen, driver
from shadertune.backends.cuda.launch import PACK_SIGNATURE, KernelLaunch, gemm_signature, reduce_signature
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from test_cuda_call_host import FFMA, _ref, close, fake_kernel


@pytest.fixture
def cp(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    fake_cupy._STACK[:] = [fake_cupy._NULL]
    return fake_cupy


DMMA = Config(BM=32, BN=32, BK=16, TM=2, TN=2, WM=16, WN=16, trans=1, VEC=1, PAD=2, DB=1, ST=3,
              KG=8, KL=1, KR=0, MMA=1)
MMA3 = Config(AR=0, BK=32, BM=32, BN=64, DB=1, KG=4, KL=1, KR=1, MMA=3, PAD=4, ST=3, TM=4, TN=4, VEC=4,
              WM=16, WN=16, trans=1)
WGMMA = Config(AR=1, BK=32, BM=64, BN=32, DB=1, KG=4, KL=1, KR=1, MMA=4, PAD=4, ST=4, TM=4, TN=4, VEC=4,
               WM=64, WN=32, trans=1)      # the default config of 256^3 float32


# --- the parameter array -----------------------------------------------------------

_PACK = {"P": "<Q", "i": "<i", "q": "<q", "f": "<f", "d": "<d"}


def slot_bytes(address: int, signature: str) -> list[bytes]:
    """The bytes each void* of the array at `address` points at, as wide as its type."""
    slots = (ctypes.c_void_p * len(signature)).from_address(address)
    return [ctypes.string_at(s, struct.calcsize(_PACK[c])) for c, s in zip(signature, slots)]


class Recorder:
    """A compiled function with a loaded handle; launchKernel's calls recorded
    with the bytes of every parameter as the device would read them."""

    def __init__(self):
        self.kernel = type("Function", (), {"ptr": 0x1234})()
        self.raw_calls = []

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        self.raw_calls.append((grid, block, args, shared_mem, stream))


@pytest.mark.parametrize("problem, kind, expect", [
    (Problem(64, 32, 48), "gemm", "PPPPPiiiiff"),
    (Problem(64, 32, 48, "float64"), "gemm", "PPPPPiiiidd"),
    (Problem(64, 32, 48, batch=5), "gemm", "PPPPPiiiiffqq"),
    (Problem(64, 32, 48, "float64", batch=5), "gemm", "PPPPPiiiiddqq"),
    (Problem(64, 32, 48), "reduce", "PPqff"),
    (Problem(64, 32, 48, "float64", batch=2), "reduce", "PPqdd"),
])
def test_parameter_bytes_of_each_signature(cp, monkeypatch, problem, kind, expect):
    """What launchKernel receives: one void* per parameter, each at a value of
    the parameter's CUDA type (little-endian: 8-byte pointers, 32-bit int,
    64-bit long long, float or double), the addresses rewritten each launch."""
    sig = gemm_signature(problem) if kind == "gemm" else reduce_signature(problem)
    assert sig == expect
    seen = []
    monkeypatch.setattr(cp.cuda.driver, "launchKernel",
                        lambda f, gx, gy, gz, bx, by, bz, smem, st, params, extra:
                        seen.append(((f, gx, gy, gz, bx, by, bz, smem, st, extra), slot_bytes(params, sig))))
    fn = Recorder()
    k = KernelLaunch(cp, fn, sig, (128,), 4096)
    assert k.fast and k.naddr == sig.count("P") and k.block == (128, 1, 1)
    big = 2 ** 40 + 12345                       # wider than 32 bits: an int64, not an int
    naddr = k.naddr
    values = {"gemm": (problem.M, problem.N, problem.K, 7, 1.5, -0.25) + ((big, 0) if problem.batch > 1 else ()),
              "reduce": (3 * 2 ** 31 + 1, 1.5, -0.25)}[kind]
    s = cp.cuda.Stream()
    for addrs in [tuple(0x7f0000000000 + 256 * i for i in range(naddr)), tuple(range(1, naddr + 1))]:
        k.launch((3, 4, 5), s, addrs, values)
        (call, got) = seen[-1]
        assert call == (0x1234, 3, 4, 5, 128, 1, 1, 4096, s.ptr, 0)
        want = [struct.pack(_PACK[c], v) for c, v in zip(sig, addrs + values)]
        assert got == want
    assert fn.raw_calls == []


def _parameter_codes(source: str, name: str) -> str:
    """A kernel's parameter list in the rendered source, as launch.py's codes."""
    T = re.search(r"typedef (float|double) T;", source).group(1)
    params = re.search(rf"\b{name}\(([^)]*)\)", source).group(1)
    out = ""
    for prm in params.split(","):
        words = prm.replace("*", " * ").split()
        words = [w for w in words[:-1] if w not in ("const", "__restrict__")]
        if "*" in words:
            out += "P"
        else:
            out += {"int": "i", "long long": "q", "float": "f", "double": "d"}[" ".join(words).replace("T", T)]
    return out


@pytest.mark.parametrize("cfg, dtype", [(FFMA, "float32"), (FFMA.replace(TM=2, TN=2, VEC=2, PAD=2), "float64"),
                                        (DMMA, "float64"), (MMA3, "float32"), (WGMMA, "float32")])
@pytest.mark.parametrize("batch", [1, 3])
def test_signatures_are_the_rendered_kernels(cfg, dtype, batch):
    """gemm_signature / reduce_signature against the parameter lists of the
    generated source (shaders/cuda/signature.cu, splitk_reduce.cu) of each
    template, one product and a batch, with the separate K_G reduction."""
    p = Problem(64, 64, 256, dtype, batch=batch)
    src = codegen.source(p, cfg.replace(KG=4, KR=0))
    assert _parameter_codes(src, "st_gemm") == gemm_signature(p)
    assert _parameter_codes(src, "st_gemm_reduce") == reduce_signature(p)



def test_presplit_signatures_are_the_rendered_kernels():
    """The pre-split kernels (PS > 0): the GEMM's parameters as every
    template's, the pack kernel's PACK_SIGNATURE."""
    p = Problem(300, 200, 256)
    src = codegen.source(p, WGMMA.replace(VEC=1, AR=0, PS=2, KG=1, KR=0))
    assert _parameter_codes(src, "st_gemm") == gemm_signature(p)
    assert _parameter_codes(src, "st_gemm_pack") == PACK_SIGNATURE


# --- the driver's launches ---------------------------------------------------------

def _kernel_and_inputs(cp, rng, p, cfg):
    k = fake_kernel(cp, p, cfg)
    A = rng.uniform(-1, 1, p.stored_shapes[0]).astype(p.dtype)
    B = rng.uniform(-1, 1, p.stored_shapes[1]).astype(p.dtype)
    return k, A, B


@pytest.mark.parametrize("p, cfg", [
    (Problem(45, 37, 3001, "float64", False, True), DMMA),                      # K_G with the reduce kernel
    (Problem(45, 37, 3001, "float64", False, True), DMMA.replace(KR=1)),        # in-launch reduction
    (Problem(45, 37, 3001, "float64", False, True, batch=3), DMMA),             # batched, two strides
    (Problem(40, 24, 40, batch=4), FFMA),                                       # one launch of a batch
    (Problem(40, 24, 40), FFMA),
])
def test_the_parameter_path_passes_what_the_rawkernel_call_did(cp, rng, monkeypatch, p, cfg):
    """The same launches, arguments (values and types, as read back by the
    stand-in) and results through launchKernel as through the RawKernel call,
    for changing alpha and beta."""
    k, A, B = _kernel_and_inputs(cp, rng, p, cfg)
    C0 = rng.uniform(-1, 1, p.out_shape).astype(p.dtype)
    monkeypatch.delattr(cp.cuda.driver, "launchKernel")
    old, *_ = _kernel_and_inputs(cp, rng, p, cfg)
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    assert k._launch_main.fast and not old._launch_main.fast
    tol = 1e-10 if p.dtype == "float64" else 1e-4
    for alpha, beta in [(1.0, 0.0), (1.5, -2.0), (1.5, -2.0), (-1, 0.5)]:
        outs = [kk.run(A, B, C0 if beta else None, alpha=alpha, beta=beta) for kk in (k, old)]
        np.testing.assert_array_equal(outs[0], outs[1])
        close(outs[0], alpha * _ref(p, A, B) + (beta * C0 if beta else 0), tol)
    for new_fn, old_fn in [(k._main, old._main), (k._reduce, old._reduce)]:
        if new_fn is None:
            continue
        assert {c["via"] for c in new_fn.calls} == {"launchKernel"} and {c["via"] for c in old_fn.calls} == {"RawKernel"}
        assert len(new_fn.calls) == len(old_fn.calls)
        for n, o in zip(new_fn.calls, old_fn.calls):
            assert tuple(n["grid"]) == tuple(o["grid"]) + (1,) * (3 - len(o["grid"]))
            assert n["block"] == tuple(o["block"]) + (1,) * (3 - len(o["block"]))
            assert n["shared_mem"] == o["shared_mem"]
            # addresses differ (each kernel's own C, W); scalars equal in value and type
            nv = [type(a) for a in n["args"]]
            assert nv == [type(a) for a in o["args"]]
            scal = [i for i, t in enumerate(nv) if t is not int]
            assert [n["args"][i] for i in scal] == [o["args"][i] for i in scal]


@pytest.mark.parametrize("cfg", [DMMA, DMMA.replace(KR=1)])
def test_the_workspace_is_kept_per_stream(cp, rng, monkeypatch, cfg):
    """One K_G workspace per stream, reused by every call queued on it (launches
    on one stream run in order) and never shared by two streams; above
    WORKSPACE_KEEP one from the pool per call, kept alive until its launches
    are queued (the stand-in checks that W is live memory at each launch)."""
    p = Problem(45, 37, 3001, "float64", False, True)
    k, A, B = _kernel_and_inputs(cp, rng, p, cfg)
    dA, dB = cp.asarray(A), cp.asarray(B)
    out = cp.empty(p.out_shape, np.float64)

    def w_of_last():
        return k._main.calls[-1]["args"][3]

    def go(stream=None):
        k.enqueue(dA.data.ptr, dB.data.ptr, out.data.ptr, 0, 0, 1, 1.0, 0.0, stream=stream)
        close(out, _ref(p, A, B), 1e-10)
        return w_of_last()

    w0 = go()
    assert go() == w0 and go(cp.cuda.get_current_stream()) == w0
    assert w0 == k._ws[0][0] and k._ws[0][2] == 8 * 45 * 37
    s1, s2 = cp.cuda.Stream(), cp.cuda.Stream()
    w1 = go(s1)
    w2 = go(s2)
    assert len({w0, w1, w2}) == 3 and go(s1) == w1 and go(s2) == w2 and go() == w0
    assert [c["stream"] for c in k._main.calls[-3:]] == [s1.ptr, s2.ptr, 0]
    if not cfg["KR"]:
        assert [c["args"][0] for c in k._reduce.calls[-3:]] == [w1, w2, w0]
    # more streams than kept: the oldest is dropped
    monkeypatch.setattr(driver, "WORKSPACE_STREAMS", 3)
    s3 = cp.cuda.Stream()
    go(s3)
    assert list(k._ws) == [s1.ptr, s2.ptr, s3.ptr]
    # above the size kept: allocated per call and not kept
    monkeypatch.setattr(driver, "WORKSPACE_KEEP", 8 * 45 * 37 * 8 - 1)
    s4 = cp.cuda.Stream()
    go(s4)
    go(s4)
    assert s4.ptr not in k._ws and list(k._ws) == [s1.ptr, s2.ptr, s3.ptr]
    k.release()
    assert k._ws == {}


def test_a_batch_needs_a_larger_workspace_than_kept(cp, rng):
    """A batched kernel given a longer batch than before replaces its stream's
    workspace with a larger one."""
    p = Problem(45, 37, 3001, "float64", False, True, batch=3)
    k, A, B = _kernel_and_inputs(cp, rng, p, DMMA)
    dA, dB = cp.asarray(A), cp.asarray(B)
    out = cp.empty(p.out_shape, np.float64)
    sa, sb = 45 * 3001, 37 * 3001
    k.enqueue(dA.data.ptr, dB.data.ptr, out.data.ptr, sa, sb, 1, 1.0, 0.0)
    assert k._ws[0][2] == 8 * 45 * 37
    k.enqueue(dA.data.ptr, dB.data.ptr, out.data.ptr, sa, sb, 3, 1.0, 0.0)
    assert k._ws[0][2] == 3 * 8 * 45 * 37
    close(out, _ref(p, A, B), 1e-10)


def test_the_rawkernel_call_where_the_binding_is_missing(cp, rng, monkeypatch):
    """No driver.launchKernel (an older or another CuPy), a function without a
    loaded handle, or a launch on another device than the function's: the
    RawKernel call, with numpy scalars of the parameters' types."""
    p = Problem(45, 37, 3001, "float64", False, True, batch=3)
    monkeypatch.delattr(cp.cuda.driver, "launchKernel")
    k, A, B = _kernel_and_inputs(cp, rng, p, DMMA)
    assert not k._launch_main.fast and not k._launch_reduce.fast
    close(k.run(A, B, alpha=2.0), 2 * _ref(p, A, B), 1e-10)
    main, red = k._main.calls[-1], k._reduce.calls[-1]
    assert main["via"] == red["via"] == "RawKernel"
    assert [type(a) for a in main["args"][5:]] == [np.int32] * 4 + [np.float64] * 2 + [np.int64] * 2
    assert [type(a) for a in red["args"][2:]] == [np.int64, np.float64, np.float64]
    assert main["args"][11:] == (45 * 3001, 37 * 3001) and red["args"][2] == 3 * 45 * 37
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)

    k, A, B = _kernel_and_inputs(cp, rng, Problem(40, 24, 40), FFMA)
    k._main.kernel = None                                # a function not loaded (no handle)
    k._launch_constants()
    assert not k._launch_main.fast
    close(k.run(A, B), _ref(k.problem, A, B), 1e-4)
    assert k._main.calls[-1]["via"] == "RawKernel"

    current = [0]                                        # the current device
    monkeypatch.setattr(cp.cuda.runtime, "getDevice", staticmethod(lambda: current[0]))
    k, A, B = _kernel_and_inputs(cp, rng, Problem(40, 24, 40), FFMA)
    assert k._launch_main.fast
    close(k.run(A, B), _ref(k.problem, A, B), 1e-4)
    assert k._main.calls[-1]["via"] == "launchKernel"
    current[0] = 1
    close(k.run(A, B), _ref(k.problem, A, B), 1e-4)
    assert k._main.calls[-1]["via"] == "RawKernel"


def test_wrong_argument_counts_are_refused(cp):
    for fast in (True, False):
        k = KernelLaunch(cp, Recorder(), "PPqff", (256, 2))
        if not fast:
            k.use_rawkernel()
        with pytest.raises(ValueError):
            k.launch((1, 1, 1), None, (1, 2, 3), (4, 1.0, 0.0))
        with pytest.raises(ValueError):
            k.launch((1, 1, 1), None, (1, 2), (4, 1.0))
    with pytest.raises(ValueError, match="unknown parameter code"):
        KernelLaunch(cp, Recorder(), "PPx", (1,))


def test_two_threads_launching_one_kernel_keep_their_arguments(cp, rng, monkeypatch):
    """Two threads in enqueue() of one kernel at once (no lock: api.kernel's
    kernels may be used so): each launch reaches the driver with its own
    thread's addresses and scalars. The stand-in's launchKernel waits until
    both threads are inside it before it reads the parameters, so a buffer
    shared by the threads would show the other thread's values."""
    barrier = threading.Barrier(2, timeout=10)
    real = fake_cupy.launchKernel
    seen = {}

    def launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        barrier.wait()
        fn = fake_cupy._FUNCTIONS[f]
        sig = fn.signature()
        got = [fake_cupy._READ[c](s) for c, s in zip(sig, (ctypes.c_void_p * len(sig)).from_address(params))]
        seen.setdefault(threading.get_ident(), []).append((fn.reduce, got))
        barrier.wait()
        return real(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra)

    monkeypatch.setattr(cp.cuda.driver, "launchKernel", launch_kernel)
    p = Problem(45, 37, 3001, "float64", False, True)
    k, A, B = _kernel_and_inputs(cp, rng, p, DMMA)
    dA, dB = cp.asarray(A), cp.asarray(B)
    outs = [cp.empty(p.out_shape, np.float64) for _ in range(2)]
    streams = [cp.cuda.Stream(), cp.cuda.Stream()]
    errors, sent = [], {}

    def worker(i):
        try:
            alpha = (1.0, -3.0)[i]
            sent[threading.get_ident()] = (outs[i].data.ptr, alpha)
            for _ in range(3):
                k.enqueue(dA.data.ptr, dB.data.ptr, outs[i].data.ptr, 0, 0, 1, alpha, 0.0, stream=streams[i])
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(seen) == 2
    for ident, launches in seen.items():
        c_ptr, alpha = sent[ident]
        assert len(launches) == 6                      # 3 calls x (main, reduce)
        for reduce, got in launches:
            if reduce:
                assert got[1] == c_ptr and got[3] == alpha
            else:
                assert got[2] == c_ptr and got[9] == alpha and got[0] == dA.data.ptr
    for i, o in enumerate(outs):
        close(o, (1.0, -3.0)[i] * _ref(p, A, B), 1e-10)


def test_constants_that_do_not_fit_are_refused_and_not_kept(cp, monkeypatch):
    """An int beyond 32 bits for an int parameter raises (ctypes would wrap it,
    as the RawKernel call's np.int32 refuses it); the launch after it writes
    the constants again."""
    seen = []
    monkeypatch.setattr(cp.cuda.driver, "launchKernel",
                        lambda *a: seen.append(slot_bytes(a[9], "PPPPPiiiiff")))
    k = KernelLaunch(cp, Recorder(), "PPPPPiiiiff", (128,))
    good = (64, 32, 48, 7, 1.0, 0.0)
    k.launch((1, 1, 1), None, (1, 2, 3, 4, 5), good)
    with pytest.raises(OverflowError):
        k.launch((1, 1, 1), None, (1, 2, 3, 4, 5), (64, 2 ** 31, 48, 7, 2.0, 0.0))
    k.launch((1, 1, 1), None, (1, 2, 3, 4, 5), good)       # the same tuple as before the failure
    assert len(seen) == 2 and seen[1] == seen[0]
    assert seen[1][6] == struct.pack("<i", 32)
