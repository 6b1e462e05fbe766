"""CUDA backend without a GPU: space, codegen, and nvcc + ptxas on a sample
of valid configs (sm_90; skipped only where nvcc is missing)."""
import itertools
import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from shadertune.backends.cuda import codegen, dmma
from shadertune.backends.cuda.compiler import arch_for
from shadertune.backends.cuda.device import DEFAULT_LIMITS
from shadertune.backends.cuda.space import PHASES, derive, make_space
from shadertune.backends.cuda.tuning import candidates
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.space import Space

L = DEFAULT_LIMITS
BIG = Config(BM=128, BN=128, BK=8, TM=8, TN=8, WM=32, WN=64, trans=1, VEC=4, PAD=4, DB=1, KG=1, KL=1, KR=0)
MMA = Config(BM=128, BN=128, BK=32, TM=4, TN=4, WM=64, WN=32, trans=1, VEC=4, PAD=4, DB=1, ST=3,
             KG=1, KL=1, KR=0, MMA=3)
WGMMA = Config(BM=128, BN=128, BK=16, TM=4, TN=4, WM=64, WN=128, trans=1, VEC=4, PAD=4, DB=1, ST=3,
               KG=1, KL=1, KR=0, MMA=4)
DMMA = Config(BM=128, BN=128, BK=16, TM=2, TN=2, WM=64, WN=32, trans=1, VEC=2, PAD=2, DB=1, ST=3,
              KG=1, KL=1, KR=0, MMA=1)


def test_space_is_a_space_with_a_phase_plan():
    s = make_space(Problem(4096, 4096, 4096), L)
    assert isinstance(s, Space)
    assert s.phases == PHASES
    assert BIG in s
    assert 1000 < len(s) < 60000          # pruned, but rich (55,041 with stream-K, 47,351 before it)


def _filtered_product(s):
    pts = (Config(dict(zip(s.knobs, v))) for v in itertools.product(*s.knobs.values()))
    return {c for c in pts if s.why_invalid(c) is None}


@pytest.mark.parametrize("p, kinds", [(Problem(16, 16, 33, "float64", True, False), {0, 1}),   # FFMA and DMMA
                                      (Problem(16, 16, 40, "float64", False, True, batch=3), {0, 1})])
def test_enumeration_equals_filtered_product_of_a_tiny_problem(p, kinds):
    s = make_space(p, L)
    got = s.configs()
    assert len(got) == len(set(got)) and set(got) == _filtered_product(s) and got
    assert {c["MMA"] for c in got} == kinds


# Narrowed domains (two values a knob at most, some fixed) that exercise every rule:
# both dtypes, all transposes, split-K, the four kernels, batches, other architectures.
_FP32 = dict(BM=(32, 128), BN=(64, 128), BK=(8, 32), TM=(4, 8), TN=(4, 8), WM=(32, 64), WN=(32, 64),
             trans=(0, 1), VEC=(1, 4), PAD=(0, 4), DB=(0, 1), ST=(0, 2), KG=(1,), KL=(1, 2), KR=(0,), MMA=(0,))
_NARROWED = [
    (Problem(300, 200, 100), L, _FP32),                                     # FFMA: tiles, pipeline, K_L
    (Problem(300, 200, 104, "float32", True, True), L,                      # tensor cores, TT
     dict(_FP32, BM=(64, 256), BN=(128, 256), WM=(16, 64), WN=(32, 128), BK=(16, 32), ST=(0, 3),
          VEC=(2, 4), KL=(1, 2), trans=(1, 0), PAD=(4, 0), TM=(4, 8), TN=(4,), MMA=(3, 4))),
    (Problem(2560, 16, 2560, "float32", False, True), L,                    # split-K, both reductions
     dict(_FP32, BM=(64, 256), BN=(16,), WM=(32, 64), WN=(8, 16), TN=(4,), BK=(8,), PAD=(4,), trans=(1, 0),
          KG=(1, 32), KL=(1, 4), KR=(0, 1), MMA=(0, 3))),
    (Problem(131, 70, 999, "float64", True, False), L,                      # float64, ragged M, K
     dict(BM=(32, 256), BN=(32,), BK=(8, 32), TM=(2, 4), TN=(2, 8), WM=(16, 32), WN=(16, 32),
          trans=(0, 1), VEC=(1, 2), PAD=(2,), DB=(0, 1), ST=(0, 4), KG=(1, 4), KL=(1,), KR=(0, 1), MMA=(0,))),
    (Problem(64, 64, 4095), L, dict(_FP32, BM=(64,), BN=(64,), ST=(0,), PAD=(4,), trans=(1,))),   # K odd
    (Problem(64, 64, 4096, "float32", True, False), dict(L, arch="sm_80", num_sms=108, max_smem_per_block_optin=163 * 1024),
     dict(_FP32, BM=(32, 64), BN=(32, 64), WM=(32, 64), WN=(16, 32), BK=(16, 32), KG=(1, 16), KL=(1,), KR=(0, 1),
          ST=(3, 4), MMA=(0, 4), TM=(4,), TN=(4,), DB=(1,))),
    (Problem(64, 64, 256, "float32", False, False), dict(L, arch="sm_75", max_smem_per_block_optin=64 * 1024),
     dict(_FP32, BM=(64,), BN=(64,), KG=(1,), MMA=(0, 3), ST=(0, 3))),
    (Problem(200, 136, 512, "float64", False, True), L,                    # DMMA beside the FFMA DGEMM
     dict(BM=(32, 128), BN=(64, 128), BK=(8, 16), TM=(2, 4), TN=(2,), WM=(16, 64), WN=(16, 32),
          trans=(1, 0), VEC=(1, 2), PAD=(2,), DB=(1,), ST=(0, 3), KG=(1, 8), KL=(1,), KR=(0,), MMA=(0, 1))),
    (Problem(200, 136, 512, "float64", True, False), dict(L, arch="sm_80", num_sms=108),   # no DMMA before sm_90
     dict(BM=(64,), BN=(64,), BK=(16,), TM=(2,), TN=(2,), WM=(16, 32), WN=(16, 32), trans=(1,),
          VEC=(2,), PAD=(2,), DB=(1,), ST=(3,), KG=(1,), KL=(1,), KR=(0,), MMA=(0, 1))),
    (Problem(100, 64, 96, "float32", batch=40), L,                          # a batch of FFMA and mma.sync
     dict(_FP32, BM=(32, 128), BN=(64,), KG=(1, 2), KL=(1,), KR=(0, 1), ST=(0, 3), MMA=(0, 3), TN=(4,))),
    (Problem(64, 64, 1024, "float64", True, True, batch=2), L,              # a batch of DMMA, split-K
     dict(BM=(64,), BN=(64,), BK=(16, 32), TM=(2,), TN=(2,), WM=(16, 32), WN=(16, 32), trans=(1,),
          VEC=(1, 2), PAD=(2,), DB=(1,), ST=(2, 4), KG=(1, 16), KL=(1,), KR=(0, 1), MMA=(1,))),
    (Problem(200, 150, 64, "float64"), L,                                   # tiles of 96: DMMA's alone
     dict(BM=(64, 96), BN=(64, 96), BK=(16,), TM=(2,), TN=(2,), WM=(32, 48), WN=(32, 48), trans=(1,),
          VEC=(2,), PAD=(2,), DB=(1,), ST=(0, 3), KG=(1,), KL=(1,), KR=(0,), MMA=(0, 1))),
]


@pytest.mark.slow
def test_enumeration_equals_filtered_product_on_narrowed_domains():
    """The depth-first enumeration (each rule checked once the knobs it reads are
    bound) yields exactly the product filtered by every rule, and every rule
    rejects something in these cases: no rule is left untested."""
    from shadertune.search.restrict import narrow
    rejected = {}
    for p, lim, fixed in _NARROWED:
        sub = narrow(make_space(p, lim), fixed)
        got = sub.configs()
        valid = set()
        for v in itertools.product(*sub.knobs.values()):
            c = dict(zip(sub.knobs, v))
            merged = {**sub.constants, **c}
            if len(rejected) < len(sub._rules) or not all(rejected.values()):
                # every rule's verdict, until each rule has rejected something
                verdicts = [_passes(rule, c, merged) for rule in sub._rules]
                for rule, ok in zip(sub._rules, verdicts):
                    rejected[rule.source.__name__] = rejected.get(rule.source.__name__, 0) + (not ok)
                ok = all(verdicts)
            else:
                ok = all(_passes(rule, c, merged) for rule in sub._rules)
            if ok:
                valid.add(Config(c))
        assert len(got) == len(set(got)) and set(got) == valid, p.key
    assert len(rejected) == 19 and all(rejected.values()), rejected


def _passes(rule, cfg, merged):
    """The rule's verdict on `cfg` (`merged`: the space's constants and cfg)."""
    try:
        return bool(rule.call(cfg)) if rule.takes_mapping else rule.check_values(merged)
    except ZeroDivisionError:        # (a rule that cannot be evaluated rejects)
        return False


def test_enumeration_time():
    """Timing targets (printed, not asserted): 4096^3 in about 4 s before the
    generic depth-first enumeration (and 256^3 in 42 s)."""
    import time
    for p in (Problem(4096, 4096, 4096), Problem(2560, 16, 2560)):
        t0, c0 = time.perf_counter(), time.process_time()
        n = len(make_space(p, L).configs())
        print(f"enumeration {p.key}: {n} configs in {time.perf_counter() - t0:.2f} s "
              f"({time.process_time() - c0:.2f} s CPU)")


@pytest.mark.parametrize("change, reason", [
    (dict(WM=64), "warp"),                            # 8 x 8 lanes != 32
    (dict(BM=256, BN=256, TM=4, TN=4, WM=16, WN=32), "threads"),   # 2048 threads
    (dict(KG=4), "split-K"),                          # 4096^2 grid fills the GPU
    (dict(BK=32, BM=256, BN=256, TM=16, TN=16, WM=64, WN=128), "registers"),
])
def test_restrictions_reject(change, reason):
    s = make_space(Problem(4096, 4096, 4096), L)
    why = s.why_invalid(BIG.replace(**change))
    assert why is not None, reason


def test_vector_width_needs_aligned_rows():
    s = make_space(Problem(4096, 4096, 4095), L)     # K odd: A's rows are not float4-aligned
    assert {c["VEC"] for c in s} == {1}
    assert "aligned rows" in s.why_invalid(BIG) and "aligned rows" in s.why_invalid(BIG.replace(VEC=2))
    assert s.why_invalid(BIG.replace(VEC=1)) is None


def test_shared_memory_limit_comes_from_the_device():
    p = Problem(4096, 4096, 4096)
    cfg = BIG.replace(BK=32, BM=256, TM=16, WM=64)
    assert derive(p, cfg).smem_bytes > 48 * 1024
    assert cfg in make_space(p, L)
    assert cfg not in make_space(p, dict(L, max_smem_per_block_optin=48 * 1024))


@pytest.mark.parametrize("p", [Problem(4096, 4096, 4096), Problem(2560, 16, 2560, trans_a=True),
                               Problem(32, 32, 60000, trans_b=True), Problem(7, 5, 3, "float64", True, True)])
def test_candidates_are_valid_and_split_skinny_shapes(p):
    s = make_space(p, L)
    cands = candidates(p, s, L, 12)
    assert cands and all(c in s for c in cands)
    if p.M * p.N <= 2560 * 16 and p.K >= 1024:
        assert any(c["KG"] * c["KL"] > 1 for c in cands)


def test_source_reflects_config_and_problem():
    p = Problem(300, 200, 100)
    src = codegen.source(p, BIG.replace(VEC=1))
    assert "__launch_bounds__(THREADS)" in src and "constexpr int BM = 128" in src
    assert "st_gemm_reduce" not in src
    split = codegen.source(p, BIG.replace(VEC=1, KG=4))
    assert "st_gemm_reduce" in split and "W + (size_t)blockIdx.z" in split
    srcs = {codegen.source(Problem(300, 200, 100, "float32", ta, tb), BIG.replace(VEC=1))
            for ta in (False, True) for tb in (False, True)}
    assert len(srcs) == 4
    assert "typedef double T;" in codegen.source(Problem(300, 200, 100, "float64"), BIG.replace(VEC=1, TM=4, TN=4, WM=16, WN=32, PAD=2))


@pytest.mark.parametrize("K, KG, itemsize", [(60000, 256, 4), (60000, 128, 4), (3001, 32, 8), (100, 4, 4), (64, 8, 4)])
def test_k_splits_are_balanced_and_cover_k(K, KG, itemsize):
    """The kernel's split ranges (kbeg, kend per blockIdx.z, same integer
    formula as the template) tile [0, K), none empty, starts on the grain."""
    p = Problem(32, 32, K, "float32" if itemsize == 4 else "float64", False, True)
    d = derive(p, BIG.replace(KG=KG))
    g, u = d.kgran, d.k_units
    rng = [(min(K, g * (z * u // KG)), min(K, g * ((z + 1) * u // KG))) for z in range(KG)]
    assert rng[0][0] == 0 and rng[-1][1] == K
    assert all(a[1] == b[0] for a, b in zip(rng, rng[1:]))
    assert all(e > b for b, e in rng) and all(b % g == 0 for b, _ in rng)
    assert max(e - b for b, e in rng) <= d.k_chunk <= -(-K // KG) + g


def test_icas_finest_splits_are_valid():
    p = Problem(32, 32, 60000, trans_b=True)
    s = make_space(p, L)
    assert 256 in s.knobs["KG"] and any(c["KG"] == 256 for c in candidates(p, s, L, 16))
    cfg = Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=256, KL=4, KR=0)
    assert cfg in s and cfg.replace(KR=1) in s


def test_in_launch_reduction_knob():
    p = Problem(32, 32, 60000, trans_b=True)
    s = make_space(p, L)
    assert s.knobs["KR"] == (0, 1)
    cfg = Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=64, KL=8, KR=1)
    assert cfg in s
    assert s.why_invalid(cfg.replace(KG=1, KL=1)) is not None      # KR needs KG > 1
    src = codegen.source(p, cfg)
    assert "atomicAdd" in src and "__ldcg" in src and "st_gemm_reduce" not in src
    assert "if (kslice > 0) return;" not in src                     # all threads reach the barriers
    two = codegen.source(p, cfg.replace(KR=0))
    assert "st_gemm_reduce" in two and "atomicAdd" not in two
    # both reductions in the candidate list of a split problem
    cands = candidates(p, s, L, 16)
    assert {0, 1} <= {c["KR"] for c in cands if c["KG"] > 1}


@pytest.mark.parametrize("p, cfg", [
    (Problem(32, 32, 60000, trans_b=True), Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=128, KL=8, KR=0)),
    (Problem(300, 200, 100, trans_a=True), BIG.replace(VEC=4, trans=0)),
    (Problem(300, 200, 100, "float64", False, True), BIG.replace(VEC=2, BK=16, BM=64, BN=64, TM=4, TN=4, WM=16, WN=32, PAD=2)),
    (Problem(300, 200, 100), BIG),
])
def test_load_layout_is_a_bijection(p, cfg):
    """The load index -> (row, vector) map of each operand covers the stored
    block tile once; transposing stores get 32-byte groups (16+ rows a warp)."""
    assert cfg in make_space(p, L)
    d = derive(p, cfg)
    ra, pa, rb, pb = codegen.load_layout(p, cfg, d)
    for R, P, loads in ((ra, pa, d.loads_a), (rb, pb, d.loads_b)):
        n = loads * d.threads
        cells = {((i // P) % R, i % P + i // (P * R) * P) for i in range(n)}
        assert len(cells) == n and n % R == 0
        assert max(c for _, c in cells) == n // R - 1
    if p.trans_b:
        assert pb * cfg["VEC"] * p.itemsize == 32


def _sample():
    """Valid configs: both precisions, all four transposes, split-K on,
    single/double buffering, cp.async pipelines, both A layouts, the three
    kernels; deterministic."""
    rng = random.Random(4)
    out = []
    combos = itertools.product(("float32", "float64"), (False, True), (False, True))
    for i, (dtype, ta, tb) in enumerate(combos):
        p = Problem(2560, 64, 4096, dtype, ta, tb)
        s = make_space(p, L)
        cands = candidates(p, s, L, 48)
        split = [c.replace(DB=0, ST=0, trans=tr, PAD=0) for c in cands if c["KG"] > 1 and c["KL"] > 1
                 for tr in (int(not ta), int(ta))]
        split = [c for c in split if c in s]
        out.append((p, cands[0] if i % 2 else rng.choice(split)))
    ica = Problem(32, 32, 60000, trans_b=True)      # finest split, both K_G reductions
    ica_cfg = Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=256, KL=4, KR=0)
    out += [(ica, ica_cfg), (ica, ica_cfg.replace(KR=1, KL=8, KG=128))]
    odd = Problem(37, 45, 3001, "float64", True, False)   # in-launch reduction, ragged N (scalar path)
    out.append((odd, next(c for c in candidates(odd, make_space(odd, L), L, 48) if c["KR"] == 1)))
    big = Problem(4096, 4096, 4096)
    out.append((big, BIG))
    out.append((big, BIG.replace(BM=128, BN=256, TN=16, WN=128, BK=16)))
    # cp.async pipelines: B only (NN), both (TN, split), A only (TT, fp64 ragged; NT with trans = 0)
    out.append((big, BIG.replace(BM=128, BN=256, TM=16, WM=64, WN=64, BK=32, ST=3)))
    tn = Problem(2560, 16, 2560, trans_a=True)
    out.append((tn, next(c for c in candidates(tn, make_space(tn, L), L, 32) if c["ST"] and c["KL"] > 1)))
    tt = Problem(301, 203, 517, "float64", True, True)
    out.append((tt, next(c for c in candidates(tt, make_space(tt, L), L, 32) if c["ST"])))
    nt = Problem(1000, 600, 700, trans_b=True)
    out.append((nt, BIG.replace(trans=0, ST=2)))
    # the tensor-core kernel: every layout, ragged and VEC = 1, both K_G reductions, the widest warp tile
    for (ta, tb), kg, kr in zip(itertools.product((False, True), repeat=2), (1, 8, 16, 1), (0, 0, 1, 0)):
        p = Problem(301, 203, 4100 if kg > 1 else 517, "float32", ta, tb)
        out.append((p, MMA.replace(BM=64, BN=32, WM=32, WN=16, BK=16, VEC=1, KG=kg, KR=kr)))
    out.append((big, MMA.replace(ST=4)))
    assert all(cfg in make_space(p, L) for p, cfg in out[-5:])
    # the wgmma kernel: every layout, ragged and VEC = 1, both K_G reductions,
    # the widest warpgroup tile (WN = 128) and four warpgroups (128 registers each)
    for (ta, tb), kg, kr in zip(itertools.product((False, True), repeat=2), (1, 8, 16, 1), (0, 0, 1, 0)):
        p = Problem(301, 203, 4100 if kg > 1 else 517, "float32", ta, tb)
        out.append((p, WGMMA.replace(BM=64, BN=64, WN=32, BK=32, VEC=1, KG=kg, KR=kr)))
    out.append((big, WGMMA.replace(ST=4)))
    out.append((big, WGMMA.replace(WN=64)))
    out.append((Problem(256, 256, 60000, "float32", False, True), WGMMA.replace(KG=32)))
    assert all(cfg in make_space(p, L) for p, cfg in out[-7:])
    # A from registers (AR = 1): both k-depths at the widest tile (BK = 32 takes
    # ~250 registers), A transposed (padded rows), ragged and VEC = 1, split-K
    out.append((big, WGMMA.replace(AR=1)))
    out.append((big, WGMMA.replace(AR=1, BK=32)))
    out.append((Problem(4096, 4096, 4096, "float32", True, True), WGMMA.replace(AR=1, ST=4)))
    out.append((Problem(301, 203, 4100, "float32", True, False), WGMMA.replace(AR=1, BM=64, BN=64, WN=32, BK=32, VEC=1, KG=8, KR=1)))
    # narrow N tiles (N rounded up to 8): wgmma with both A sources, mma.sync;
    # a stage whose copies do not divide among the threads (80 x 16 / 4 over 256)
    odd = Problem(3000, 77, 5000)
    out.append((odd, WGMMA.replace(BM=64, BN=80, WN=80, BK=32, VEC=1, KG=4)))
    out.append((odd, WGMMA.replace(BM=128, BN=80, WN=80, BK=32, VEC=1, KG=8, KR=1, AR=1)))
    out.append((odd, MMA.replace(BM=64, BN=80, WM=16, WN=80, BK=8, VEC=1, KG=4)))
    out.append((Problem(1000, 80, 1000), WGMMA.replace(BN=80, WN=80, AR=1)))
    assert all(cfg in make_space(p, L) for p, cfg in out[-8:]), [(p.key, cfg, make_space(p, L).why_invalid(cfg)) for p, cfg in out[-8:]]
    # pre-split operands (PS = 1, 2): every layout ragged, the widest tile at
    # both k-depths, a narrow-N tile
    for (ta, tb), ps in zip(itertools.product((False, True), repeat=2), (1, 2, 1, 2)):
        out.append((Problem(301, 203, 517, "float32", ta, tb), WGMMA.replace(BM=64, BN=64, WN=32, BK=32, VEC=1, PS=ps)))
    out += [(big, WGMMA.replace(VEC=1, PS=ps, BK=bk, ST=st)) for ps in (1, 2) for bk, st in ((16, 4), (32, 3))]
    out.append((odd, WGMMA.replace(BN=80, WN=80, BK=32, VEC=1, PS=2)))
    assert all(cfg in make_space(p, L) for p, cfg in out[-9:]), [(p.key, cfg, make_space(p, L).why_invalid(cfg)) for p, cfg in out[-9:]]
    # the FP64 tensor-core kernel: every layout, ragged and VEC = 1, both K_G
    # reductions, m16n8k16 (128 threads: cuBLAS's 128 x 64 tile) and m16n8k4 (256 threads)
    for (ta, tb), kg, kr in zip(itertools.product((False, True), repeat=2), (1, 8, 16, 1), (0, 0, 1, 0)):
        p = Problem(301, 203, 4100 if kg > 1 else 517, "float64", ta, tb)
        out.append((p, DMMA.replace(BM=64, BN=64, WM=32, WN=32, VEC=1, KG=kg, KR=kr)))
    dbig = Problem(4096, 4096, 4096, "float64")
    out.append((dbig, DMMA))
    out.append((dbig, DMMA.replace(BN=64)))
    # batched problems: one product index and moved base pointers per kernel kind, split-K with both reductions
    out.append((Problem(100, 64, 256, "float32", batch=7), MMA.replace(BM=64, BN=32, WM=32, WN=16, BK=16)))
    out.append((Problem(45, 37, 3001, "float32", batch=3),
                Config(BM=64, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=1, PAD=4, DB=1, ST=0, KG=8, KL=2, KR=0)))
    out.append((Problem(100, 64, 2048, "float64", False, True, batch=5), DMMA.replace(BM=64, BN=64, WM=32, WN=32, KG=4, KR=1)))
    assert all(cfg in make_space(p, L) for p, cfg in out[-9:]), [(p.key, cfg) for p, cfg in out[-9:] if cfg not in make_space(p, L)]
    return out


def _nvcc(job, tmp):
    i, (p, cfg) = job
    cu = tmp / f"k{i}.cu"
    src = codegen.source(p, cfg)
    cu.write_text(src)
    arch = arch_for(src, "sm_90")     # wgmma: sm_90a
    r = subprocess.run(["nvcc", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-cubin", "-Xptxas", "-v", "-o", str(tmp / f"k{i}.cubin"), str(cu)],
                       capture_output=True, text=True)
    return p, cfg, r


def compile_without_spills(jobs, tmp):
    """nvcc + ptxas -v on every (problem, config) of jobs (4 at a time): each
    compiles, spills nothing, keeps its wgmmas pipelined (no C7514) and uses no
    more registers than a block of its threads may."""
    with ThreadPoolExecutor(max_workers=4) as ex:
        results = list(ex.map(lambda j: _nvcc(j, tmp), enumerate(jobs)))
    for p, cfg, r in results:
        log = r.stdout + r.stderr
        assert r.returncode == 0, f"{p.key} {cfg.key}\n{log}"
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        assert spills and all(s == ("0", "0") for s in spills), f"{p.key} {cfg.key} spills:\n{log}"
        assert "C7514" not in log, f"{p.key} {cfg.key}: ptxas serialized the wgmmas\n{log}"
        regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
        d = derive(p, cfg)
        assert max(regs) <= min(255, 65536 // d.threads), (p.key, cfg.key, regs)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_sample_compiles_with_nvcc_without_spills(tmp_path):
    compile_without_spills(_sample(), tmp_path)


# Measured DeepBench winners (N = 16 and N = 64; their history: notes/cuda.md)
DEEPBENCH_N16 = Config(BM=128, BN=16, BK=16, TM=4, TN=8, WM=64, WN=16, trans=1, VEC=4, PAD=4, DB=1, KG=32, KL=1, KR=0)
DEEPBENCH_N64 = Config(BM=128, BN=64, BK=16, TM=8, TN=8, WM=32, WN=64, trans=1, VEC=4, PAD=4, DB=1, KG=16, KL=1, KR=0)


@pytest.mark.parametrize("p, cfg, grouped", [
    (Problem(2560, 64, 2560), DEEPBENCH_N64, (False, False)),                  # KT = 16 rows: plain
    (Problem(2560, 64, 2560, trans_a=True), DEEPBENCH_N64, (False, False)),
    (Problem(2560, 16, 2560), DEEPBENCH_N16, (False, False)),
    (Problem(32, 32, 60000, trans_b=True),                                # KT = 256 rows: grouped
     Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=128, KL=8, KR=0), (True, True)),
])
def test_plain_load_map_is_written_plainly(p, cfg, grouped):
    """Where P is a whole row the load map is emitted as r = idx / P (the
    grouped formula with P = a row is the same map, but its extra per-load
    registers made ptxas sink the prefetch loads below the FMAs)."""
    assert cfg in make_space(p, L)
    src = codegen.source(p, cfg)
    d = derive(p, cfg)
    ra, pa, rb, pb = codegen.load_layout(p, cfg, d)
    for X, (R, P, loads), g in zip("AB", ((ra, pa, d.loads_a), (rb, pb, d.loads_b)), grouped):
        assert (R * P < loads * d.threads) == g
        plain = f"const int r = idx / P{X}, c = (idx % P{X}) * VEC;"
        assert (plain not in src) == g and ((f"% R{X}, c =" in src) == g)
        if not g:   # the plain statement is the same map
            n = loads * d.threads
            assert [(i // P, i % P) for i in range(n)] == [((i // P) % R, i % P + i // (P * R) * P) for i in range(n)]


def test_split_bounds_divide_by_a_constant():
    """kbeg/kend: no run-time (64-bit) division by gridDim.z; 32-bit products
    where k_units * KG fits, and the same ranges as the 64-bit formula."""
    src = codegen.source(Problem(2560, 16, 2560), DEEPBENCH_N16)
    assert "/ gridDim.z" not in src and "(unsigned)blockIdx.z * k_units / KG" in src
    assert "constexpr int KGRAN = 8, KG = 32;" in src
    huge = Problem(32, 32, 2 ** 27, trans_b=True)                       # k_units * KG = 2^24 * 256
    cfg = Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=256, KL=1, KR=0)
    assert "(unsigned long long)blockIdx.z * k_units / KG" in codegen.source(huge, cfg)
    for K, KG in ((2560, 32), (60000, 256), (3001, 4)):
        u = -(-K // 8)
        assert u * KG < 2 ** 32
        assert [(z * u) % 2 ** 32 // KG for z in range(KG + 1)] == [z * u // KG for z in range(KG + 1)]


@pytest.mark.parametrize("M, N, KG, rx_rz", [
    (2560, 16, 32, (256, 1)),      # DeepBench: one thread per element, all 32 partials
    (2560, 64, 16, (256, 1)),
    (300, 130, 8, (256, 1)),       # ragged: 39000 elements
    (128, 128, 8, (128, 2)),
    (203, 75, 4, (64, 4)),         # ragged: 15225 elements
    (32, 32, 128, (32, 8)),        # ICA: 8 lanes of z
    (32, 32, 2, (128, 2)),
])
def test_reduce_kernel_shape(M, N, KG, rx_rz):
    p = Problem(M, N, 4096)
    cfg = BIG.replace(KG=KG)
    assert codegen.reduce_shape(p, cfg) == rx_rz
    src = codegen.source(p, cfg)
    rx, rz = rx_rz
    assert f"constexpr int RX = {rx}, RZ = {rz};" in src
    assert ("__shared__ T part[RZ][RX];" in src) == (rz > 1)


def _sass_tool():
    import glob
    import os
    import sys
    found = shutil.which("cuobjdump")
    if found:
        return found
    for root in sys.path:   # the nvidia-cuda-cuobjdump wheel
        hits = glob.glob(os.path.join(root, "nvidia", "cu*", "bin", "cuobjdump"))
        if hits:
            return hits[0]
    return None


@pytest.mark.skipif(shutil.which("nvcc") is None or _sass_tool() is None, reason="needs nvcc and cuobjdump")
@pytest.mark.parametrize("ta", [False, True])
def test_prefetch_loads_are_issued_before_the_fmas(tmp_path, ta):
    """Double buffering only hides the global latency if the next stage's
    LDGs issue before the stage's FFMAs (ptxas may place them after: a 20-35%
    slowdown, notes/cuda.md). A check of this toolkit's ptxas."""
    p = Problem(2560, 64, 2560, trans_a=ta)
    cu = tmp_path / "k.cu"
    cu.write_text(codegen.source(p, DEEPBENCH_N64))
    cubin = tmp_path / "k.cubin"
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-std=c++17", "-o", str(cubin), str(cu)], check=True,
                   capture_output=True)
    sass = subprocess.run([_sass_tool(), "-sass", "-fun", "st_gemm", str(cubin)], check=True,
                          capture_output=True, text=True).stdout
    ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    loops = [(int(m.group(1), 16), a) for a, t in ins for m in [re.search(r"BRA (0x[0-9a-f]+)", t)]
             if m and int(m.group(1), 16) < a]
    lo, hi = max(loops, key=lambda x: x[1] - x[0])                # the k-loop
    body = [t for a, t in ins if lo <= a <= hi]
    ffma = [i for i, t in enumerate(body) if "FFMA" in t]
    ldg = [i for i, t in enumerate(body) if "LDG" in t]
    assert len(ffma) == 1024 and len(ldg) == 6
    assert max(ldg) < min(ffma), (ldg, ffma[:3])


def test_cp_async_pipeline_knob():
    """ST > 0 copies the untransposed operand(s) by cp.async into ST shared
    buffers; NT (both blocks transposed on the way) with trans = 1 has none,
    so the space refuses it; configs written before ST existed read as ST = 0."""
    nn = Problem(4096, 4096, 4096)
    s = make_space(nn, L)
    big = Config(BM=128, BN=256, BK=32, TM=16, TN=8, WM=64, WN=64, trans=1, VEC=4, PAD=4, DB=1, KG=1, KL=1, KR=0)
    assert big in s and big.replace(ST=3) in s          # old config (no ST) still valid
    assert codegen.source(nn, big) == codegen.source(nn, big.replace(ST=0))
    src = codegen.source(nn, big.replace(ST=3))
    assert "cp_async<16>(bs + r * LDB_S + c" in src and "cp_async<16>(as" not in src   # B async, A via registers
    assert "cp_async_wait<1>()" in src and "nx % 3" in src and "ra[LOADS_A]" in src and "rb[1]" in src
    d0, d3 = derive(nn, big), derive(nn, big.replace(ST=3))
    assert d3.smem_bytes == 3 * d0.smem_bytes // 2 and d3.regs_est < d0.regs_est
    assert "pipeline" in s.why_invalid(big.replace(ST=2, DB=0))
    tn = Problem(2560, 16, 2560, trans_a=True)           # both operands untransposed: no staging registers
    cfg = Config(BM=128, BN=16, BK=16, TM=8, TN=4, WM=64, WN=16, trans=1, VEC=4, PAD=4, DB=1, ST=2, KG=32, KL=1, KR=0)
    assert cfg in make_space(tn, L)
    src = codegen.source(tn, cfg)
    assert "cp_async<16>(as + r * LDA_S + c" in src and "cp_async<16>(bs + r * LDB_S + c" in src
    assert "ra[" not in src and "rb[" not in src
    nt = Problem(1024, 1024, 1024, trans_b=True)
    snt = make_space(nt, L)
    why = snt.why_invalid(big.replace(ST=3))
    assert why and "pipeline" in why
    assert big.replace(ST=3, trans=0) in snt              # A m-major in shared memory: A is copied untransposed
    assert codegen.source(nt, big.replace(ST=3, trans=0)).count("cp_async<16>(as + r * LDA_S + c") == 1


def test_tensor_core_knob():
    """MMA = 3 renders gemm_mma.cu (3xTF32 mma.sync, both operands by cp.async
    in their stored orientation); it needs float32, sm_80+, the pipeline and
    the canonical values of the FFMA-only knobs; configs without MMA read as 0."""
    nn = Problem(4096, 4096, 4096)
    s = make_space(nn, L)
    assert MMA in s and BIG in s and BIG.replace(MMA=0) in s
    assert codegen.source(nn, BIG) == codegen.source(nn, BIG.replace(MMA=0))
    src = codegen.source(nn, MMA)
    assert src.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 1 and "tf32_rna(x - __uint_as_float(big))" in src
    assert src.count("mma_tf32(t, a_") == 3 and "acc[i][j][q] += t[q]" in src and "fma(" not in src
    assert "cp_async_to<16>(as + sa(l) * (unsigned)sizeof(T), ga + oa[l])" in src and "cp_async_to<16>(bs + sb(l) * (unsigned)sizeof(T), gb + ob[l])" in src
    for change, why in [(dict(ST=0), "MMA"), (dict(TM=8), "MMA"), (dict(KL=2), "MMA"), (dict(PAD=0), "MMA"),
                        (dict(WM=8), "warp"), (dict(DB=0), "MMA"),
                        (dict(WN=64), "registers")]:      # 64 x 64 warp tiles spilled (notes/cuda.md)
        got = s.why_invalid(MMA.replace(**change))
        assert got and why in got, (change, got)
    assert "MMA" in make_space(nn, dict(L, arch="sm_75")).why_invalid(MMA)
    assert make_space(Problem(512, 512, 512, "float64"), L).why_invalid(MMA) is not None
    # layouts: k-contiguous rows padded to 4 mod 32 words, m/n-contiguous ones to 8 mod 32
    for ta, tb in itertools.product((False, True), repeat=2):
        d = derive(Problem(4096, 4096, 4096, "float32", ta, tb), MMA)
        assert d.lda_s % 32 == (8 if ta else 4) and d.ldb_s % 32 == (4 if tb else 8)
        assert d.threads == 256 and d.smem_bytes == 3 * 4 * (d.stage_elems_a + d.stage_elems_b)


def test_warpgroup_mma_knob():
    """MMA = 4 renders gemm_wgmma.cu (3xTF32 through wgmma, sm_90a): 64 x WN
    warpgroup tiles, three wgmmas per k-step into a temporary started from
    zero, operands split once per stage into shared memory; sm_90 only; the
    source asks for sm_90a and the compiler gives it that target."""
    nn = Problem(4096, 4096, 4096)
    s = make_space(nn, L)
    assert WGMMA in s
    src = codegen.source(nn, WGMMA)
    assert src.startswith("// shadertune: needs sm_90a") and arch_for(src, "sm_90") == "sm_90a"
    assert arch_for(codegen.source(nn, MMA), "sm_90") == "sm_90" and arch_for(src, "sm_100") == "sm_100"
    assert src.count("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32") == 1
    assert src.count("wgmma_tf32<1>(t, smem_desc(") == 3 and src.count("wgmma_tf32<0>(t, smem_desc(") == 1
    assert "acc[0][j][q] += t[j][q]" in src and "fence.proxy.async.shared::cta" in src
    d = derive(nn, WGMMA)
    assert d.threads == 256 and d.grid == (32, 32, 1)
    # stored stages (k-contiguous rows padded by 4 words) plus two split buffers of big and small halves
    assert d.smem_bytes == 4 * (3 * (128 * 20 + 16 * 128) + 2 * 2 * 256 * 16)
    for change, why in [(dict(WM=32), "warp"), (dict(WN=256, BN=256), "WN"), (dict(BM=32), "warp tiles"),
                        (dict(ST=0), "MMA"), (dict(DB=0), "MMA"), (dict(TM=8), "MMA"),
                        (dict(BN=256, BM=256, WN=64), "threads")]:   # 8 warpgroups: 128 registers x 1024
        got = s.why_invalid(WGMMA.replace(**change))
        assert got and why in got, (change, got)
    assert "MMA" in make_space(nn, dict(L, arch="sm_80")).why_invalid(WGMMA)
    assert "MMA" in make_space(nn, dict(L, arch="sm_100")).why_invalid(WGMMA)
    assert WGMMA.replace(MMA=3, WN=32) in s           # the mma.sync kernel stays in the space
    # candidate lists on sm_90 hold all three kernels, the wgmma one half of them
    cands = candidates(nn, s, L, 24)
    kinds = [c["MMA"] for c in cands]
    assert set(kinds) == {0, 3, 4} and kinds.count(4) == 12
    for n in (1, 2, 3, 5):   # short lists too: n = 1 is default_config (an empty one fell back to VEC = 1)
        short = candidates(nn, s, L, n)
        assert len(short) == n and short[0] == cands[0]
    assert {c["MMA"] for c in candidates(nn, make_space(nn, dict(L, arch="sm_80")), dict(L, arch="sm_80"), 24)} == {0, 3}


def test_register_a_operand_knob():
    """AR = 1: the wgmma kernel takes A from registers (one wgmma per product
    with the A fragment as registers), splits only B into shared memory, pads a
    transposed A's rows for conflict-free fragment reads; only MMA = 4 has it."""
    nn, tt = Problem(4096, 4096, 4096), Problem(4096, 4096, 4096, "float32", True, True)
    s = make_space(nn, L)
    ar = WGMMA.replace(AR=1)
    assert ar in s and tuple(s.knobs["AR"]) == (1, 0)     # the faster first (measured)
    src = codegen.source(nn, ar)
    assert src.count("wgmma_tf32_rs<1>(t, a[s][0], smem_desc(") == 2 and src.count("wgmma_tf32_rs<0>(t, a[s][1]") == 1
    assert "smem_desc(a_" not in src and "load_a((it + 1) % 3, a_next)" in src and "step(it + 1, a1, a0)" in src
    assert "constexpr int SPL_A = 0," in src and "constexpr int SPL_A = BM * BK," in codegen.source(nn, WGMMA)
    assert "as[r * LDA_S + k]" in src and "as[k * LDA_S + r]" in codegen.source(tt, ar)
    # the split buffers hold B only: 2 x 2 x 128 x 16 floats less than AR = 0's A and B
    assert derive(nn, WGMMA).smem_bytes - derive(nn, ar).smem_bytes == 4 * 2 * 2 * 128 * 16
    assert derive(tt, ar).lda_s == 128 + 8 and derive(tt, WGMMA).lda_s == 128
    assert derive(nn, ar).regs_est > derive(nn, WGMMA).regs_est
    # BK = 32 at 128 x 128 fits shared memory only with A in registers
    assert ar.replace(BK=32) in s and "shared memory" in s.why_invalid(WGMMA.replace(BK=32))
    assert "registers" in s.why_invalid(MMA.replace(AR=1))
    assert tuple(make_space(Problem(512, 512, 512, "float64"), L).knobs["AR"]) == (0,)


def test_presplit_operands_knob():
    """PS = 1, 2: the wgmma kernel on operands split and packed by a first
    kernel (st_gemm_pack) into the tiles the descriptors read, each stage two
    bulk copies on an mbarrier; PS = 2 adds the sums once every two stages. Only MMA = 4 with
    A from shared memory, VEC = 1, no split-K, one product; shared memory is
    ST packed stages of both halves of A and B."""
    nn = Problem(4096, 4096, 4096)
    s = make_space(nn, L)
    ps = WGMMA.replace(VEC=1, PS=1)
    assert ps in s and tuple(s.knobs["PS"]) == (2, 1, 0)
    src = codegen.source(nn, ps)
    assert "st_gemm_pack(" in src and src.count("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes") == 1
    gemm = src[src.index("__launch_bounds__(THREADS, 1)"):]      # the GEMM kernel: no split, no copies by threads
    assert "store_split(" not in gemm and "cp_async<" not in src and "wgmma_wait<0>();\n        merge(t);" in src
    assert "store_split(v, big, big + RB * BK);" in src              # the pack kernel splits, as the in-loop split does
    src2 = codegen.source(nn, ps.replace(PS=2))
    assert "wgmma_wait<1>();" in src2 and "compute((it + 1) % ST, t, false);" in src2
    assert codegen.source(nn, WGMMA) == codegen.source(nn, WGMMA.replace(PS=0))   # PS = 0 is the kernel as before
    d = derive(nn, ps)
    assert d.smem_bytes == 3 * (2 * (128 + 128) * 16 * 4 + 8) and d.threads == 256
    assert derive(nn, ps.replace(PS=2)).smem_bytes == d.smem_bytes
    for change, why in [(dict(AR=1), "pre-split"), (dict(VEC=4), "pre-split"), (dict(MMA=3, WN=32), "pre-split"),
                        (dict(BK=32, ST=4), "shared memory")]:
        got = s.why_invalid(ps.replace(**change))
        assert got and why in got, (change, got)
    small = Problem(256, 256, 60000, "float32", False, True)
    assert "pre-split" in make_space(small, L).why_invalid(ps.replace(KG=32))
    assert tuple(make_space(Problem(64, 64, 64, batch=3), L).knobs["PS"]) == (0,)
    assert tuple(make_space(Problem(512, 512, 512, "float64"), L).knobs["PS"]) == (0,)
    # the candidate list gives each wgmma shape one pre-split variant where it is valid
    cands = candidates(nn, s, L, 24)
    assert cands[0]["PS"] and any(c["MMA"] == 4 and c["AR"] for c in cands)


@pytest.mark.parametrize("N, narrow", [(77, 80), (45, 48), (100, 104), (80, 80), (64, None), (60, None), (16, None), (200, None)])
def test_narrow_n_tiles(N, narrow):
    """N under 128 and not a power of two gets a tile of N rounded up to 8 (where
    that is not a power of two already); the FFMA kernel cannot use it (its
    warps are 32 lanes of 4-wide tiles), the tensor-core kernels can, and their
    copies may then end in a partial round (a guard skips what lies past the
    stage)."""
    p = Problem(3000, N, 5000)
    s = make_space(p, L)
    extra = [v for v in s.knobs["BN"] if v & (v - 1)]
    assert extra == ([narrow] if narrow else []) and [v for v in s.knobs["WN"] if v & (v - 1)] == extra
    if narrow:
        wg = WGMMA.replace(BM=64, BN=narrow, WN=narrow, BK=32, VEC=1, KG=4)
        assert wg in s and wg.replace(AR=1, BK=16) in s
        assert "warp" in s.why_invalid(BIG.replace(BN=narrow, WN=narrow, VEC=1, KG=4))
    if N == 80:   # VEC = 4 at 128 x 80 x 16: 320 copies of B over 256 threads
        cfg = WGMMA.replace(BN=80, WN=80)
        assert cfg in s and derive(p, cfg).loads_b == 2
        assert "if ((BN * KT / VEC) % THREADS != 0 && idx >= BN * KT / VEC) break;" in codegen.source(p, cfg)


def test_stream_hold_kernel_compiles_and_is_bounded(tmp_path):
    """The spin kernel that keeps host launch overhead out of event timing
    (hold.py) is valid CUDA, and its length grows with the repeats but is capped."""
    from shadertune.backends.cuda import hold
    assert hold.hold_us(10) < hold.hold_us(100) <= hold.MAX_HOLD_US == hold.hold_us(10 ** 6)
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    cu = tmp_path / "hold.cu"
    cu.write_text(hold._SOURCE)
    r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(tmp_path / "hold.cubin"), str(cu)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_dmma_knob(monkeypatch):
    """MMA = 1 renders gemm_dmma.cu (float64 on the FP64 tensor cores,
    mma.sync m16n8k8 where its two buffers of fragments fit the registers,
    else m16n8k4, both with the main loop that keeps fragments in flight
    across the stage boundary); float64, sm_90+, the pipeline and the
    canonical FFMA-only knobs; the FFMA DGEMM stays in the space and in the
    candidate list. Forced (the probe), the plain loop and m16n8k16 render."""
    p = Problem(4096, 4096, 4096, "float64")
    s = make_space(p, L)
    assert DMMA in s and s.knobs["MMA"] == (0, 1)
    cublas_tile = DMMA.replace(BN=64)                        # 128 x 64, 2 x 2 warps of 64 x 32
    src = codegen.source(p, cublas_tile)
    assert derive(p, cublas_tile).threads == 128 and cublas_tile in s
    assert "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64" in src and "typedef double T;" in src
    assert "mma_f64(acc[i][j], fa[buf][i], fb[buf][j])" in src and "cp_async_if<16>(as + sa(l) * (unsigned)sizeof(T), ga + oa[l], live)" in src
    assert "constexpr int KS = BK / MMA_K;" in src and "static_assert((BK / MMA_K) % 2 == 0" in src
    assert derive(p, DMMA).threads == 256 and "m16n8k8.row.col.f64" in codegen.source(p, DMMA)
    # 16 copies a thread: two buffers of k = 8 fragments do not fit beside them, k = 4 does
    deep = DMMA.replace(BK=32)
    assert deep in s and "m16n8k4.row.col.f64" in codegen.source(p, deep) and "fa[buf][i]" in codegen.source(p, deep)
    # a warp of fewer than 4 fragments keeps the plain loop (dmma.PIPE_MIN_FRAGMENTS)
    small = Problem(2048, 2048, 2048, "float64")
    tiny = DMMA.replace(BM=16, BN=32, BK=32, WM=16, WN=8)
    assert tiny in make_space(small, L) and "fa[buf]" not in codegen.source(small, tiny)
    assert "fa[buf]" in codegen.source(small, tiny.replace(BM=32, BN=64, WM=16, WN=32))
    monkeypatch.setattr(dmma, "MMA_KS", (16,))
    monkeypatch.setattr(dmma, "FRAG_PIPE", False)
    plain = codegen.source(p, cublas_tile)
    assert "m16n8k16.row.col.f64" in plain and "mma_f64(acc[i][j], a[i], b)" in plain and "cp_async_if" not in plain
    monkeypatch.undo()
    # 512 threads (128 registers each) of 32 x 32 warp tiles spill even with k = 4
    assert "registers" in s.why_invalid(DMMA.replace(WM=32, WN=32))
    for change, why in [(dict(ST=0), "cp.async pipeline"), (dict(TM=4), "canonical TM"),
                        (dict(BK=8), "k-steps of 16"), (dict(BM=64, BN=64), "at least 4 warps"),
                        (dict(BK=32, VEC=1, WN=64), "at most 16 copies"), (dict(KL=2), "no K_L"),
                        (dict(trans=0), "canonical trans"), (dict(WM=8), "warp"),
                        (dict(WN=64, BN=256), "registers")]:
        got = s.why_invalid(DMMA.replace(**change))
        assert got and why in got, (change, got)
    assert "MMA = 1" in make_space(p, dict(L, arch="sm_80")).why_invalid(DMMA)
    assert make_space(Problem(512, 512, 512), L).why_invalid(DMMA) is not None     # float32: not this kernel
    # every row 4 mod 16 doubles (conflict-free fragment reads) in all four layouts
    for ta, tb in itertools.product((False, True), repeat=2):
        d = derive(Problem(4096, 4096, 4096, "float64", ta, tb), DMMA)
        assert d.lda_s % 16 == 4 and d.ldb_s % 16 == 4 and d.kgran == 4
        assert d.smem_bytes == 3 * 8 * (d.stage_elems_a + d.stage_elems_b)
    cands = candidates(p, s, L, 24)
    assert {c["MMA"] for c in cands} == {0, 1}
    # the untuned float64 default is the model's first pick, a DMMA config (measured 1.8-2.4x the
    # FFMA pick on the H200)
    from shadertune.backends.cuda.tuning import model_cycles
    assert cands[0]["MMA"] == 1
    assert model_cycles(p, cands[0], L) < min(model_cycles(p, c, L) for c in cands if c["MMA"] == 0)
    assert all(c in s for c in cands)
    assert {c["MMA"] for c in candidates(p, make_space(p, dict(L, arch="sm_80")), dict(L, arch="sm_80"), 24)} == {0}


def test_batched_sources():
    """A batch adds the operands' product strides as two kernel arguments
    and the block -> (product, M tile) map; one product's source has neither."""
    p1, pb = Problem(100, 64, 256), Problem(100, 64, 256, batch=7)
    for cfg in (BIG.replace(BM=64, BN=64, TM=4, TN=8, WM=16, WN=64), MMA.replace(BM=64, BN=32, WM=32, WN=16, BK=16)):
        one, many = codegen.source(p1, cfg), codegen.source(pb, cfg)
        assert "sA" not in one and "MTILES" not in one
        assert "const T alpha, const T beta, const long long sA, const long long sB)" in many
        assert f"constexpr int MTILES = {-(-100 // cfg['BM'])};" in many and "A += bz * sA;" in many
        assert derive(pb, cfg).grid[1] == 7 * derive(p1, cfg).grid[1]
    # split-K workspace: splits lie one whole batch apart
    split = Config(BM=32, BN=32, BK=32, TM=8, TN=4, WM=32, WN=32, trans=1, VEC=4, PAD=4, DB=1, KG=8, KL=1, KR=1)
    src = codegen.source(Problem(45, 37, 3001, batch=3), split)
    assert "W + (size_t)blockIdx.z * WSPLIT" in src and "const size_t MN = WSPLIT;" in src
    # the batch fills the GPU: no split-K for 256 products of 128^3
    pb = Problem(128, 128, 128, batch=256)
    sb = make_space(pb, L)
    assert 1 < len(sb.knobs["KG"]) and all(c["KG"] == 1 for c in candidates(pb, sb, L, 12))


def test_cuda_event_timing_lives_in_one_place():
    """The kernel driver, the cuBLAS baseline and the roofline measurement
    time through backends/cuda/timing.py: no other module reads CUDA event
    times."""
    import pathlib
    root = pathlib.Path(codegen.__file__).resolve().parents[2]
    readers = sorted(str(f.relative_to(root)) for f in root.rglob("*.py") if "get_elapsed_time" in f.read_text())
    assert readers == ["backends/cuda/timing.py"]
    from shadertune.backends.cuda import baseline, driver
    from shadertune.backends.cuda import microbench as roofline_cuda
    import inspect
    for mod in (baseline, driver, roofline_cuda):
        assert "event_times" in inspect.getsource(mod)


@pytest.mark.parametrize("p", [Problem(0, 16, 16), Problem(16, 0, 16), Problem(0, 0, 0),
                               Problem(0, 5, 7, "float64", True, True), Problem(16, 16, 0)])
def test_empty_problems_have_a_space_a_default_and_predictions(p):
    """M = 0 or N = 0 (an empty C) divided by zero in the cost model (issue 14, item 10)."""
    from shadertune.backends.cuda import CUDABackend
    be = CUDABackend()                   # no GPU here: the sm_90 limits
    cands = be.candidates(p, 4)
    assert cands and be.default_config(p) == cands[0] and be.space(p).phases.start == cands[0]
    pred = be.predict_ms(p, cands)
    assert len(pred) == len(cands) and all(0 < t < 1 for t in pred)


@pytest.mark.slow
def test_model_strategy_on_the_cuda_space_without_a_gpu():
    """The model strategy walks the real CUDA space (sm_90 limits, no GPU): the
    'measured' time is the backend's own prediction, perturbed per config and
    15% slower unless ST = 2 (a knob the model does not see; the default is
    deeper), so the search must rank, time the top, then climb through the
    coupled knobs to find ST = 2."""
    import math
    from shadertune.backends.cuda import CUDABackend
    from shadertune.core.result import Result
    from shadertune.search import Budget, SearchOptions, get_strategy
    be = CUDABackend()
    p = Problem(4096, 2048, 1000, trans_b=True)
    space = be.space(p)
    assert be.default_strategy == "model" and be.limits()["arch"] == "sm_90"
    phases, seen = [], []

    def evaluate(cfg):
        assert space.why_invalid(cfg) is None
        seen.append(cfg)
        ms = be.predict_ms(p, [cfg])[0] * math.exp(random.Random(cfg.key).gauss(0, 0.05))
        ms *= 1.0 if cfg["ST"] == 2 else 1.15
        return Result("cuda", "sm_90 (no GPU)", p, cfg, "ok", times_ms=[ms])

    from shadertune.search import FunctionEvaluator

    class Recording(FunctionEvaluator):
        def phase(self, label):
            phases.append(label)
    ev = Recording(evaluate)
    listed = be.candidates(p, 24)                  # what tune() passes as seeds
    options = SearchOptions(cost_model=lambda cs: be.predict_ms(p, cs), seeds=listed)
    results = get_strategy("model")(space, ev, Budget(max_evals=300), options)
    assert [r.config for r in results[:24]] == listed
    assert len(results) == len(seen) == len(set(seen))
    assert len(results) == 300 or phases[-1].startswith("converged")
    assert results[0].config == space.phases.start                  # the untuned default first
    assert phases[0] == "model: top 24" and "local search" in phases
    best = min(results, key=lambda r: r.median_ms)
    assert results[0].config["ST"] > 2
    assert best.median_ms < results[0].median_ms and best.config["ST"] == 2
    # the local search moved through more than one knob group of the plan
    changed = {k for r in results[24:] for k in r.config if r.config[k] != results[0].config[k]}
    assert {"BM", "BN", "WM", "WN"} & changed and {"ST", "VEC", "PAD"} & changed
