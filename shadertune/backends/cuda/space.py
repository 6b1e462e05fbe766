"""The CUDA GEMM tuning space: knobs, derived launch shape, restrictions.

Knobs (Li-Dongarra's names where they exist, seed 000):
  BM, BN   block tile of C (Li-Dongarra's BM, BN)
  BK       k-depth of one shared-memory stage (Li-Dongarra's BK)
  TM, TN   per-thread register tile; Li-Dongarra's thread block is
           ty = BM/TM by tx = BN/TN threads (before warp grouping and K_L)
  WM, WN   warp tile; a warp's 32 lanes form a (WM/TM) x (WN/TN) grid
  trans    1: A's block is stored transposed (k-major) in shared memory so
           that a thread reads its A fragment with 16-byte loads
  VEC      width of global loads along the stored matrix's contiguous axis
  PAD      shared-memory row padding (elements) against bank conflicts
  DB       double buffering: global->register prefetch of the next stage
           while the current one is computed, two shared-memory stages
  ST       cp.async pipeline (sm_80+): 0 = copies go through registers (DB
           as above); 2..4 = ST shared-memory stages; an operand whose block
           is not transposed on the way to shared memory is copied by
           cp.async (no registers) ST - 1 stages ahead, the other through
           registers one stage ahead; needs DB = 1 and one such operand
  KG       split-K across the grid (ISAAC's K_G): partial sums to a
           workspace; K is cut into KG balanced ranges on a 32-byte grain
           (every split gets work, any KG up to K / grain)
  KR       how the KG partials are reduced (only with KG > 1): 0 by a second
           small kernel; 1 in the same launch, by the last block of each C
           tile to finish (a per-tile counter, __threadfence; the sum runs in
           the fixed order z = 0..KG-1, so the result is deterministic)
  KL       split-K inside a block (ISAAC's K_L): KL thread groups take
           interleaved k-slices of a stage, reduced through shared memory
  MMA      0: FFMA (the SIMT kernel, shaders/cuda/gemm.cu); 1: float64 on
           the FP64 tensor cores (DMMA mma.sync, sm_90+; dmma.py,
           shaders/cuda/gemm_dmma.cu); 3: float32 from
           TF32 tensor cores, three mma.sync per product ("3xTF32",
           shaders/cuda/gemm_mma.cu; float32, sm_80+). There a warp's WM x WN
           tile is (WM/16) x (WN/8) mma fragments, both operands go by
           cp.async (ST >= 2) in their stored orientation, and TM, TN, trans,
           DB, PAD, KL keep one canonical value (FV, FV, 1, 1, FV, 1);
           4: the same 3xTF32 through Hopper's warpgroup MMA (wgmma.mma_async,
           sm_90a only; shaders/cuda/gemm_wgmma.cu): WM = 64 (a warpgroup of
           4 warps multiplies 64 x WN per instruction, WN <= 128), BM/64 x
           BN/WN warpgroups; ST stored stages by cp.async, each split once
           into big/small halves in two extra shared-memory buffers

Pruning (Li-Dongarra style, before any compile): tiles no larger than the
problem needs, split-K only where the MN grid cannot fill the GPU, and the
device limits read at run time (threads, opt-in shared memory, registers).
"""
from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

from ...config import Config
from ...problem import Problem
from ...space import Space
from . import dmma

WARP = 32
# Registers a thread needs besides its tiles (indices, pointers, loop state);
# calibrated against ptxas -v on sm_90 (see tests/test_cuda_codegen.py).
REG_OVERHEAD = 40
# The tensor-core kernel's: loop state, the mma temporaries in flight, and
# per cp.async of a stage. Calibrated against ptxas (sm_90, nvcc 13.x,
# 2026-11-22) on 96 configs of the 64 x 64 warp tile and 288 of the 64 x 32,
# 32 x 64, 32 x 32 ones (all four layouts, BK 16/32, ST 2-4, K_G 1/8): 74 of
# the 96 spilled 8-280 bytes at 255 registers (every 64 x 64 tile is out), and
# 5 of the 288, all 128-thread blocks of 12 copies a stage. Conservative:
# ptxas takes all 255 registers where the block size allows, and its hoisting
# varies with ST and the layout.
MMA_REG_OVERHEAD = 48
MMA_REGS_PER_COPY = 10.5
# The wgmma kernel (MMA = 4): two WN/2-register accumulator sets (the sums and
# the stage's temporary) plus this much (calibrated against ptxas, sm_90a,
# see tests/test_cuda_codegen.py).
WGMMA_REG_OVERHEAD = 40
WGMMA_REGS_PER_COPY = 2
WARPGROUP = 128
# Knobs added after results were first stored, with the value that reproduces
# the kernel as it was: configs written before the knob existed stay valid.
KNOB_DEFAULTS = {"ST": 0, "MMA": 0}


def complete(c):
    """`c` with every knob added since it was written set to its old meaning."""
    missing = {k: v for k, v in KNOB_DEFAULTS.items() if k not in c}
    if not missing:
        return c
    if isinstance(c, Config):
        return Config({**c, **missing})
    return {**c, **missing}

# The phased order (documented in notes/cuda.md): block tile, then thread and
# warp tile, then the stage depth, then the memory-path knobs, then split-K.
PHASES = {
    "outer": [],
    "refine": None,
    "groups": [["MMA", "BM", "BN"], ["TM", "TN", "WM", "WN"], ["BK"],
               ["VEC", "DB", "ST", "PAD", "trans"], ["KG", "KL", "KR"]],
}


def _pow2_upto(lo: int, hi: int) -> list[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out


def _next_pow2(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


class Derived(NamedTuple):
    """Everything the template and the restrictions compute from a config
    (a NamedTuple: built ~200k times while a space is enumerated)."""
    FV: int            # elements per 16-byte shared-memory fragment load
    lanes_m: int
    lanes_n: int
    warps_m: int
    warps_n: int
    threads_mn: int    # threads of one K_L group
    threads: int
    KT: int            # k per stage over all K_L groups
    loads_a: int       # VEC-wide global loads (copies) per thread per stage
    loads_b: int
    lda_s: int         # shared-memory row lengths (padded)
    ldb_s: int
    stage_elems_a: int
    stage_elems_b: int
    smem_bytes: int
    regs_est: int
    k_chunk: int       # the longest k range of one K_G split
    k_units: int       # K in grains of KGRAN elements (the kernel's split unit)
    kgran: int         # K_G split grain: 32 bytes of k (a multiple of VEC)
    grid: tuple        # (x = N tiles, y = M tiles x batch, z = KG)


def derive(problem: Problem, c) -> Derived:
    if isinstance(c, Config):
        return _derive_cached(problem, c)
    return _derive(problem, c)


@functools.lru_cache(maxsize=8192)
def _derive_cached(problem: Problem, c: Config) -> Derived:
    return _derive(problem, c)


def scatters(problem: Problem, c) -> tuple[bool, bool]:
    """Whether A's, B's shared-memory store transposes the stored block (B is
    always k-major in shared memory; A is when trans)."""
    return bool(c["trans"]) != bool(problem.trans_a), bool(problem.trans_b)


def _tensor_core_derived(problem: Problem, c, warps_m, warps_n, threads, loads_a, loads_b,
                         lda_s, ldb_s, stage_a, stage_b, smem, regs) -> Derived:
    """What both tensor-core kernels share: float32 16-byte fragments, no
    K_L, and K_G splits on an 8-element (32-byte) grain."""
    kgran = 8
    units = -(-problem.K // kgran)
    k_chunk = min(problem.K, kgran * -(-units // c["KG"]))
    grid = (-(-problem.N // c["BN"]), -(-problem.M // c["BM"]) * problem.batch, c["KG"])
    return Derived(4, 0, 0, warps_m, warps_n, threads, threads, c["BK"], loads_a, loads_b,
                   lda_s, ldb_s, stage_a, stage_b, smem, regs, k_chunk, units, kgran, grid)


def _derive_mma(problem: Problem, c) -> Derived:
    """Derived values of a tensor-core (MMA) config, gemm_mma.cu's layout:
    operands in shared memory in their stored orientation, a k-contiguous row
    padded by 4 words and an m/n-contiguous one by 8 (conflict-free fragment
    reads for any BM, BN, BK of the domains)."""
    warps_m, warps_n = c["BM"] // c["WM"], c["BN"] // c["WN"]
    threads = WARP * warps_m * warps_n
    KT = c["BK"]
    loads_a = (c["BM"] * KT) // (c["VEC"] * threads)
    loads_b = (c["BN"] * KT) // (c["VEC"] * threads)
    if problem.trans_a:
        lda_s, stage_a = c["BM"] + 8, KT * (c["BM"] + 8)
    else:
        lda_s, stage_a = KT + 4, c["BM"] * (KT + 4)
    if problem.trans_b:
        ldb_s, stage_b = KT + 4, c["BN"] * (KT + 4)
    else:
        ldb_s, stage_b = c["BN"] + 8, KT * (c["BN"] + 8)
    smem = c["ST"] * (stage_a + stage_b) * 4 + (16 if c.get("KR", 0) else 0)
    mi, ni = c["WM"] // 16, c["WN"] // 8
    # accumulators + A's big/small fragments of one k-step + one B column's,
    # and per cp.async of a stage its hoisted address and what ptxas prefetches
    copies = loads_a + loads_b
    regs = 4 * mi * ni + 8 * mi + 4 + MMA_REG_OVERHEAD + int(copies * MMA_REGS_PER_COPY)
    return _tensor_core_derived(problem, c, warps_m, warps_n, threads, loads_a, loads_b,
                                lda_s, ldb_s, stage_a, stage_b, smem, regs)


def _derive_wgmma(problem: Problem, c) -> Derived:
    """Derived values of a warpgroup-MMA config (gemm_wgmma.cu): stored-
    orientation stages (k-contiguous rows padded by 4 words, m/n-contiguous
    ones unpadded: the split reads them along the row) and two split buffers
    of big and small halves."""
    warps_m, warps_n = c["BM"] // 64, c["BN"] // c["WN"]
    threads = WARPGROUP * warps_m * warps_n
    KT = c["BK"]
    loads_a = (c["BM"] * KT) // (c["VEC"] * threads)
    loads_b = (c["BN"] * KT) // (c["VEC"] * threads)
    if problem.trans_a:
        lda_s, stage_a = c["BM"], KT * c["BM"]
    else:
        lda_s, stage_a = KT + 4, c["BM"] * (KT + 4)
    if problem.trans_b:
        ldb_s, stage_b = KT + 4, c["BN"] * (KT + 4)
    else:
        ldb_s, stage_b = c["BN"], KT * c["BN"]
    split = 2 * 2 * (c["BM"] + c["BN"]) * KT
    smem = (c["ST"] * (stage_a + stage_b) + split) * 4 + (16 if c.get("KR", 0) else 0)
    regs = c["WN"] + WGMMA_REG_OVERHEAD + WGMMA_REGS_PER_COPY * (loads_a + loads_b)
    return _tensor_core_derived(problem, c, warps_m, warps_n, threads, loads_a, loads_b,
                                lda_s, ldb_s, stage_a, stage_b, smem, regs)


# A batch keeps its product's index and the operands' moved base pointers
# live in every thread: ptxas used -18..+6 registers against the same config
# of one product (36 candidates, nvcc 13.0), and one FFMA config at the cap
# spilled 80 bytes (estimated 240); so batched configs are estimated this
# many registers higher.
BATCH_REGS = 16


def _derive(problem: Problem, c) -> Derived:
    d = _derive_product(problem, c)
    return d if problem.batch == 1 else d._replace(regs_est=d.regs_est + BATCH_REGS)


def _derive_product(problem: Problem, c) -> Derived:
    c = {**KNOB_DEFAULTS, **c}   # a plain dict: ~40 knob reads below
    if c["MMA"] == 4:
        return _derive_wgmma(problem, c)
    if c["MMA"] == dmma.MMA:
        return dmma.derive(problem, c, Derived)
    if c["MMA"]:
        return _derive_mma(problem, c)
    w = problem.itemsize // 4
    FV = 16 // problem.itemsize
    lanes_m, lanes_n = c["WM"] // c["TM"], c["WN"] // c["TN"]
    warps_m, warps_n = c["BM"] // c["WM"], c["BN"] // c["WN"]
    threads_mn = WARP * warps_m * warps_n
    threads = threads_mn * c["KL"]
    KT = c["BK"] * c["KL"]
    loads_a = (c["BM"] * KT) // (c["VEC"] * threads)
    loads_b = (c["BN"] * KT) // (c["VEC"] * threads)
    if c["trans"]:
        lda_s, stage_a = c["BM"] + c["PAD"], KT * (c["BM"] + c["PAD"])
    else:
        lda_s, stage_a = KT + c["PAD"], c["BM"] * (KT + c["PAD"])
    ldb_s = c["BN"] + c["PAD"]
    stage_b = KT * ldb_s
    stages = c["ST"] or (2 if c["DB"] else 1)
    tile_bytes = stages * (stage_a + stage_b) * problem.itemsize
    red_bytes = (c["KL"] - 1) * c["BM"] * c["BN"] * problem.itemsize
    smem = max(tile_bytes, red_bytes) + (16 if c.get("KR", 0) else 0)   # + KR's static flag
    # cp.async copies need no staging registers
    scatter_a, scatter_b = scatters(problem, c) if c["ST"] else (True, True)
    staged = (loads_a * scatter_a + loads_b * scatter_b) * c["VEC"]
    regs = w * (c["TM"] * c["TN"] + c["TM"] + c["TN"] + staged) + REG_OVERHEAD
    # Calibrated against ptxas (sm_90, 112 candidates of the ICA/DeepBench/
    # square lists): the K_L epilogue and KL x more loads cost ~40 more, and
    # scalar loads an address register each (without these, KL = 4..8 and
    # VEC = 1 configs estimated at 164-248 spilled at the 255 cap).
    regs += (40 if c["KL"] > 1 else 0) + (loads_a + loads_b if c["VEC"] == 1 and not c["ST"] else 0)
    # float64: ptxas used 10-30 more than the estimate (2048^2 DGEMM list,
    # nvcc 13.x, 2026-11-22: 128x64x16 t8x8 estimated 248 spilled 48 bytes).
    regs += 24 if w == 2 else 0
    # Split z covers grains [z * units / KG, (z + 1) * units / KG): balanced to
    # one grain, so KG = 128 or 256 leaves no split empty (the old rounding to
    # a multiple of KT did).
    kgran = 32 // problem.itemsize
    units = -(-problem.K // kgran)
    k_chunk = min(problem.K, kgran * -(-units // c["KG"]))
    grid = (-(-problem.N // c["BN"]), -(-problem.M // c["BM"]) * problem.batch, c["KG"])
    return Derived(FV, lanes_m, lanes_n, warps_m, warps_n, threads_mn, threads, KT,
                   loads_a, loads_b, lda_s, ldb_s, stage_a, stage_b, smem, regs, k_chunk,
                   units, kgran, grid)


def _domains(problem: Problem) -> dict:
    fp32 = problem.dtype == "float32"
    FV = 16 // problem.itemsize
    # 32 rows at least: with M and N <= 16 no float32 FFMA warp fits 16 x 16
    # (32 lanes of >= 4 x 4 outputs), and the space was empty (found 2026-11-22)
    tile_max_m = max(32, min(256, _next_pow2(problem.M)))
    tile_max_n = max(16, min(256, _next_pow2(problem.N)))
    lda_c = problem.M if problem.trans_a else problem.K
    ldb_c = problem.K if problem.trans_b else problem.N
    vecs = [v for v in ((1, 2, 4) if fp32 else (1, 2)) if lda_c % v == 0 and ldb_c % v == 0]
    k = max(problem.K, 1)
    return {
        "BM": _pow2_upto(16, tile_max_m),
        "BN": _pow2_upto(16, tile_max_n),
        "BK": [b for b in (8, 16, 32) if b == 8 or b <= _next_pow2(k)],
        "TM": [t * FV for t in (1, 2, 4)],
        "TN": [t * FV for t in (1, 2, 4)],
        "WM": _pow2_upto(8, min(128, tile_max_m)),
        "WN": _pow2_upto(8, min(128, tile_max_n)),
        "trans": [1, 0],
        "VEC": vecs,
        "PAD": [0, FV],
        "DB": [1, 0],
        "ST": [0, 2, 3, 4],
        "KG": [g for g in _pow2_upto(1, 256) if g == 1 or k // g >= 64],
        "KL": [kl for kl in (1, 2, 4, 8) if kl == 1 or k // kl >= 16],
        "KR": [0, 1] if k // 2 >= 64 else [0],
        "MMA": [0, 3, 4] if fp32 else [0, dmma.MMA],
    }


def _restrictions(problem: Problem, L: dict):
    def warp_shape(c):
        "a warp is 32 lanes: (WM/TM) * (WN/TN) == 32, fragments of 16 bytes (MMA: WM, WN multiples of 16, 8; wgmma: WM = 64, WN <= 128)"
        if c["MMA"] == 4:
            return c["WM"] == 64 and c["WN"] % 8 == 0 and c["WN"] <= 128
        if c["MMA"]:
            return c["WM"] % 16 == 0 and c["WN"] % 8 == 0
        return (c["TM"] % FV == 0 and c["TN"] % FV == 0 and c["WM"] % c["TM"] == 0
                and c["WN"] % c["TN"] == 0 and (c["WM"] // c["TM"]) * (c["WN"] // c["TN"]) == WARP)

    def block_shape(c):
        "warp tiles divide the block tile"
        return c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0

    def threads_limit(c):
        "threads per block within the device limit"
        return derive(problem, c).threads <= L["max_threads_per_block"]

    def loads_divide(c):
        "every thread issues the same whole number of VEC-wide loads per stage"
        d = derive(problem, c)
        contig_a = c["BM"] if problem.trans_a else d.KT
        contig_b = d.KT if problem.trans_b else c["BN"]
        return ((c["BM"] * d.KT) % (c["VEC"] * d.threads) == 0 and
                (c["BN"] * d.KT) % (c["VEC"] * d.threads) == 0 and
                contig_a % c["VEC"] == 0 and contig_b % c["VEC"] == 0)

    def smem_limit(c):
        "shared memory within the opt-in maximum per block"
        return derive(problem, c).smem_bytes <= L["max_smem_per_block_optin"]

    def regs_limit(c):
        "estimated registers within 255 and within the register file / threads"
        d = derive(problem, c)
        cap = min(L["max_regs_per_thread"], L["regs_per_block"] // d.threads // 8 * 8)
        return d.regs_est <= cap

    def split_k(c):
        "split-K only where the MN grid leaves SMs idle; every K_G split gets work"
        if c["KG"] == 1 and c["KL"] == 1:
            return True
        d = derive(problem, c)
        tiles = d.grid[0] * d.grid[1]
        if tiles >= L["num_sms"]:
            return False
        return c["KG"] <= d.k_units and tiles * c["KG"] <= 8 * L["num_sms"]

    def pipeline(c):
        "the cp.async pipeline (ST > 0) needs sm_80+, DB = 1 and an operand it can copy untransposed"
        return c["ST"] == 0 or (c["DB"] == 1 and cc >= 80 and (c["MMA"] or not all(scatters(problem, c))))

    def tensor_cores(c):
        "MMA = 3, 4 need float32, sm_80+ (MMA = 4: sm_90 exactly), the cp.async pipeline and the canonical TM = TN = PAD = FV, trans = DB = KL = 1"
        return c["MMA"] in (0, dmma.MMA) or (problem.dtype == "float32" and (cc == 90 if c["MMA"] == 4 else cc >= 80) and c["ST"] >= 2
                                 and c["TM"] == FV and c["TN"] == FV and c["PAD"] == FV
                                 and c["trans"] == 1 and c["DB"] == 1 and c["KL"] == 1)

    def reduce_mode(c):
        "the in-launch K_G reduction (KR = 1) needs K_G > 1"
        return c["KR"] == 0 or c["KG"] > 1

    FV = 16 // problem.itemsize
    cc = int(L["arch"].removeprefix("sm_").rstrip("a"))
    lda_c = problem.M if problem.trans_a else problem.K
    ldb_c = problem.K if problem.trans_b else problem.N
    def aligned_rows(c):
        "VEC divides the stored rows of A and B: whole vectors, aligned rows"
        return lda_c % c["VEC"] == 0 and ldb_c % c["VEC"] == 0

    return [
        tensor_cores, dmma.restriction(problem, cc), warp_shape, block_shape, threads_limit, aligned_rows,
        pipeline, loads_divide, smem_limit, regs_limit, split_k, reduce_mode,
    ]


class CUDASpace(Space):
    """A Space whose enumeration walks the knobs in dependency order and
    skips dead branches early (the product is millions of points); the set
    it yields is exactly the valid product, checked by every restriction.
    A config written before a knob existed is read with that knob's old
    meaning (KNOB_DEFAULTS)."""

    def why_invalid(self, cfg):
        return super().why_invalid(complete(cfg if isinstance(cfg, Config) else Config(cfg)))

    def _iter_valid(self):
        K = self.knobs
        sms = self.constants["num_sms"]
        M, N = self.constants["M"], self.constants["N"]
        FV = 16 // self.constants["itemsize"]
        for MMA in K["MMA"]:
            if MMA == 4:   # warpgroups: 64 x WN
                shapes = [(FV, FV, 64, WN) for WN in K["WN"]
                          if 64 in K["WM"] and WN % 8 == 0 and WN <= 128 and FV in K["TM"] and FV in K["TN"]]
            elif MMA:   # the tensor-core kernel: canonical TM, TN; mma-shaped warp tiles
                shapes = [(FV, FV, WM, WN) for WM, WN in itertools.product(K["WM"], K["WN"])
                          if WM % 16 == 0 and WN % 8 == 0 and FV in K["TM"] and FV in K["TN"]]
            else:
                shapes = [(TM, TN, WM, WN) for TM, TN, WM, WN in itertools.product(K["TM"], K["TN"], K["WM"], K["WN"])
                          if not (WM % TM or WN % TN or (WM // TM) * (WN // TN) != WARP)]
            yield from self._iter_shapes(MMA, shapes, K, sms, M, N, FV)

    def _iter_shapes(self, MMA, shapes, K, sms, M, N, FV):
        for TM, TN, WM, WN in shapes:
            for BM, BN in itertools.product(K["BM"], K["BN"]):
                if BM % WM or BN % WN:
                    continue
                few_tiles = -(-M // BM) * -(-N // BN) < sms
                for KL, KG in itertools.product(K["KL"], K["KG"]):
                    if (KL > 1 or KG > 1) and not few_tiles:
                        continue    # split-K only where the MN grid leaves SMs idle
                    if MMA and KL > 1:
                        continue
                    threads = (WARPGROUP if MMA == 4 else WARP) * (BM // WM) * (BN // WN) * KL
                    if threads > self.constants["max_threads_per_block"]:
                        continue
                    fixed = dict(TM=TM, TN=TN, WM=WM, WN=WN, BM=BM, BN=BN, KL=KL, KG=KG, MMA=MMA)
                    others = [n for n in K if n not in fixed]
                    for values in itertools.product(*(K[n] for n in others)):
                        d = dict(fixed)
                        d.update(zip(others, values))
                        if MMA:   # the tensor_cores restriction, before a Config is built
                            if d["ST"] < 2 or d["trans"] != 1 or d["DB"] != 1 or d["PAD"] != FV:
                                continue
                        elif d["ST"] and (not d["DB"] or all(scatters(self.problem, d))):
                            continue    # the pipeline restriction, before a Config is built
                        cfg = Config(d)
                        if all(_safe(f, cfg) for f in self._compiled):
                            yield cfg


def _safe(f, cfg) -> bool:
    try:
        return bool(f(cfg))
    except Exception:
        return False


def make_space(problem: Problem, limits: dict) -> CUDASpace:
    restr = _restrictions(problem, limits)
    consts = {"M": problem.M, "N": problem.N, "K": problem.K, "itemsize": problem.itemsize,
              **{k: v for k, v in limits.items() if isinstance(v, int)}}
    space = CUDASpace(_domains(problem), restr, consts, phases=PHASES)
    space.problem = problem   # the enumeration's early pipeline check reads its layout
    return space
