"""The CUDA untuned pick (default_config: the head of tuning.candidates) on shapes of
the measured stores (notes/cuda.md, session 18): which config it takes, no timings.
The sm_90 limits of a machine without a GPU (132 SMs: H100 SXM and H200 alike)."""
import lzma
import subprocess
import sys
import pathlib

import pytest

from shadertune.backends.cuda import dmma
from shadertune.backends.cuda.device import DEFAULT_LIMITS
from shadertune.backends.cuda.space import derive, make_space
from shadertune.backends.cuda.tuning import candidates, model_cycles
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import Result
from shadertune.db import Store

L = DEFAULT_LIMITS
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _pick(m, n, k, dtype="float32"):
    p = Problem(m, n, k, dtype)
    return candidates(p, make_space(p, L), L, 1)[0]


def test_split_k_pick_takes_the_reduce_kernel():
    # the same split config ran faster with the reduce kernel (KR = 0) than with the
    # in-launch reduction on every measured problem; before, the pick took KR = 1 here
    for shape in ((2560, 32, 2560), (512, 512, 512)):
        c = _pick(*shape)
        assert c["KG"] > 1 and c["KR"] == 0, (shape, c)


def test_mid_size_odd_split_fewer_splits():
    # 900x700x1300: session 17's pick split 128 x 64 tiles four ways with KR = 1 (1.57x the
    # best measured), session 18's 128 x 128 tiles eight ways (1.49x); with a cost per
    # round of blocks (tuning.ROUND_CYCLES) four splits of 64 x 128 tiles (1.42x); the
    # best measured split 128 x 128 tiles twice
    c = _pick(900, 700, 1300)
    assert (c["MMA"], c["KG"], c["KR"]) == (4, 4, 0), c


def test_mid_size_cube_unsplit():
    # 1200^3: the split pick (128 x 128, K_G 8: 1.52x the best measured) gave way to an
    # unsplit pre-split one (1.09x): each extra round of split blocks costs its fill and
    # epilogue (tuning.ROUND_CYCLES)
    c = _pick(1200, 1200, 1200)
    assert (c["MMA"], c["KG"], c["SK"], c["PS"]) == (4, 1, 0, 1), c


@pytest.mark.parametrize("n", [2048, 4096, 8192])
def test_large_squares_keep_the_128x128_presplit_pick(n):
    # measured 2x cuBLAS and more: the round cost must not move them
    c = _pick(n, n, n)
    assert (c["MMA"], c["BM"], c["BN"], c["BK"], c["KG"], c["SK"], c["PS"]) == (4, 128, 128, 32, 1, 0, 1), c


def test_batched_small_products_take_the_larger_tile():
    # 96x96x96 x 200: 128 x 32 tiles (1.53x the best measured) -> 128 x 128 (1.19x): fewer
    # rounds of blocks on the busiest SM
    p = Problem(96, 96, 96, "float32", batch=200)
    c = candidates(p, make_space(p, L), L, 1)[0]
    assert (c["MMA"], c["BM"], c["BN"]) == (4, 128, 128), c


@pytest.mark.parametrize("n", [1500, 1536])
def test_float64_mid_cubes_take_96x96_dmma_tiles(n):
    # power-of-two blocks leave the last wave part-empty there (64 x 64: 4.4 blocks an
    # SM); 96 x 96 blocks of 48 x 48 warps run whole waves (dmma.THIRD_TILES), measured
    # fastest, and six-warp 96 x 96 blocks slow (dmma.THIRD_WARPS)
    c = _pick(n, n, n, "float64")
    assert (c["MMA"], c["BM"], c["BN"], c["WM"], c["WN"], c["KG"]) == (dmma.MMA, 96, 96, 48, 48, 1), c


@pytest.mark.parametrize("n", [1000, 3000])
def test_float64_picks_kept_where_measured_best(n):
    # 1000^3 (one wave: K_G 2 measured 1.17x slower) and 3000^3 keep 128 x 64 unsplit
    c = _pick(n, n, n, "float64")
    assert (c["MMA"], c["BM"], c["BN"], c["WM"], c["WN"], c["KG"], c["SK"]) == (dmma.MMA, 128, 64, 64, 32, 1, 0), c


def test_model_ranks_the_reduce_kernel_first():
    p = Problem(2560, 32, 2560)
    c = _pick(2560, 32, 2560)
    assert model_cycles(p, c, L) < model_cycles(p, c.replace(KR=1), L)


def test_dmma_reuse_term_is_softened():
    p = Problem(1536, 1536, 1536, "float64")
    base = dict(BM=64, BN=64, BK=32, TM=2, TN=2, PAD=2, trans=1, VEC=2, DB=1, ST=3, KG=1, KL=1, KR=0,
                MMA=dmma.MMA, AR=0, PS=0, SK=0)
    wide, narrow = Config(dict(base, WM=32, WN=64)), Config(dict(base, WM=32, WN=32))
    # the same block with all warps resident: the efficiencies differ by the reuse term alone
    # (and the mma shape's factor, divided out)
    shape = [dmma.K4_EFFICIENCY if dmma.config_mma_k(c, derive(p, c)) == 4 else 1.0 for c in (wide, narrow)]
    eff = [dmma.efficiency(c, derive(p, c), 8, 32.0) / f for c, f in zip((wide, narrow), shape)]
    assert eff[1] / eff[0] == pytest.approx((16 / dmma.FULL_REUSE) ** dmma.REUSE_EXPONENT)
    assert eff[1] / eff[0] > 16 / dmma.FULL_REUSE      # softer than in proportion
    assert dmma.REUSE_EXPONENT < 1


def _store_with(path, problem, configs_ms):
    s = Store(path)
    for cfg, ms in configs_ms:
        s.put(Result("cuda", "NVIDIA H200 | CUDA driver 13.0", problem, cfg, "ok",
                     times_ms=[ms, ms], error=1e-14), "th-test")
    s.close()


def test_untuned_vs_stores_tool_reports_rank(tmp_path):
    p = Problem(1536, 1536, 1536, "float64")
    pick = _pick(1536, 1536, 1536, "float64")
    others = [c for c in candidates(p, make_space(p, L), L, 6) if c != pick][:3]
    db = tmp_path / "t.sqlite"
    _store_with(db, p, [(others[0], 1.0), (pick, 2.0), (others[1], 3.0)])
    xz = tmp_path / "t.sqlite.xz"
    xz.write_bytes(lzma.compress(db.read_bytes()))
    out = tmp_path / "rows.json"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "untuned_vs_stores.py"), str(xz),
                        "--min-configs", "3", "--template-hash", "th-test", "--json", str(out)],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert r.returncode == 0, r.stderr
    import json
    (row,) = json.loads(out.read_text())
    assert row["exact"] and row["rank"] == 2 and row["slowdown"] == pytest.approx(2.0)
    assert row["device"] == "NVIDIA H200" and "1536x1536x1536:float64" in r.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "tools" / "untuned_vs_stores.py"),
                          str(tmp_path / "none.sqlite")], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert bad.returncode == 2 and "no such store" in bad.stderr
