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
BIG = Config(BM=128, BN=128, BK=8, TM=8, TN=8, WM=32, WN=64, trans=1, VEC=4, PAD=4, DB=1, KG=1, KL=1)


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
