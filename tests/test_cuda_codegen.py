"""CUDA backend without a GPU: space, codegen, and nvcc + ptxas on a sample
of valid configs (sm_90; skipped only where nvcc is missing)."""
import itertools
import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from shadertune.backends.cuda import codegen
from shadertune.backends.cuda.device import DEFAULT_LIMITS
from shadertune.backends.cuda.space import PHASES, derive, make_space
from shadertune.backends.cuda.tuning import candidates
from shadertune.config import Config
from shadertune.problem import Problem
from shadertune.space import Space

L = DEFAULT_LIMITS
BIG = Config(BM=128, BN=128, BK=8, TM=8, TN=8, WM=32, WN=64, trans=1, VEC=4, PAD=4, DB=1, KG=1, KL=1, KR=0)


def test_space_is_a_space_with_a_phase_plan():
    s = make_space(Problem(4096, 4096, 4096), L)
    assert isinstance(s, Space)
    assert s.phases == PHASES
    assert BIG in s
    assert 1000 < len(s) < 50000          # pruned, but rich


def test_fast_enumeration_equals_filtered_product():
    p = Problem(16, 16, 33, "float64", True, False)
    s = make_space(p, L)
    brute = {Config(dict(zip(s.knobs, v))) for v in itertools.product(*s.knobs.values())}
    brute = {c for c in brute if s.why_invalid(c) is None}
    assert set(s.configs()) == brute and brute


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
    assert s.knobs["VEC"] == (1,)
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
    """10 valid configs: both precisions, all four transposes, split-K on,
    single/double buffering, both A layouts; deterministic."""
    rng = random.Random(4)
    out = []
    combos = itertools.product(("float32", "float64"), (False, True), (False, True))
    for i, (dtype, ta, tb) in enumerate(combos):
        p = Problem(2560, 64, 4096, dtype, ta, tb)
        s = make_space(p, L)
        cands = candidates(p, s, L, 48)
        split = [c.replace(DB=0, trans=int(not ta), PAD=0) for c in cands if c["KG"] > 1 and c["KL"] > 1]
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
    return out


def _nvcc(job, tmp):
    i, (p, cfg) = job
    cu = tmp / f"k{i}.cu"
    cu.write_text(codegen.source(p, cfg))
    r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", str(tmp / f"k{i}.cubin"), str(cu)],
                       capture_output=True, text=True)
    return p, cfg, r


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_sample_compiles_with_nvcc_without_spills(tmp_path):
    jobs = list(enumerate(_sample()))
    with ThreadPoolExecutor(max_workers=4) as ex:
        results = list(ex.map(lambda j: _nvcc(j, tmp_path), jobs))
    for p, cfg, r in results:
        log = r.stdout + r.stderr
        assert r.returncode == 0, f"{p.key} {cfg.key}\n{log}"
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        assert spills and all(s == ("0", "0") for s in spills), f"{p.key} {cfg.key} spills:\n{log}"
        regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
        d = derive(p, cfg)
        assert max(regs) <= min(255, 65536 // d.threads), (p.key, cfg.key, regs)
