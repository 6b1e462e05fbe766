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
           the FP64 tensor cores (DMMA mma.sync .f64, m16n8k8 or k4, sm_90+;
           shaders/cuda/gemm_dmma.cu, dmma.py): like MMA = 3 below, with
           k-steps of 16 and blocks of at least 4 warps; 3: float32 from
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
  AR       wgmma's A operand (MMA = 4 only): 0 from the split in shared
           memory; 1 from registers: each warp loads its rows of A from the
           stored stage and splits them in registers, one stage ahead, so only
           B is split into shared memory (less shared-memory traffic, 2 * BK
           more registers)
  PS       pre-split operands (MMA = 4 only, AR = 0, KG = 1, one product): a
           first kernel splits A and B once into big/small halves and packs
           them tile by tile in the wgmma's shared-memory layout (zero-padded
           to whole tiles); the GEMM copies each stage as two bulk
           asynchronous copies (cp.async.bulk, TMA) counted on an mbarrier,
           so its warps neither load, split nor store operands
           (shaders/cuda/gemm_wgmma_ps.cu); ST stages of packed halves;
           VEC keeps the canonical 1 (the pack kernel reads any alignment).
           PS = 1 adds each stage's sum to the float32 accumulators (a
           chain of 3 * BK/8 truncating tensor-core sums, as MMA = 4); PS = 2
           adds it once every two stages (chains twice as long, half the
           drains of the tensor pipe)
  SK       stream-K (the tensor-core kernels, KG = 1, one product): 0 = one
           block a tile; 1 or 2 = a persistent grid of SK blocks a streaming
           multiprocessor that share the output's tiles x k tiles evenly, a
           block crossing tile boundaries; a tile split between blocks is
           summed in the same launch by the last of them to finish, in block
           order (streamk.py, shaders/cuda/streamk_*.cu): every SM busy when
           the tiles do not fill whole waves

Pruning (Li-Dongarra style, before any compile): tiles no larger than the
problem needs (powers of two, plus N rounded up to 8 where N is under 128: a
tensor-core tile then covers a narrow N without computing up to 2x padding), split-K only where the MN grid cannot fill the GPU, and the
device limits read at run time (threads, opt-in shared memory, registers).

A batch (Problem.batch > 1: that many products of one shape in one launch)
stacks the products' M tiles along the grid's y axis; it changes no knob's
meaning, only the grid and the register estimate (BATCH_REGS).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

from ...core.config import Config
from ...core.problem import Problem
from ...core.space import PhasePlan, Space
from . import dmma

WARP = 32
WARPGROUP = 128
# Registers a thread needs besides its tiles (indices, pointers, loop state);
# calibrated against ptxas -v on sm_90 (see tests/test_cuda_codegen.py).
REG_OVERHEAD = 40
# The mma.sync kernel's (MMA = 3): loop state and the mma temporaries in
# flight, plus per cp.async of a stage its hoisted address and what ptxas
# prefetches. Calibrated against ptxas on sm_90 to reject every config that
# spilled (notes/cuda.md, "register estimate"); conservative, since ptxas
# takes all 255 registers where the block size allows.
MMA_REG_OVERHEAD = 48
MMA_REGS_PER_COPY = 10.5
# The wgmma kernel (MMA = 4): two WN/2-register accumulator sets (the sums and
# the stage's temporary) plus this much (calibrated against ptxas, sm_90a,
# see tests/test_cuda_codegen.py).
WGMMA_REG_OVERHEAD = 40
WGMMA_REGS_PER_COPY = 2
# A batch keeps its product's index and the operands' moved base pointers
# live in every thread: ptxas used -18..+6 registers against the same config
# of one product, and one FFMA config at the register cap spilled (notes/cuda.md,
# "batched registers"); so every kernel's batched configs are estimated this
# many registers higher.
BATCH_REGS = 16
# Knobs added after results were first stored, with the value that reproduces
# the kernel as it was: configs written before the knob existed stay valid.
KNOB_DEFAULTS = {"ST": 0, "MMA": 0, "AR": 0, "PS": 0, "SK": 0}
# Stream-K's loop state (the unit range, the segment) and the epilogue's two
# destinations: ptxas (nvcc 13.0, sm_90/sm_90a) gave the tensor-core kernels
# -6..+18 registers over the same config without it on 88 sampled configs (a
# few wgmma tiles with A in shared memory, far below the cap, up to +32), the
# wgmma kernel with A from registers +1..+12 (notes/cuda.md, session 12).
SK_REGS = 16
SK_REGS_AR = 12
# Shared memory of one SM (sm_90: 228 KB), where the device does not say.
SMEM_PER_SM = 233472


def complete(c):
    """`c` with every knob added since it was written set to its old meaning."""
    missing = {k: v for k, v in KNOB_DEFAULTS.items() if k not in c}
    if not missing:
        return c
    if isinstance(c, Config):
        return Config({**c, **missing})
    return {**c, **missing}


# The phased order: block tile, then thread and warp tile, then the stage
# depth, then the memory-path knobs, then split-K.
PHASES = PhasePlan(groups=(("MMA", "BM", "BN"), ("TM", "TN", "WM", "WN"), ("BK",),
                           ("VEC", "DB", "ST", "PAD", "trans", "AR", "PS"), ("KG", "KL", "KR", "SK")))


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
    (a NamedTuple: cheap to build)."""
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
    k_units: int       # K in grains of kgran elements (the kernel's split unit)
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
    return _scatters(problem, c["trans"])


def _scatters(problem: Problem, trans) -> tuple[bool, bool]:
    return bool(trans) != bool(problem.trans_a), bool(problem.trans_b)


# --- the derived quantities, each computed in one place (derive() and the
# restrictions both call these) ------------------------------------------------

def _threads(MMA, BM, BN, WM, WN, KL) -> tuple[int, int, int]:
    """(warps_m, warps_n, threads): a warpgroup-MMA block is BM/64 x BN/WN
    warpgroups, the others BM/WM x BN/WN warps, the FFMA kernel's times KL."""
    if MMA == 4:
        wm, wn = BM // 64, BN // WN
        return wm, wn, WARPGROUP * wm * wn
    wm, wn = BM // WM, BN // WN
    return wm, wn, WARP * wm * wn * (1 if MMA else KL)


def _k_per_stage(MMA, BK, KL) -> int:
    return BK if MMA else BK * KL


def _loads(BM, BN, KT, VEC, threads) -> tuple[int, int]:
    """VEC-wide copies per thread per stage; the tensor-core kernels' last one
    may be partial (mma_copy.cu skips what lies past the stage)."""
    return -(-(BM * KT) // (VEC * threads)), -(-(BN * KT) // (VEC * threads))


_MN_PADS = {dmma.MMA: dmma.ROW_PAD, 3: 8, 4: 0}


def _stage_layout(problem: Problem, MMA, BM, BN, KT, trans, PAD, AR) -> tuple[int, int, int, int]:
    """(lda_s, ldb_s, stage_a, stage_b): shared-memory row lengths and elements
    per stage.  The tensor-core kernels keep the stored orientation; a
    k-contiguous row is padded by 4 elements, an m/n-contiguous one by 8
    (mma.sync float32: conflict-free fragment reads), 4 (DMMA: every row is
    then 4 mod 16 doubles, dmma.ROW_PAD) or not at all (wgmma: the split reads
    rows; but A by 8 where its fragments are read from it, AR = 1, for the same
    reason as mma.sync's).  The FFMA kernel stores B k-major and A k-major when trans, padded
    by PAD."""
    if MMA:
        pad_mn = _MN_PADS[MMA]
        if problem.trans_a:
            pad_a = 8 if AR else pad_mn
            lda_s, stage_a = BM + pad_a, KT * (BM + pad_a)
        else:
            lda_s, stage_a = KT + 4, BM * (KT + 4)
        if problem.trans_b:
            ldb_s, stage_b = KT + 4, BN * (KT + 4)
        else:
            ldb_s, stage_b = BN + pad_mn, KT * (BN + pad_mn)
        return lda_s, ldb_s, stage_a, stage_b
    if trans:
        lda_s, stage_a = BM + PAD, KT * (BM + PAD)
    else:
        lda_s, stage_a = KT + PAD, BM * (KT + PAD)
    ldb_s = BN + PAD
    return lda_s, ldb_s, stage_a, KT * ldb_s


def _smem(problem: Problem, MMA, BM, BN, KT, KL, ST, DB, KR, stage_a, stage_b, AR, PS, SK=0) -> int:
    """Shared-memory bytes: the stages (ST, else 2 with DB, else 1), the wgmma
    kernel's two split buffers (of B only with AR), the K_L reduction's buffer,
    KR's or SK's 16-byte flag; with pre-split operands (PS) ST packed stages of
    both halves of A and B and an 8-byte mbarrier each."""
    flag = 16 if KR or SK else 0
    if MMA == 4 and PS:
        return ST * (2 * (BM + BN) * KT * 4 + 8) + flag
    if MMA == 4:
        split = 2 * 2 * ((0 if AR else BM) + BN) * KT
        return (ST * (stage_a + stage_b) + split) * 4 + flag
    if MMA:
        return ST * (stage_a + stage_b) * problem.itemsize + flag
    stages = ST or (2 if DB else 1)
    tile_bytes = stages * (stage_a + stage_b) * problem.itemsize
    red_bytes = (KL - 1) * BM * BN * problem.itemsize
    return max(tile_bytes, red_bytes) + flag


def _regs(problem: Problem, MMA, TM, TN, WM, WN, VEC, ST, trans, KL, threads, loads_a,
          loads_b, BK, AR, PS, SK=0) -> int:
    """Estimated registers per thread (each kernel's estimate, calibrated against
    ptxas), BATCH_REGS more in a batch, SK_REGS more with stream-K."""
    extra = extra_regs(problem, SK, AR)
    if MMA == dmma.MMA:     # its mma shape depends on the registers left
        return dmma.regs(WM, WN, BK, threads, loads_a + loads_b, extra)
    if MMA == 4 and PS:     # no copies in the threads: the sums, the temporary, loop state
        return WN + WGMMA_REG_OVERHEAD + extra
    regs = _product_regs(problem, MMA, TM, TN, WM, WN, VEC, ST, trans, KL, loads_a, loads_b)
    if AR:   # two stages of A fragments, big and small (BK / 8 k-steps x 4 x 2, twice), less what ptxas overlaps, plus addresses
        regs += 16 + 3 * BK // 2
    return regs + extra


def batch_regs(problem: Problem) -> int:
    return BATCH_REGS if problem.batch > 1 else 0


def extra_regs(problem: Problem, SK, AR=0) -> int:
    """Registers a kernel of the problem holds besides its own estimate: a batch's
    (BATCH_REGS) and stream-K's loop state (SK_REGS; SK_REGS_AR with A from registers)."""
    return batch_regs(problem) + ((SK_REGS_AR if AR else SK_REGS) if SK else 0)


def _product_regs(problem: Problem, MMA, TM, TN, WM, WN, VEC, ST, trans, KL, loads_a,
                  loads_b) -> int:
    if MMA == 4:
        return WN + WGMMA_REG_OVERHEAD + WGMMA_REGS_PER_COPY * (loads_a + loads_b)
    if MMA:
        # accumulators + A's big/small fragments of one k-step + one B column's,
        # and per cp.async of a stage its hoisted address and what ptxas prefetches
        mi, ni = WM // 16, WN // 8
        return (4 * mi * ni + 8 * mi + 4 + MMA_REG_OVERHEAD
                + int((loads_a + loads_b) * MMA_REGS_PER_COPY))
    w = problem.itemsize // 4
    # cp.async copies need no staging registers
    scatter_a, scatter_b = _scatters(problem, trans) if ST else (True, True)
    staged = (loads_a * scatter_a + loads_b * scatter_b) * VEC
    regs = w * (TM * TN + TM + TN + staged) + REG_OVERHEAD
    # The K_L epilogue and KL x more loads cost ~40 more, scalar loads an
    # address register each, and float64 10-30 more than the words suggest
    # (each calibrated against ptxas: notes/cuda.md, "register estimate").
    regs += (40 if KL > 1 else 0) + (loads_a + loads_b if VEC == 1 and not ST else 0)
    return regs + (24 if w == 2 else 0)


def block_tiles(problem: Problem, BM: int, BN: int) -> int:
    """Blocks of C the grid has before split-K: N tiles x M tiles x the batch."""
    return -(-problem.N // BN) * -(-problem.M // BM) * problem.batch


def _k_units(problem: Problem) -> tuple[int, int]:
    """(kgran, units): K_G splits K on a 32-byte grain, balanced to one grain
    (split z takes grains [z * units / KG, (z + 1) * units / KG)), so every
    split gets work for any KG up to the number of grains."""
    kgran = 32 // problem.itemsize
    return kgran, -(-problem.K // kgran)


def _derive(problem: Problem, c) -> Derived:
    c = {**KNOB_DEFAULTS, **(c.to_dict() if isinstance(c, Config) else c)}   # ~40 knob reads below
    MMA, BM, BN, KL = c["MMA"], c["BM"], c["BN"], c["KL"]
    warps_m, warps_n, threads = _threads(MMA, BM, BN, c["WM"], c["WN"], KL)
    KT = _k_per_stage(MMA, c["BK"], KL)
    loads_a, loads_b = _loads(BM, BN, KT, c["VEC"], threads)
    lda_s, ldb_s, stage_a, stage_b = _stage_layout(problem, MMA, BM, BN, KT, c["trans"], c["PAD"], c["AR"])
    smem = _smem(problem, MMA, BM, BN, KT, KL, c["ST"], c["DB"], c.get("KR", 0), stage_a, stage_b, c["AR"], c["PS"],
                 c["SK"])
    regs = _regs(problem, MMA, c["TM"], c["TN"], c["WM"], c["WN"], c["VEC"], c["ST"], c["trans"],
                 KL, threads, loads_a, loads_b, c["BK"], c["AR"], c["PS"], c["SK"])
    kgran, units = _k_units(problem)
    k_chunk = min(problem.K, kgran * -(-units // c["KG"]))
    grid = (-(-problem.N // BN), -(-problem.M // BM) * problem.batch, c["KG"])   # block_tiles x KG
    FV = 16 // problem.itemsize
    if MMA:   # no K_L
        return Derived(FV, 0, 0, warps_m, warps_n, threads, threads, KT, loads_a, loads_b,
                       lda_s, ldb_s, stage_a, stage_b, smem, regs, k_chunk, units, kgran, grid)
    return Derived(FV, c["WM"] // c["TM"], c["WN"] // c["TN"], warps_m, warps_n, threads // KL,
                   threads, KT, loads_a, loads_b, lda_s, ldb_s, stage_a, stage_b, smem, regs,
                   k_chunk, units, kgran, grid)


def _thirds(problem: Problem) -> tuple[list[int], list[int]]:
    """The tile sizes of dmma.THIRD_TILES the problem's M and N need (below the
    power of two that covers them), each a list; none for float32."""
    if problem.dtype == "float32":
        return [], []
    return ([t for t in dmma.THIRD_TILES if t < _next_pow2(problem.M)],
            [t for t in dmma.THIRD_TILES if t < _next_pow2(problem.N)])


def _narrow_n(problem: Problem) -> list[int]:
    """A narrow N's own tile (not a power of two, N under 128): N rounded up to 8, the
    tensor-core kernels' fragments being 8 wide; [] for any other N."""
    n8 = -(-problem.N // 8) * 8
    return [n8] if 16 < problem.N < 128 and n8 & (n8 - 1) else []


def _domains(problem: Problem) -> dict:
    fp32 = problem.dtype == "float32"
    FV = 16 // problem.itemsize
    # 32 rows at least: with M and N <= 16 no float32 FFMA warp fits 16 x 16
    # (32 lanes of >= 4 x 4 outputs)
    tile_max_m = max(32, min(256, _next_pow2(problem.M)))
    tile_max_n = max(16, min(256, _next_pow2(problem.N)))
    k = max(problem.K, 1)
    # a narrow N also gets a tile of exactly N rounded up to 8 (_narrow_n)
    narrow = _narrow_n(problem)
    # the DMMA kernel's tiles of 48 and 96 (the rule dmma_thirds keeps them there)
    thirds_m, thirds_n = _thirds(problem)
    warp_m, warp_n = [t for t in thirds_m if t < 96], [t for t in thirds_n if t < 96]
    return {
        "BM": sorted(_pow2_upto(16, tile_max_m) + thirds_m),
        "BN": list(dict.fromkeys(sorted(_pow2_upto(16, tile_max_n) + thirds_n) + narrow)),
        "BK": [b for b in (8, 16, 32) if b == 8 or b <= _next_pow2(k)],
        "TM": [t * FV for t in (1, 2, 4)],
        "TN": [t * FV for t in (1, 2, 4)],
        "WM": sorted(_pow2_upto(8, min(128, tile_max_m)) + warp_m),
        "WN": list(dict.fromkeys(sorted(_pow2_upto(8, min(128, tile_max_n)) + warp_n) + narrow)),
        # the usually fastest value first: ties in the cost model, and the first
        # valid point, pick it
        "trans": [1, 0],
        "VEC": [4, 2, 1] if fp32 else [2, 1],     # aligned_rows says which fit the problem
        "PAD": [FV, 0],
        "DB": [1, 0],
        "ST": [3, 2, 4, 0],
        "KG": [g for g in _pow2_upto(1, 256) if g == 1 or k // g >= 64],
        "KL": [kl for kl in (1, 2, 4, 8) if kl == 1 or k // kl >= 16],
        "KR": [0, 1] if k // 2 >= 64 else [0],
        "MMA": [0, 3, 4] if fp32 else [0, dmma.MMA],
        "AR": [1, 0] if fp32 else [0],
        "PS": [2, 1, 0] if fp32 and problem.batch == 1 else [0],
        "SK": [0, 1, 2] if problem.batch == 1 else [0],
    }


def _restrictions(problem: Problem, L: dict) -> list:
    """Every rule of the space, once.  Each is a function of the knobs it names
    (pyATF style), so the enumeration checks it as soon as they are bound."""
    FV = 16 // problem.itemsize
    cc = int(L["arch"].removeprefix("sm_").rstrip("a"))
    lda_c = problem.M if problem.trans_a else problem.K
    ldb_c = problem.K if problem.trans_b else problem.N
    kgran, k_units = _k_units(problem)
    sms = L["num_sms"]
    smem_sm = L.get("max_smem_per_sm", SMEM_PER_SM)

    def tensor_core_arch(MMA):
        "MMA = 3, 4 need float32 and sm_80+ (MMA = 4: sm_90 exactly); MMA = 1 float64 and sm_90+"
        if MMA == dmma.MMA:
            return problem.dtype == "float64" and cc >= 90
        return MMA == 0 or (problem.dtype == "float32" and (cc == 90 if MMA == 4 else cc >= 80))

    def register_operand(MMA, AR):
        "A from registers (AR = 1) only in the wgmma kernel (MMA = 4)"
        return AR == 0 or MMA == 4

    def presplit(MMA, PS, AR, VEC, KG):
        "pre-split operands (PS > 0) only in the wgmma kernel (MMA = 4) with A from shared memory (AR = 0), VEC = 1 and no split-K (KG = 1)"
        return PS == 0 or (MMA == 4 and AR == 0 and VEC == 1 and KG == 1)

    def tensor_core_tiles(MMA, TM, TN):
        "the tensor-core kernels (MMA > 0) take the canonical TM = TN = FV"
        return MMA == 0 or (TM == FV and TN == FV)

    def tensor_core_copies(MMA, ST, DB):
        "the tensor-core kernels (MMA > 0) copy by the cp.async pipeline: ST >= 2, DB = 1"
        return MMA == 0 or (ST >= 2 and DB == 1)

    def tensor_core_layout(MMA, trans, PAD, KL):
        "the tensor-core kernels (MMA > 0) take the canonical trans = 1, PAD = FV and no K_L (KL = 1)"
        return MMA == 0 or (trans == 1 and PAD == FV and KL == 1)

    def warp_shape(MMA, TM, TN, WM, WN):
        "a warp is 32 lanes: (WM/TM) * (WN/TN) == 32, fragments of 16 bytes (MMA: WM, WN multiples of 16, 8; wgmma: WM = 64, WN <= 128)"
        if MMA == 4:
            return WM == 64 and WN % 8 == 0 and WN <= 128
        if MMA:
            return WM % 16 == 0 and WN % 8 == 0
        return (TM % FV == 0 and TN % FV == 0 and WM % TM == 0 and WN % TN == 0
                and (WM // TM) * (WN // TN) == WARP)

    def dmma_shape(MMA, BM, BN, BK, WM, WN, VEC):
        "the DMMA kernel (MMA = 1) takes k-steps of 16 (BK a multiple of 16), blocks of at least 4 warps and at most 16 copies a thread per stage"
        if MMA != dmma.MMA:
            return True
        threads = _threads(MMA, BM, BN, WM, WN, 1)[2]
        loads_a, loads_b = _loads(BM, BN, BK, VEC, threads)
        return (BK % 16 == 0 and threads >= dmma.MIN_WARPS * WARP
                and loads_a + loads_b <= dmma.MAX_COPIES)

    # a value of both THIRD_TILES and the narrow N tile stays every kernel's on N
    thirds_m, thirds_n = set(dmma.THIRD_TILES), set(dmma.THIRD_TILES) - set(_narrow_n(problem))

    def dmma_thirds(MMA, BM, BN, WM, WN):
        "tiles of 48 and 96 (dmma.THIRD_TILES) only in the DMMA kernel (MMA = 1), besides a narrow N's"
        return MMA == dmma.MMA or not (BM in thirds_m or WM in thirds_m or BN in thirds_n or WN in thirds_n)

    def block_shape(BM, BN, WM, WN):
        "warp tiles divide the block tile"
        return BM % WM == 0 and BN % WN == 0

    def threads_limit(MMA, BM, BN, WM, WN, KL):
        "threads per block within the device limit"
        return _threads(MMA, BM, BN, WM, WN, KL)[2] <= L["max_threads_per_block"]

    def aligned_rows(VEC):
        "VEC divides the stored rows of A and B: whole vectors, aligned rows"
        return lda_c % VEC == 0 and ldb_c % VEC == 0

    def loads_divide(MMA, BM, BN, BK, KL, VEC, WM, WN):
        "VEC divides the stored rows of a stage; the FFMA kernel's threads issue the same whole number of loads"
        threads = _threads(MMA, BM, BN, WM, WN, KL)[2]
        KT = _k_per_stage(MMA, BK, KL)
        contig_a = BM if problem.trans_a else KT
        contig_b = KT if problem.trans_b else BN
        return ((MMA or ((BM * KT) % (VEC * threads) == 0 and (BN * KT) % (VEC * threads) == 0))
                and contig_a % VEC == 0 and contig_b % VEC == 0)

    def pipeline(MMA, ST, DB, trans):
        "the cp.async pipeline (ST > 0) needs sm_80+, DB = 1 and an operand it can copy untransposed"
        return ST == 0 or (DB == 1 and cc >= 80 and (MMA or not all(_scatters(problem, trans))))

    def smem_limit(MMA, BM, BN, BK, KL, trans, PAD, ST, DB, KR, AR, PS, SK):
        "shared memory within the opt-in maximum per block, and SK blocks within an SM's (stream-K)"
        KT = _k_per_stage(MMA, BK, KL)
        _, _, stage_a, stage_b = _stage_layout(problem, MMA, BM, BN, KT, trans, PAD, AR)
        smem = _smem(problem, MMA, BM, BN, KT, KL, ST, DB, KR, stage_a, stage_b, AR, PS, SK)
        return smem <= L["max_smem_per_block_optin"] and (SK < 2 or SK * smem <= smem_sm)

    def regs_limit(MMA, BM, BN, BK, TM, TN, WM, WN, KL, VEC, ST, trans, AR, PS, SK):
        "estimated registers within 255 and within the register file / threads (of SK blocks with stream-K)"
        threads = _threads(MMA, BM, BN, WM, WN, KL)[2]
        loads_a, loads_b = _loads(BM, BN, _k_per_stage(MMA, BK, KL), VEC, threads)
        regs = _regs(problem, MMA, TM, TN, WM, WN, VEC, ST, trans, KL, threads, loads_a, loads_b, BK, AR, PS, SK)
        blocks = max(1, SK)
        return (regs <= min(L["max_regs_per_thread"], L["regs_per_block"] // (blocks * threads) // 8 * 8)
                and blocks * threads <= L.get("max_threads_per_sm", 2048))

    def split_k(KG, KL, BM, BN):
        "split-K only where the MN grid leaves SMs idle; every K_G split gets work; at most 8 waves"
        if KG == 1 and KL == 1:
            return True
        tiles = block_tiles(problem, BM, BN)
        return tiles < sms and KG <= k_units and tiles * KG <= 8 * sms

    def reduce_mode(KR, KG):
        "the in-launch K_G reduction (KR = 1) needs K_G > 1"
        return KR == 0 or KG > 1

    def stream_k(MMA, SK, KG, BM, BN, BK):
        "stream-K (SK > 0) only in the tensor-core kernels (MMA > 0), without K_G (KG = 1), for one product, where one block a tile would leave a wave of SK blocks an SM part-empty and there are more work units (tiles x k tiles) than blocks"
        if SK == 0:
            return True
        tiles = block_tiles(problem, BM, BN)
        units = tiles * -(-problem.K // BK)
        return (MMA != 0 and KG == 1 and problem.batch == 1 and tiles % (SK * sms) != 0
                and units >= SK * sms)

    # why_invalid checks them in this order: the cheap ones that reject most first
    # (dmma_thirds only where the domains hold such tiles: a float32 space's rules,
    # and so its searches' repairs, stay as they were)
    return [
        aligned_rows, tensor_core_arch, register_operand, presplit, tensor_core_tiles, tensor_core_copies, tensor_core_layout,
        warp_shape, *([dmma_thirds] if any(_thirds(problem)) else []), block_shape, dmma_shape, threads_limit,
        pipeline, loads_divide, stream_k, smem_limit, regs_limit, split_k, reduce_mode,
    ]


class CUDASpace(Space):
    """The CUDA GEMM space.  A config written before a knob existed is read
    with that knob's old meaning (KNOB_DEFAULTS)."""

    def why_invalid(self, cfg):
        return super().why_invalid(complete(cfg if isinstance(cfg, Config) else Config(cfg)))

    def admits(self, values: dict) -> bool:
        return super().admits(complete(values))


def make_space(problem: Problem, limits: dict) -> CUDASpace:
    consts = {"M": problem.M, "N": problem.N, "K": problem.K, "itemsize": problem.itemsize,
              **{k: v for k, v in limits.items() if isinstance(v, int)}}
    return CUDASpace(_domains(problem), _restrictions(problem, limits), consts, phases=PHASES)
