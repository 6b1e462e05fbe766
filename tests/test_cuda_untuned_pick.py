"""The CUDA untuned pick (default_config: the head of tuning.candidates, ranked by what
a call costs for problems timed as calls) on shapes of the measured stores
(notes/cuda.md, sessions 18-20): which config it takes, no timings. The sm_90 limits
of a machine without a GPU (132 SMs: H100 SXM and H200 alike)."""
import lzma
import subprocess
import sys
import pathlib

import pytest

from shadertune.backends.cuda import dmma, driver, tuning
from shadertune.backends.cuda.backend import CALL_TIMED_MS
from shadertune.backends.cuda.device import DEFAULT_LIMITS
from shadertune.backends.cuda.space import derive, make_space
from shadertune.backends.cuda.tuning import call_cycles, candidates, listing, model_cycles
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import Result
from shadertune.db import Store

L = DEFAULT_LIMITS
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _pick(m, n, k, dtype="float32", trans_a=False, trans_b=False):
    """The untuned pick, ranked as CUDABackend ranks it (as a call where the problem is
    timed as calls)."""
    p = Problem(m, n, k, dtype, trans_a, trans_b)
    return candidates(p, make_space(p, L), L, 1, CALL_TIMED_MS)[0]


def _device_pick(m, n, k, dtype="float32"):
    """The pick by device cycles alone (model_cycles): what decides CALL_TIMED_MS."""
    p = Problem(m, n, k, dtype)
    return candidates(p, make_space(p, L), L, 1)[0]


def _charged(p, c):
    """Whether a call of `c` is charged for its workspace (tuning.WORKSPACE_CHARGED)."""
    return driver.call_workspace(p, c, L["num_sms"]) * p.itemsize > tuning.WORKSPACE_CHARGED


def test_split_k_pick_takes_the_reduce_kernel():
    # the same split config ran faster with the reduce kernel (KR = 0) than with the
    # in-launch reduction on every measured problem; before, the pick took KR = 1 here
    for shape in ((2560, 32, 2560), (512, 512, 512)):
        c = _pick(*shape)
        assert c["KG"] > 1 and c["KR"] == 0, (shape, c)


def test_mid_size_odd_split_fewer_splits():
    # 900x700x1300 by device cycles: session 17's pick split 128 x 64 tiles four ways with
    # KR = 1 (1.57x the best measured), session 18's 128 x 128 tiles eight ways (1.49x); with
    # a cost per round of blocks (tuning.ROUND_CYCLES) four splits of 64 x 128 tiles (1.42x)
    c = _device_pick(900, 700, 1300)
    assert (c["MMA"], c["BM"], c["BN"], c["KG"], c["KR"]) == (4, 64, 128, 4, 0), c


@pytest.mark.parametrize("shape", [(900, 700, 1300), (700, 900, 1100)])
def test_call_timed_pick_keeps_its_workspace(shape):
    # the device pick's K_G 4 partials (10 MB) are above the size the call ranking charges
    # (tuning.WORKSPACE_CHARGED: measured, the better picks). Ranked as a call the pick
    # splits 128 x 128 tiles twice (5 MB, not charged), as the best measured (1.02x
    # the best at 900x700x1300, was 1.43x; 1.11x at 700x900x1100, was 1.39x)
    p = Problem(*shape)
    dev, c = _device_pick(*shape), _pick(*shape)
    assert _charged(p, dev) and not _charged(p, c)
    assert (c["MMA"], c["BM"], c["BN"], c["BK"], c["KG"], c["KR"]) == (4, 128, 128, 32, 2, 0), c
    assert call_cycles(p, c, L) < call_cycles(p, dev, L) and model_cycles(p, dev, L) < model_cycles(p, c, L)


def test_call_timed_split_takes_fewer_splits_whose_partials_are_kept():
    # 2560x64x2560: K_G 16 of 128 x 64 tiles (21 MB of partials, 1.54x the best) -> K_G 8 of
    # 64 x 64 (5 MB: 1.07x, the best measured's tile and split)
    p = Problem(2560, 64, 2560)
    c = _pick(2560, 64, 2560)
    assert (c["BM"], c["BN"], c["KG"]) == (64, 64, 8) and not _charged(p, c), c
    assert _device_pick(2560, 64, 2560)["KG"] == 16


def test_call_timed_pick_passes_over_a_charged_presplit():
    # 1024^3: the pre-split pick's packed operands (16 MB) are charged as a call's; K_G 2 of
    # 128 x 128 tiles needs 8 MB, not charged (1.00x the best measured NN, was 1.13x; NT
    # 1.43x before)
    for trans_b in (False, True):
        p = Problem(1024, 1024, 1024, "float32", False, trans_b)
        c = _pick(1024, 1024, 1024, trans_b=trans_b)
        assert c["PS"] == 0 and (c["BM"], c["BN"], c["KG"], c["KR"]) == (128, 128, 2, 0), c
        assert _device_pick(1024, 1024, 1024)["PS"] == 1 and not _charged(p, c)


def test_call_cost_is_the_workspace_charge_alone():
    # model_cycles plus CALL_WORKSPACE where the call's workspace is charged: a second
    # kernel as such (the reduce kernel of K_G with KR = 0) costs a call nothing more
    p = Problem(900, 700, 1300)
    base = _device_pick(900, 700, 1300)
    for kg in (1, 2, 4, 8):
        for kr in ((0, 1) if kg > 1 else (0,)):
            c = base.replace(KG=kg, KR=kr)
            extra = tuning.CALL_WORKSPACE if _charged(p, c) else 0
            assert call_cycles(p, c, L) == pytest.approx(model_cycles(p, c, L) + extra)
    assert [_charged(p, base.replace(KG=kg)) for kg in (1, 2, 4, 8)] == [False, False, True, True]
    assert tuning.CALL_WORKSPACE > 0


def test_which_problems_rank_as_calls_is_decided_by_device_time():
    # the device-time pick decides (as CUDABackend.call_timed): the call ranking cannot
    # move a problem across CALL_TIMED_MS, and held-timed problems keep their list
    for shape, calls in (((900, 700, 1300), True), ((4096, 4096, 4096), False)):
        p = Problem(*shape)
        got = listing(p, make_space(p, L), L, 24, CALL_TIMED_MS)
        dev = candidates(p, make_space(p, L), L, 24)
        assert got.calls == calls == (tuning.model_ms(p, dev[:1], L)[0] < CALL_TIMED_MS)
        assert (got.configs == dev) != calls


def test_mid_size_cube_unsplit():
    # 1200^3: the split pick (128 x 128, K_G 8: 1.52x the best measured) gave way to an
    # unsplit pre-split one (1.09x): each extra round of split blocks costs its fill and
    # epilogue (tuning.ROUND_CYCLES)
    c = _pick(1200, 1200, 1200)
    assert (c["MMA"], c["KG"], c["SK"], c["PS"]) == (4, 1, 0, 1), c


@pytest.mark.parametrize("n", [2048, 4096, 8192])
def test_large_squares_keep_the_128x128_presplit_pick(n):
    # measured 2x cuBLAS and more: the round cost must not move them, nor the call's cost
    # (2048^3 is timed as calls, its packed operands allocated each call: still the pick)
    c = _pick(n, n, n)
    assert (c["MMA"], c["BM"], c["BN"], c["BK"], c["KG"], c["SK"], c["PS"]) == (4, 128, 128, 32, 1, 0, 1), c
    assert c == _device_pick(n, n, n)


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
    assert c == _device_pick(n, n, n, "float64")       # timed as calls, nothing allocated a call


@pytest.mark.parametrize("n", [1000, 3000])
def test_float64_picks_kept_where_measured_best(n):
    # 1000^3 (one wave: K_G 2 measured 1.17x slower) and 3000^3 keep 128 x 64 unsplit
    c = _pick(n, n, n, "float64")
    assert (c["MMA"], c["BM"], c["BN"], c["WM"], c["WN"], c["KG"], c["SK"]) == (dmma.MMA, 128, 64, 64, 32, 1, 0), c
    assert c == _device_pick(n, n, n, "float64")


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
