"""The FP64 tensor-core kernel (MMA = 1, shaders/cuda/gemm_dmma.cu): its
derived launch shape, its restriction, its candidate product and its rate in
the cost model. space.py, tuning.py and codegen.py call these; the FFMA
DGEMM (MMA = 0) stays in the same space.

The kernel: a warp's WM x WN tile is (WM/16) x (WN/8) fragments of
mma.sync m16n8k16 or m16n8k4 .f64 (Hopper, sm_90+: the m16n8 f64 shapes are
PTX ISA 7.8, sm_90; see mma_k); both operands go global -> shared by cp.async in their stored
orientation, ST = 2..4 stages; K_G split-K and both reductions are shared
with the other kernels. The FFMA-only knobs keep one canonical value
(TM = TN = PAD = FV = 2, trans = DB = KL = 1) so the space holds no duplicates.
"""
from __future__ import annotations

import itertools

from ...problem import Problem

MMA = 1             # the knob value
MMA_KS = (16, 4)    # k of one mma.sync, preferred first (see mma_k)
FV = 2              # doubles per 16-byte fragment: the FFMA-only knobs' canonical value
WARP = 32
REGS_PER_SM = 65536
# Registers besides the tiles (indices, pointers, loop state) and per cp.async
# of a stage (its hoisted address), and at most this many cp.async a thread per
# stage: calibrated against ptxas (sm_90, nvcc 13.0, __launch_bounds__(THREADS,
# 1)) on 56 configs x 3 mma shapes (notes/cuda.md, "DMMA registers"). Beyond 16
# copies every 128-thread config spilled.
REG_OVERHEAD = 24
REGS_PER_COPY = 3
MAX_COPIES = 16
# At least this many warps a block: two-warp blocks of 64 x 32 warp tiles
# (16 copies a thread) spilled at 255 registers with either mma shape.
MIN_WARPS = 4
# DFMA per cycle per SM through DMMA at full efficiency: H100/H200 SXM's
# 67 TFLOP/s FP64 tensor peak at 1.98 GHz on 132 SMs is 128 (the FFMA DGEMM: 64).
FMA_RATE = 128


def row_length(n: int) -> int:
    """A shared-memory row of n doubles padded to 4 mod 16 doubles (8 mod 32
    words): a warp's fragment read (8 rows x 4 k, or 4 k x 8 columns, 8 bytes
    a lane) then touches each 8-byte bank pair exactly twice."""
    return n + (4 - n) % 16


def regs_estimate(c: dict, mma_k: int, copies: int) -> int:
    """Registers of a thread: accumulators (4 doubles a fragment), A's
    fragments of one k-step and one column of B's (two registers a double),
    the overhead and the copies' addresses."""
    mi, ni, kv = c["WM"] // 16, c["WN"] // 8, mma_k // 4
    return 8 * mi * ni + 4 * kv * mi + 2 * kv + REG_OVERHEAD + REGS_PER_COPY * copies


def mma_k(c: dict, threads: int, copies: int) -> int:
    """The mma shape's k: 16 (a quarter of the instructions of k = 4) where
    its fragments fit the registers a thread may have, else 4 (A's fragments
    of one step take 4x fewer registers: 512-thread blocks of 32 x 32 warp
    tiles spilled with k = 16 and fit with k = 4)."""
    cap = min(255, REGS_PER_SM // threads)
    for k in MMA_KS:
        if regs_estimate(c, k, copies) <= cap:
            return k
    return MMA_KS[-1]


def derive(problem: Problem, c: dict, derived_type):
    """`derived_type`(...) (space.Derived) of a DMMA config: operands in shared
    memory in their stored orientation; K_G splits on a 4-double (32-byte) grain."""
    warps_m, warps_n = c["BM"] // c["WM"], c["BN"] // c["WN"]
    threads = WARP * warps_m * warps_n
    KT = c["BK"]
    loads_a = (c["BM"] * KT) // (c["VEC"] * threads)
    loads_b = (c["BN"] * KT) // (c["VEC"] * threads)
    if problem.trans_a:
        lda_s = row_length(c["BM"])
        stage_a = KT * lda_s
    else:
        lda_s = row_length(KT)
        stage_a = c["BM"] * lda_s
    if problem.trans_b:
        ldb_s = row_length(KT)
        stage_b = c["BN"] * ldb_s
    else:
        ldb_s = row_length(c["BN"])
        stage_b = KT * ldb_s
    smem = c["ST"] * (stage_a + stage_b) * 8 + (16 if c.get("KR", 0) else 0)
    copies = loads_a + loads_b
    regs = regs_estimate(c, mma_k(c, threads, copies), copies)
    if copies > MAX_COPIES:
        regs = 256   # out: more registers than any thread has
    kgran = 4
    units = -(-problem.K // kgran)
    k_chunk = min(problem.K, kgran * -(-units // c["KG"]))
    grid = (-(-problem.N // c["BN"]), -(-problem.M // c["BM"]) * problem.batch, c["KG"])
    return derived_type(FV, 0, 0, warps_m, warps_n, threads, threads, KT, loads_a, loads_b,
                        lda_s, ldb_s, stage_a, stage_b, smem, regs, k_chunk, units, kgran, grid)


def restriction(problem: Problem, cc: int):
    """The space's rule for MMA = 1, a function of a config."""
    def dmma(c):
        "MMA = 1 (FP64 tensor cores) needs float64, sm_90+, the cp.async pipeline, BK a multiple of 16, at least 4 warps and the canonical TM = TN = PAD = 2, trans = DB = KL = 1"
        return c["MMA"] != MMA or (problem.dtype == "float64" and cc >= 90 and c["ST"] >= 2
                                   and c["BK"] % MMA_KS[0] == 0
                                   and (c["BM"] // c["WM"]) * (c["BN"] // c["WN"]) >= MIN_WARPS
                                   and c["TM"] == FV and c["TN"] == FV and c["PAD"] == FV
                                   and c["trans"] == 1 and c["DB"] == 1 and c["KL"] == 1)
    return dmma


def available(problem: Problem, arch: str) -> bool:
    return problem.dtype == "float64" and int(arch.removeprefix("sm_").rstrip("a")) >= 90


# Warp tiles (WM, WN) in mma fragments of 16 x 8: CUTLASS's sm_90 DGEMM uses
# 64 x 32 (2 x 2 warps of a 128 x 64 block); the rest trade accumulator
# registers against operand reuse.
WARP_TILES = [(64, 32), (32, 64), (32, 32), (64, 16), (32, 16), (16, 32), (16, 16), (64, 64)]


def raw_configs(problem: Problem, limits: dict, tiles, tensor_core_configs):
    """The DMMA kernel's product for the candidate list (tuning.py filters it
    by the space and ranks it by the model): block and warp tiles with 2-16
    warps, BK 16/32, and the split / reduction / vector product that
    `tensor_core_configs` (tuning._tensor_core_configs) gives every
    tensor-core kernel."""
    if not available(problem, limits["arch"]):
        return
    for (BM, BN), (WM, WN) in itertools.product(tiles, WARP_TILES):
        if BM % WM or BN % WN or not 2 <= (BM // WM) * (BN // WN) <= 16:
            continue
        for cfg in tensor_core_configs(problem, limits, MMA, BM, BN, WM, WN, (16, 32)):
            if cfg["VEC"] <= 2:
                yield {**cfg, "TM": FV, "TN": FV, "PAD": FV}


def efficiency(c, warps: int, block_reuse: float) -> float:
    """The model's fraction of FMA_RATE: a warp's fragment reuse (FMAs per
    double read from shared memory), resident warps and the block's reuse."""
    reuse = c["WM"] * c["WN"] / (c["WM"] + c["WN"])
    return min(1.0, reuse / 16.0) * min(1.0, warps / 8.0) * min(1.0, block_reuse / 32.0)


def params(problem: Problem, c: dict, d) -> dict:
    """What gemm_dmma.cu needs beyond the tensor-core kernels' common values
    (`d`: the config's Derived)."""
    return {"MMA_K": mma_k(c, d.threads, d.loads_a + d.loads_b)}
