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
MMA_KS = (16, 4)    # k of one mma.sync, preferred first (see mma_k); (k,) forces k
FV = 2              # doubles per 16-byte fragment: the FFMA-only knobs' canonical value
WARP = 32
REGS_PER_SM = 65536
# Registers of a thread per mma shape k, besides its accumulators (8 per 16 x 8
# fragment): (per row of fragments a warp holds, per cp.async of a stage,
# the rest), fitted to ptxas's counts (sm_90, nvcc 13.0) of every kernel of 32 x 32
# or larger warp tiles that did not spill, so that the estimate covers each
# (scripts/calibrate-dmma-regs; notes/cuda.md, session 10, "The mma shape and
# the register estimate").
# m16n8k8 is never picked (the probe found it slower than k16 or k4 on every
# tile) but keeps its fit for the probe and the calibration.
REGS_BY_K = {16: (0, 3, 84), 8: (4, 3, 67), 4: (1, 2, 78)}
# At most this many cp.async a thread per stage: beyond 16 copies every
# 128-thread config spilled.
MAX_COPIES = 16
# At least this many warps a block: two-warp blocks of 64 x 32 warp tiles
# (16 copies a thread) spilled at 255 registers with either mma shape.
MIN_WARPS = 4
# m16n8k16 only in blocks of at most this many threads: measured at 4096^3 on
# the H200, k16 beat k4 by 5-15% in every 128-thread block and lost by up to
# 18% in 256-thread blocks (notes/cuda.md, session 10).
K16_MAX_THREADS = 128
# DFMA per cycle per SM through DMMA at full efficiency: H100/H200 SXM's
# 67 TFLOP/s FP64 tensor peak at 1.98 GHz on 132 SMs is 128 (the FFMA DGEMM: 64).
FMA_RATE = 128


# Shared-memory rows are padded by this many doubles (space._stage_layout): the
# space's rows (BK a multiple of 16, BM and BN powers of two >= 16) are then 4
# mod 16 doubles (8 mod 32 words), and a warp's fragment read (8 rows x 4 k, or
# 4 k x 8 columns, 8 bytes a lane) touches each 8-byte bank pair exactly twice.
ROW_PAD = 4


def regs_estimate(WM: int, WN: int, mma_k: int, copies: int) -> int:
    """Registers of a thread with mma shape k: its accumulators (four doubles
    a fragment) and REGS_BY_K's fit for the rest."""
    mi, ni = WM // 16, WN // 8
    per_row, per_copy, rest = REGS_BY_K[mma_k]
    return 8 * mi * ni + per_row * mi + per_copy * copies + rest


def reg_cap(threads: int) -> int:
    """The registers a thread of a `threads`-thread block may have (one block per SM)."""
    return min(255, REGS_PER_SM // threads)


def mma_k(WM: int, WN: int, threads: int, copies: int, extra: int = 0) -> int:
    """The mma shape's k: 16 (a quarter of the instructions of k = 4) in
    blocks of at most K16_MAX_THREADS where its registers (and `extra`, a
    batch's) fit what a thread may have, else 4. With one shape in MMA_KS,
    that one (the probe and the calibration force shapes so)."""
    cap = reg_cap(threads)
    for k in MMA_KS[:-1]:
        if regs_estimate(WM, WN, k, copies) + extra <= cap and (k != 16 or threads <= K16_MAX_THREADS):
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
