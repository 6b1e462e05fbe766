"""The FP64 tensor-core kernel (MMA = 1, shaders/cuda/gemm_dmma.cu): its
constants (mma shapes, row padding, register estimate, copy and warp bounds),
its candidate product and its rate in the cost model.  space.py states its
rules and derives its launch shape with the other kernels'; tuning.py and
codegen.py call the rest.  The FFMA DGEMM (MMA = 0) stays in the same space.

The kernel: a warp's WM x WN tile is (WM/16) x (WN/8) fragments of
mma.sync m16n8k8 or m16n8k4 .f64 (Hopper, sm_90+: the m16n8 f64 shapes are
PTX ISA 7.8, sm_90; see mma_k); both operands go global -> shared by cp.async in their stored
orientation, ST = 2..4 stages, and the main loop keeps the next k step's
fragments in flight across the stage boundary (dmma_pipeline.cu, see
pipelined); K_G split-K and both reductions are shared
with the other kernels. The FFMA-only knobs keep one canonical value
(TM = TN = PAD = FV = 2, trans = DB = KL = 1) so the space holds no duplicates.
"""
from __future__ import annotations

import itertools

from ...core.problem import Problem

MMA = 1             # the knob value
MMA_KS = (8, 4)     # k of one mma.sync, preferred first (see mma_k); (k,) forces k
# The main loop with fragments in flight across the stage boundary
# (dmma_pipeline.cu) wherever a stage has an even number of k steps; False
# forces the plain loop (mma_pipeline.cu), which the probe compares.
FRAG_PIPE = True
FV = 2              # doubles per 16-byte fragment: the FFMA-only knobs' canonical value
WARP = 32
REGS_PER_SM = 65536
# Registers of a thread per (mma shape k, pipelined main loop), besides its
# accumulators (8 per 16 x 8 fragment): (per row of fragments a warp holds,
# per column, per cp.async of a stage, the rest). The pipelined loop's row and
# column terms are its two buffers of fragments (k = 8: 2 x 4 doubles of A a
# row, 2 x 2 of B a column); per copy and the rest are set so that ptxas's
# counts (sm_90, nvcc 13.0; scripts/calibrate-dmma-regs) fall under the cap
# exactly where the kernel did not spill, but for a few k = 8 kernels of
# 128 threads at the cap that spill 24-40 bytes (64 x 128 blocks): measured,
# such a kernel still beat k = 4 (notes/cuda.md, session 11); and k = 4 refuses
# 512-thread blocks of 32 x 32 warp tiles (126 registers here, spilled on the
# device with the plain loop, where the device's NVRTC took up to 16 more). The plain
# loop's fits (session 10) cover every non-spilling kernel; they serve the
# probe and the calibration, since the rules (mma_k) pick pipelined shapes.
# k = 16 pipelined (cuBLAS's sm90 DGEMM shape) is the k = 8 fit with its
# fragment buffers doubled (2 x 8 doubles of A a row, 2 x 4 of B a column),
# not yet calibrated: only the probe forces it.
REGS = {(16, True): (32, 16, 1, 19), (8, True): (16, 8, 1, 19), (4, True): (8, 4, 2, 30),
        (16, False): (0, 0, 3, 84), (8, False): (4, 0, 3, 67), (4, False): (1, 0, 2, 78)}
# ... and never fewer than this with the pipelined loop: ptxas's least count
# (one fragment a warp, k = 8: 80 registers); 1024-thread blocks (64 a
# thread) spilled.
PIPE_MIN_REGS = 72
# At most this many cp.async a thread per stage: beyond 16 copies every
# 128-thread config spilled.
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


# The pipelined loop needs at least this many accumulator fragments a warp.
# Across its back edge ptxas (nvcc 13.0, the device's NVRTC 13.2) orders the
# first mma of a stage after the last one of the stage before by stall counts
# alone, without the scoreboard wait it uses elsewhere; with one fragment
# those two mma share the accumulator, and where several blocks share an SM
# the first read a stale one (relative errors 0.1-1.2 at 2048^3, correct at
# 256^3 with one block an SM; notes/cuda.md, session 11). With 4 or more,
# three independent mma lie between any two on one accumulator.
PIPE_MIN_FRAGMENTS = 4


def pipelined(BK: int, mma_k: int, WM: int, WN: int) -> bool:
    """Whether the kernel of stage depth BK, mma shape k and warp tile WM x WN
    runs dmma_pipeline.cu's main loop: it alternates two fragment buffers, so
    a stage must hold an even number of k steps (every BK of the space, a
    multiple of 16, with k = 8 or 4), and a warp must hold
    PIPE_MIN_FRAGMENTS fragments."""
    return FRAG_PIPE and (BK // mma_k) % 2 == 0 and (WM // 16) * (WN // 8) >= PIPE_MIN_FRAGMENTS


def regs_estimate(WM: int, WN: int, mma_k: int, copies: int, pipe: bool = True) -> int:
    """Registers of a thread with mma shape k (pipelined main loop or not):
    its accumulators (four doubles a fragment) and REGS's fit for the rest."""
    mi, ni = WM // 16, WN // 8
    per_row, per_col, per_copy, rest = REGS[mma_k, pipe]
    est = 8 * mi * ni + per_row * mi + per_col * ni + per_copy * copies + rest
    return max(est, PIPE_MIN_REGS) if pipe else est


def reg_cap(threads: int) -> int:
    """The registers a thread of a `threads`-thread block may have (one block per SM)."""
    return min(255, REGS_PER_SM // threads)


def mma_k(WM: int, WN: int, BK: int, threads: int, copies: int, extra: int = 0) -> int:
    """The mma shape's k: the first of MMA_KS whose kernel's registers (and
    `extra`, a batch's) fit what a thread may have, else the last. m16n8k8
    with the pipelined loop, where it fits, beat every other shape and loop
    on every probed tile (notes/cuda.md, session 11); k = 4 holds half the
    fragment registers. With one shape in MMA_KS, that one (the probe and
    the calibration force shapes so)."""
    cap = reg_cap(threads)
    for k in MMA_KS[:-1]:
        if regs_estimate(WM, WN, k, copies, pipelined(BK, k, WM, WN)) + extra <= cap:
            return k
    return MMA_KS[-1]


def regs(WM: int, WN: int, BK: int, threads: int, copies: int, extra: int = 0) -> int:
    """The space's register estimate of a DMMA thread with the mma shape and
    main loop it gets, `extra` included."""
    k = mma_k(WM, WN, BK, threads, copies, extra)
    return regs_estimate(WM, WN, k, copies, pipelined(BK, k, WM, WN)) + extra


def available(problem: Problem, arch: str) -> bool:
    return problem.dtype == "float64" and int(arch.removeprefix("sm_").rstrip("a")) >= 90


# Warp tiles (WM, WN) in mma fragments of 16 x 8: CUTLASS's sm_90 DGEMM uses
# 64 x 32 (2 x 2 warps of a 128 x 64 block); the rest trade accumulator
# registers against operand reuse.
WARP_TILES = [(64, 32), (32, 64), (32, 32), (64, 16), (32, 16), (16, 32), (16, 16), (64, 64),
              (48, 48), (32, 48), (48, 32)]
# Tiles of 48 and 96 (warps of three 16-row or six 8-column fragments): where
# power-of-two tiles leave the last wave of blocks part-empty, as at 1500^3 and
# 1536^3 (576 tiles of 64 x 64 on 132 SMs, 4.4 an SM: the busiest SMs run 5;
# 96 x 96: 256 tiles, 1.9 an SM), such a tile runs whole waves: 1.03-1.06x
# cuBLAS there against 0.87-0.93x for the best power-of-two tile (notes/cuda.md).
# The rows stay 4 mod 16 doubles with ROW_PAD (52, 100). The DMMA kernel's only
# (space.py's rule dmma_thirds): the other kernels were not measured with them.
THIRD_TILES = (48, 96)
THIRD_BLOCKS = [(96, 96), (64, 96), (96, 64), (128, 96), (96, 128), (48, 64), (64, 48)]
# ... in blocks of 2 x 2 warps in the candidate list: 96 x 96 blocks of six 32 x 48
# warps ran 0.80-0.93x cuBLAS where 48 x 48 warps ran 1.02-1.10x (1500^3, 1536^3)
THIRD_WARPS = 4


def raw_configs(problem: Problem, limits: dict, tiles, tensor_core_configs):
    """The DMMA kernel's product for the candidate list (tuning.py filters it
    by the space and ranks it by the model): block and warp tiles with 2-16
    warps, BK 16/32, and the split / reduction / vector product that
    `tensor_core_configs` (tuning._tensor_core_configs) gives every
    tensor-core kernel."""
    if not available(problem, limits["arch"]):
        return
    for (BM, BN), (WM, WN) in itertools.product(list(tiles) + THIRD_BLOCKS, WARP_TILES):
        if BM % WM or BN % WN or not 2 <= (BM // WM) * (BN // WN) <= 16:
            continue
        if (BM, BN) in THIRD_BLOCKS and (BM // WM) * (BN // WN) != THIRD_WARPS:
            continue
        for cfg in tensor_core_configs(problem, limits, MMA, BM, BN, WM, WN, (16, 32)):
            if cfg["VEC"] <= 2:
                yield {**cfg, "TM": FV, "TN": FV, "PAD": FV}


# The model's efficiency of a warp tile: its fragment reuse (FMAs per double
# read from shared memory) over 64 x 32's, the probe's best (21.3); a 32 x 32
# warp (reuse 16) ran 0.75x of it at 4096^3 (notes/cuda.md, session 11).
FULL_REUSE = 64 * 32 / (64 + 32)
# m16n8k4 against k8, both pipelined, on the probe's tiles: 0.88-0.97x.
K4_EFFICIENCY = 0.93
# The reuse term's exponent: a warp tile of lower reuse loses less than in
# proportion where several blocks share an SM. 64 x 64 blocks of 32 x 32 warps
# (reuse 0.75 of 64 x 32's) ran at 0.87-0.88 of 128 x 64 blocks' rate at 1500^3
# and 3000^3 once the waves are counted (0.75 ** 0.5 = 0.87); the exponent was
# chosen on the stores' training problems (notes/cuda.md, session 18).
REUSE_EXPONENT = 0.5
# Resident warps an SM needs for the model's full rate: 4 (one 128 x 64 block of 2 x 2
# warps ran 1000^3 at 47 TFLOP/s, 70% of the H200's FP64 peak, alone on each SM, and two
# such blocks an SM through a K_G split were slower; notes/cuda.md, session 13).
FULL_WARPS = 4


def config_mma_k(c, d, extra: int = 0) -> int:
    """mma_k of config c (d: its space.Derived; `extra`: a batch's registers)."""
    return mma_k(c["WM"], c["WN"], c["BK"], d.threads, d.loads_a + d.loads_b, extra)


def efficiency(c, d, warps: int, block_reuse: float, extra: int = 0) -> float:
    """The model's fraction of FMA_RATE for config c (d: its space.Derived;
    `extra`: a batch's registers): a warp's fragment reuse, its mma shape,
    resident warps and the block's reuse."""
    reuse = c["WM"] * c["WN"] / (c["WM"] + c["WN"])
    shape = 1.0 if config_mma_k(c, d, extra) != 4 else K4_EFFICIENCY
    return min(1.0, reuse / FULL_REUSE) ** REUSE_EXPONENT * shape * min(1.0, warps / FULL_WARPS) * min(1.0, block_reuse / 32.0)


def params(c, d, extra: int) -> dict:
    """What gemm_dmma.cu needs beyond the tensor-core kernels' common values
    (`d`: the config's space.Derived; `extra`: space.batch_regs)."""
    k = config_mma_k(c, d, extra)
    return {"MMA_K": k, "FP": int(pipelined(c["BK"], k, c["WM"], c["WN"]))}
