"""Stream-K (knob SK) without a GPU: the schedule (shadertune/backends/cuda/streamk.py)
covers every work unit once with unique partial slots; the kernels' own text of
the schedule, the epilogue's two destinations and the fixup (streamk_loop.cu,
block_range.cu, mma_epilogue.cu, streamk_fixup.cu), compiled for the host with g++
and run one block after another in several orders (any order is a schedule the
GPU may pick: no block waits for another), computes C = alpha A B + beta C; the
space offers SK where it can help and nowhere else; SK = 0 renders the kernels
of before; the SK kernels of every family compile with nvcc for sm_90a without
spills; the driver launches the persistent grid with its workspace and counters.
The GPU tests (test_cuda_gpu.py) run the kernels."""
import itertools
import random
import shutil
import subprocess

import jinja2
import numpy as np
import pytest

import fake_cupy
from shadertune.backends.cuda import codegen, streamk
from shadertune.backends.cuda.device import DEFAULT_LIMITS as L
from shadertune.backends.cuda.space import derive, make_space
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.templates import render
from test_cuda_call_host import _ref, fake_kernel
from test_cuda_codegen import compile_without_spills
from test_host_overhead import cp  # noqa: F401  (fixture: the CuPy stand-in)

SMS = L["num_sms"]
MMA3 = Config(AR=0, BK=16, BM=64, BN=32, DB=1, KG=1, KL=1, KR=0, MMA=3, PAD=4, ST=3, TM=4, TN=4, VEC=1,
              WM=32, WN=16, trans=1, SK=1)
DMMA = Config(BM=64, BN=64, BK=16, TM=2, TN=2, WM=32, WN=32, trans=1, VEC=1, PAD=2, DB=1, ST=3,
              KG=1, KL=1, KR=0, MMA=1, SK=1)
WGMMA = Config(AR=0, BK=32, BM=64, BN=64, DB=1, KG=1, KL=1, KR=0, MMA=4, PAD=4, ST=3, TM=4, TN=4, VEC=1,
               WM=64, WN=32, trans=1, SK=1)


# --- the schedule -----------------------------------------------------------------------

@pytest.mark.parametrize("tiles, kt, G", [(48, 35, 132), (1, 7, 7), (5, 3, 15), (7, 10, 3), (132, 4, 132),
                                          (100, 9, 264), (3, 1, 2), (1000, 69, 264), (12, 5, 60)])
def test_the_schedule_covers_every_unit_once_with_unique_slots(tiles, kt, G):
    W = tiles * kt
    assert G <= W
    seen, slots, per_tile = [], set(), {}
    for b in range(G):
        segs = streamk.segments(b, G, W, kt)
        assert segs, "every block gets work"
        for i, (t, k0, k1) in enumerate(segs):
            assert 0 <= k0 < k1 <= kt and (i == 0 or k0 == 0) and (i == len(segs) - 1 or k1 == kt)
            seen += [t * kt + k for k in range(k0, k1)]
            per_tile.setdefault(t, []).append(b)
            whole = k0 == 0 and k1 == kt
            if not whole:
                s = streamk.slot(b, t, kt, G, W)
                assert s == 2 * b + (i > 0) and s not in slots and s < 2 * G
                slots.add(s)
    assert seen == list(range(W))                      # in order, each once
    for t, blocks in per_tile.items():
        lo, hi = streamk.tile_blocks(t, kt, G, W)
        assert blocks == list(range(lo, hi + 1))
    assert streamk.partial_segments(tiles, kt, G, W) == len(slots) <= streamk.partial_estimate(tiles, kt, G)
    for i in range(W):
        b = streamk.block_of(i, G, W)
        assert streamk.block_units(b, G, W)[0] <= i < streamk.block_units(b, G, W)[1]


def test_grid_workspace_and_index_type():
    assert streamk.grid(48 * 35, 1, SMS) == SMS and streamk.grid(48 * 35, 2, SMS) == 2 * SMS
    assert streamk.grid(20, 2, SMS) == 20                                     # one unit a block at least
    assert streamk.workspace(132, 128, 64) == 2 * 132 * 128 * 64
    assert streamk.index_type(8_000_000) == "unsigned" and streamk.index_type(9_000_000) == "unsigned long long"


# --- the kernels' schedule, epilogue and fixup, run on the host ---------------------------

_HOST = r"""
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>
struct float2 { float x, y; };    struct float4 { float x, y, z, w; };    struct double2 { double x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline double2 make_double2(double a, double b) { return {a, b}; }
#define __shared__ static
inline void __syncthreads() {}
inline void __threadfence() {}
inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; }
template <class X> X __ldcg(const X* p) { return *p; }
using std::min;
struct Dim { unsigned x; };
static Dim blockIdx, gridDim;
typedef {{ T }} T;
constexpr int BM = {{ BM }}, BN = {{ BN }}, KT = {{ KT }}, WM = {{ WM }}, WN = {{ WN }}, FV = 16 / sizeof(T);
typedef {{ "float4" if T == "float" else "double2" }} frag_t;
constexpr int MI = WM / 16, NI = WN / 8, WARPS_N = BN / WN, REAL_THREADS = 32 * (BM / WM) * WARPS_N;
constexpr int THREADS = 1;      // one thread does the block's fixup: the barriers are no-ops here

// One block: the schedule and fixup as the kernels have them; between them, the
// segment's partial sums (as the main loop leaves them in acc) for each of the
// block's threads in turn, stored by the kernels' epilogue.
void block(const T* A, const T* B, T* C, T* W, int* counters, const int M, const int N, const int K,
           const T alpha, const T beta)
{
    const int tid = 0;
{{ loop }}
{{ range }}
    for (int vt = 0; vt < REAL_THREADS; ++vt) {
        const int warp = vt / 32, lane = vt % 32, gid = lane / 4, tig = lane % 4;
        const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
        T acc[MI][NI][4];
        for (int i = 0; i < MI; ++i)
            for (int j = 0; j < NI; ++j)
                for (int q = 0; q < 4; ++q) {
                    const int m = m0 + wm0 + i * 16 + gid + (q >> 1) * 8, n = n0 + wn0 + j * 8 + 2 * tig + (q & 1);
                    double s = 0;
                    for (int k = kbeg; k < kend && m < M && n < N; ++k) s += (double)A[(size_t)m * K + k] * B[(size_t)k * N + n];
                    acc[i][j][q] = (T)s;
                }
{{ epilogue }}
    }
{{ fixup }}
}

int main()
{
    int M, N, K, G, rounds;
    double alpha, beta;
    if (scanf("%d %d %d %d %lf %lf %d", &M, &N, &K, &G, &alpha, &beta, &rounds) != 7) return 2;
    std::vector<T> A((size_t)M * K), B((size_t)K * N), C((size_t)M * N), C0, W((size_t)2 * G * BM * BN, NAN);
    for (auto* v : {&A, &B, &C})
        for (auto& x : *v) { double y; if (scanf("%lf", &y) != 1) return 2; x = (T)y; }
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    std::vector<int> counters(tiles, 0), order(G);
    gridDim.x = G;
    for (int r = 0; r < rounds; ++r) {          // each round a launch, blocks in the order read
        for (auto& b : order) if (scanf("%d", &b) != 1) return 2;
        for (int b : order) { blockIdx.x = b; block(A.data(), B.data(), C.data(), W.data(), counters.data(), M, N, K, (T)alpha, (T)beta); }
        for (int c : counters) if (c != 0) { printf("counter not reset\n"); return 3; }
    }
    for (auto x : C) printf("%.17g\n", (double)x);
    return 0;
}
"""


def _host_program(p: Problem, cfg: Config, tmp) -> str:
    prm = codegen.params_mma(p, cfg)
    d = derive(p, cfg)
    parts = {name: render(f"cuda/{f}", **prm) for name, f in
             (("loop", "streamk_loop.cu"), ("range", "block_range.cu"), ("epilogue", "mma_epilogue.cu"),
              ("fixup", "streamk_fixup.cu"))}
    src = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(_HOST).render(
        T=prm["T"], BM=cfg["BM"], BN=cfg["BN"], KT=d.KT, WM=cfg["WM"], WN=cfg["WN"], **parts)
    exe = tmp / f"sk_{p.M}_{p.N}_{p.K}_{p.dtype}_{cfg['BM']}x{cfg['BN']}"
    (tmp / (exe.name + ".cpp")).write_text(src)
    r = subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(exe), str(tmp / (exe.name + ".cpp"))],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return str(exe)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not on PATH")
@pytest.mark.parametrize("p, cfg, sk", [
    (Problem(130, 70, 200), MMA3, 1),                                    # ragged M, N; float; c_vec
    (Problem(101, 37, 333), MMA3, 2),                                    # odd N: the scalar paths
    (Problem(64, 64, 48, "float64"), DMMA, 1),                           # one tile, more blocks than k tiles
    (Problem(200, 150, 1000, "float64"), DMMA.replace(BM=32, BN=32, WM=16, WN=16), 1),
    (Problem(300, 64, 96), WGMMA, 1),                                    # few units: G = units
])
def test_the_kernels_schedule_and_fixup_compute_the_product(tmp_path, p, cfg, sk):
    cfg = cfg.replace(SK=sk)
    exe = _host_program(p, cfg, tmp_path)
    d = derive(p, cfg)
    tiles, kt, units = streamk.shape(p, cfg["BM"], cfg["BN"], d.KT)
    rng = np.random.default_rng(7)
    A, B, C = (rng.uniform(-1, 1, s) for s in ((p.M, p.K), (p.K, p.N), (p.M, p.N)))
    dt = np.dtype(p.dtype)
    a, b, c = (x.astype(dt).astype(np.float64) for x in (A, B, C))
    for G in sorted({streamk.grid(units, sk, SMS), max(1, units // 3), min(units, tiles + 1), 1}):
        orders = [list(range(G)), list(reversed(range(G))), random.Random(G).sample(range(G), G)]
        alpha, beta = 1.5, -0.5
        text = f"{p.M} {p.N} {p.K} {G} {alpha} {beta} {len(orders)}\n" + "\n".join(
            " ".join(f"{v:.17g}" for v in x.ravel()) for x in (a, b, c)) + "\n" + "\n".join(
            " ".join(map(str, o)) for o in orders) + "\n"
        r = subprocess.run([exe], input=text, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-500:]
        got = np.array([float(x) for x in r.stdout.split()]).reshape(p.M, p.N)
        want = c.copy()
        for _ in orders:                                  # three launches: C = alpha A B + beta C each
            want = (alpha * (a @ b) + beta * want).astype(dt).astype(np.float64)
        tol = 1e-4 if p.dtype == "float32" else 1e-12
        assert np.max(np.abs(got - want)) <= tol * np.max(np.abs(want)), (G, np.max(np.abs(got - want)))


# --- the space, the sources -------------------------------------------------------------------

def test_the_space_offers_stream_k_where_it_can_help():
    p = Problem(700, 900, 1100)                          # 48 tiles of 128 x 128: a third of the SMs
    s = make_space(p, L)
    wg = WGMMA.replace(BM=128, BN=128, WN=128, BK=32, ST=3)
    assert s.why_invalid(wg.replace(AR=1, VEC=4, BK=16)) is None and s.why_invalid(wg.replace(PS=1)) is None
    assert s.why_invalid(wg.replace(PS=1, SK=2)) is not None      # two blocks of 128 x 128 do not fit an SM
    assert s.why_invalid(WGMMA.replace(SK=2, BK=16)) is None      # two of 64 x 64 x 16 do (60 KB)
    for bad in (wg.replace(AR=1, VEC=4, BK=16, KG=2), wg.replace(AR=1, VEC=4, BK=16, KG=4, KR=1)):
        assert "stream-K" in s.why_invalid(bad)                   # not with K_G
    ffma = Config(BM=64, BN=64, BK=16, TM=4, TN=4, WM=32, WN=16, trans=1, VEC=4, PAD=4, DB=1, ST=2, KG=1, KL=1,
                  KR=0, MMA=0)
    assert s.why_invalid(ffma) is None and "stream-K" in s.why_invalid(ffma.replace(SK=1))   # not FFMA
    assert list(make_space(Problem(300, 200, 256, batch=4), L).knobs["SK"]) == [0]       # not batches
    # a grid of whole waves: 132 tiles of 64 x 64 over 132 SMs leave none empty
    even = make_space(Problem(64 * 12, 64 * 11, 512), L)
    assert "stream-K" in even.why_invalid(WGMMA.replace(BN=64, WN=64, SK=1))
    assert even.why_invalid(WGMMA.replace(BN=64, WN=64, SK=0)) is None


def test_stream_k_sources():
    p = Problem(700, 900, 1100)
    for cfg in (MMA3.replace(VEC=4), WGMMA.replace(VEC=1), WGMMA.replace(AR=1, VEC=4), WGMMA.replace(PS=2, VEC=1)):
        src = codegen.source(p, cfg)
        assert "for (sk_t sk_at = sk_begin; sk_at < sk_end; )" in src and "typedef unsigned sk_t;" in src
        assert "const int tid = opaque(threadIdx.x);" in src and "sk_last" in src
        assert ("sk_stage += ntiles;" in src) == bool(cfg.get("PS", 0))
        src0 = codegen.source(p, cfg.replace(SK=0))
        assert "sk_" not in src0 and "opaque" not in src0
    ps = codegen.source(p, WGMMA.replace(PS=1, VEC=1))
    assert "issue(sk_k0 + s, (sk_stage + s) % ST)" in ps and "if (tid == 0 && sk_stage == 0) {" in ps
    d = codegen.source(Problem(1000, 1000, 1000, "float64"), DMMA)
    assert "sk_slot" in d and "mma.sync.aligned.m16n8k" in d


def _sk_sample():
    """SK configs of every tensor-core family: ragged shapes and all four layouts,
    VEC = 1 and wide, both PS chains, the largest tiles near the register cap."""
    out = []
    for (ta, tb), fam in zip(itertools.product((False, True), repeat=2), range(4)):
        p = Problem(301, 203, 517, "float32", ta, tb)
        out.append((p, [MMA3, WGMMA, WGMMA.replace(AR=1), WGMMA.replace(PS=2)][fam]))
        out.append((Problem(301, 203, 517, "float64", ta, tb), DMMA.replace(SK=1 + fam % 2)))
    big = Problem(700, 900, 1100)
    out.append((big, WGMMA.replace(BM=128, BN=128, WN=128, BK=16, VEC=4, AR=1)))
    out.append((big, WGMMA.replace(BM=128, BN=128, WN=128, BK=32, PS=2)))
    out.append((Problem(1000, 1000, 1000, "float64"), DMMA.replace(BM=128, BN=64, WM=64, WN=32, VEC=2, SK=2)))
    out.append((Problem(1000, 1000, 1000, "float64"), DMMA.replace(BM=128, BN=128, WM=64, WN=32, VEC=2)))
    bad = [(q.key, c.key, make_space(q, L).why_invalid(c)) for q, c in out if make_space(q, L).why_invalid(c)]
    assert not bad, bad
    return out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_stream_k_kernels_compile_with_nvcc_without_spills(tmp_path):
    compile_without_spills(_sk_sample(), tmp_path)


# --- the driver -----------------------------------------------------------------------------

@pytest.mark.parametrize("cfg", [MMA3.replace(VEC=4), MMA3.replace(VEC=4, SK=2), WGMMA.replace(PS=1)])
def test_the_driver_launches_the_persistent_grid(cp, rng, cfg):
    p = Problem(130, 72, 1000)
    assert make_space(p, L).why_invalid(cfg) is None
    k = fake_kernel(cp, p, cfg)
    A = rng.uniform(-1, 1, p.stored_shapes[0]).astype("float32")
    B = rng.uniform(-1, 1, p.stored_shapes[1]).astype("float32")
    C0 = rng.uniform(-1, 1, p.out_shape).astype("float32")
    with fake_cupy.recording() as log:
        out = k.run(A, B, C0, alpha=2.0, beta=0.5)
    np.testing.assert_allclose(out, 2 * _ref(p, A, B) + 0.5 * C0, rtol=1e-4, atol=1e-4)
    tiles, kt, units = streamk.shape(p, cfg["BM"], cfg["BN"], derive(p, cfg).KT)
    G = streamk.grid(units, cfg["SK"], SMS)
    launches = [e for e in log if e[0] == "launch"]
    assert [e[1] for e in launches] == (["st_gemm_pack"] if cfg.get("PS", 0) else []) + ["st_gemm"]
    gemm = launches[-1]
    assert gemm[2] == (G, 1, 1)
    w, cnt = gemm[6][3], gemm[6][4]
    ws = k._ws[0]
    packed = sum(k._packed) if cfg.get("PS", 0) else 0
    assert w == ws[0] + 4 * packed and ws[2] >= packed + streamk.workspace(G, cfg["BM"], cfg["BN"])
    assert cnt == k._cnt[0][0] and k._cnt[0][1].size == tiles


def stream_k_jobs(space, ta, tb):
    """Stream-K configs of every tensor-core family on ragged shapes (valid: a
    partial last wave, more work units than blocks), for the GPU tests
    (test_cuda_gpu.py); `space`: a backend's space of a problem."""
    f32 = Problem(301, 203, 517, "float32", ta, tb)
    f64 = Problem(301, 203, 517, "float64", ta, tb)
    mma = Config(AR=0, BK=16, BM=64, BN=32, DB=1, KG=1, KL=1, KR=0, MMA=3, PAD=4, ST=3, TM=4, TN=4, VEC=1,
                 WM=32, WN=16, trans=1, SK=1)
    wg = Config(AR=0, BK=16, BM=64, BN=64, DB=1, KG=1, KL=1, KR=0, MMA=4, PAD=4, ST=3, TM=4, TN=4, VEC=1,
                WM=64, WN=32, trans=1, SK=1)
    dm = Config(BM=64, BN=64, BK=16, TM=2, TN=2, WM=32, WN=32, trans=1, VEC=1, PAD=2, DB=1, ST=3,
                KG=1, KL=1, KR=0, MMA=1, SK=1)
    deep = Problem(301, 203, 1517, "float32", ta, tb)                  # 6 tiles of 128 x 128
    even = Problem(302, 204, 516, "float64", ta, tb)                   # VEC = 2
    jobs = [(f32, mma), (f32, mma.replace(SK=2, ST=4)), (f32, wg), (f32, wg.replace(SK=2)),
            (f32, wg.replace(AR=1)), (f32, wg.replace(PS=1, BK=32)), (f32, wg.replace(PS=2, ST=4, SK=2)),
            (deep, wg.replace(BM=128, BN=128, WN=128, PS=2, BK=32)), (f64, dm), (f64, dm.replace(SK=2, ST=4)),
            (even, dm.replace(BM=128, BN=64, WM=64, WN=32, VEC=2))]
    bad = [(q.key, c.key, space(q).why_invalid(c)) for q, c in jobs if space(q).why_invalid(c)]
    assert not bad, bad
    return jobs


@pytest.mark.parametrize("ta, tb", list(itertools.product((False, True), repeat=2)))
def test_the_gpu_tests_configs_are_valid_and_emulated(ta, tb):
    """The GPU tests' stream-K configs lie in the space (the GPU run would fail on
    them otherwise), and the emulator's stream-K tiles compute A B (its segments
    summed as the fixup sums them) within float32 accuracy of float64."""
    from shadertune.backends.cuda import emulate
    jobs = stream_k_jobs(lambda q: make_space(q, L), ta, tb)
    assert {c["MMA"] for _, c in jobs} == {1, 3, 4} and {c.get("PS", 0) for _, c in jobs} == {0, 1, 2}
    small = Problem(150, 100, 800, "float32", ta, tb)
    emulated = [c for _, c in jobs if c["MMA"] in (3, 4) and make_space(small, L).why_invalid(c) is None]
    assert len(emulated) >= 4
    if (ta, tb) != (False, False):
        return
    rng = np.random.default_rng(5)
    A, B = rng.uniform(-1, 1, (small.M, small.K)).astype("float32"), rng.uniform(-1, 1, (small.K, small.N)).astype("float32")
    ref = A.astype(np.float64) @ B
    kw = emulate.for_config(small, emulated[-1], SMS)
    got = emulate.emulate_3xtf32(A, B, model="exact-rz", **kw)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-6
