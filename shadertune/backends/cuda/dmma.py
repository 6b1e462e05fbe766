"""The FP64 tensor-core kernel (MMA = 1, shaders/cuda/gemm_dmma.cu): its
constants (mma shapes, row padding, register estimate, copy and warp bounds),
its candidate product and its rate in the cost model.  space.py states its
rules and derives its launch shape with the other kernels'; tuning.py and
codegen.py call the rest.  The FFMA DGEMM (MMA = 0) stays in the same space.

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


# Shared-memory rows are padded by this many doubles (space._stage_layout): the
# space's rows (BK a multiple of 16, BM and BN powers of two >= 16) are then 4
# mod 16 doubles (8 mod 32 words), and a warp's fragment read (8 rows x 4 k, or
# 4 k x 8 columns, 8 bytes a lane) touches each 8-byte bank pair exactly twice.
ROW_PAD = 4


def regs_estimate(WM: int, WN: int, mma_k: int, copies: int) -> int:
    """Registers of a thread: accumulators (4 doubles a fragment), A's
    fragments of one k-step and one column of B's (two registers a double),
    the overhead and the copies' addresses."""
    mi, ni, kv = WM // 16, WN // 8, mma_k // 4
    return 8 * mi * ni + 4 * kv * mi + 2 * kv + REG_OVERHEAD + REGS_PER_COPY * copies


def mma_k(WM: int, WN: int, threads: int, copies: int, extra: int = 0) -> int:
    """The mma shape's k: 16 (a quarter of the instructions of k = 4) where
    its fragments (and `extra` registers, a batch's) fit the registers a thread
    may have, else 4 (A's fragments of one step take 4x fewer registers:
    512-thread blocks of 32 x 32 warp tiles spilled with k = 16 and fit with
    k = 4)."""
    cap = min(255, REGS_PER_SM // threads)
    for k in MMA_KS:
        if regs_estimate(WM, WN, k, copies) + extra <= cap:
            return k
    return MMA_KS[-1]


def regs(WM: int, WN: int, threads: int, copies: int, extra: int = 0) -> int:
    """The space's register estimate of a DMMA thread with the mma shape it
    gets, `extra` included."""
    return regs_estimate(WM, WN, mma_k(WM, WN, threads, copies, extra), copies) + extra


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


def params(c, d, extra: int) -> dict:
    """What gemm_dmma.cu needs beyond the tensor-core kernels' common values
    (`d`: the config's space.Derived; `extra`: space.batch_regs)."""
    return {"MMA_K": mma_k(c["WM"], c["WN"], d.threads, d.loads_a + d.loads_b, extra)}
