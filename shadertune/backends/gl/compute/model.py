"""The compute family's analytical cost model: what a compute config costs, in cycles.

The compute family (layout.py) is modelled the way the CUDA backend's SIMT
kernels are: FMA work on the busiest compute unit at an efficiency set by the
invocation's register tile, its shared-memory reads and the workgroups resident
on a unit, against the bytes the grid moves (operands once per tile row or
column through L2, C, a split's workspace or atomics; and from DRAM what a wave
of resident workgroups shares, which the tile walk's strips decide), plus a
dispatch per pass, per reduce and per scale of C.  Residency is the fewest of
what registers, shared memory, invocations and the hardware's workgroup slots
allow.  The cycles are the shared unit's (cost.py), in which the fragment
family's paths are ranked too.

Every constant below is a measurement on the H200 through NVIDIA's GL driver
(notes/gl.md, "The compute family's cost model"); on other devices the model still
ranks by the same quantities, which is what the model strategy needs.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ....core.problem import Problem
from ..cost import DISPATCH_CYCLES, LANES, milliseconds
from .layout import ComputeLayout

# A compute unit (an NVIDIA SM) beside its FMA lanes (cost.py): 32-bit registers,
# workgroup slots and invocations.
REGISTERS = 65536
WORKGROUP_SLOTS = 32
INVOCATIONS = 2048
# Shared memory a unit gives resident workgroups, in multiples of the most one
# workgroup may ask for (48 KB on NVIDIA's GL driver; 64 x 64 tiles of 9.5 KB ran 16
# workgroups a unit on the H200).
SHARED_PER_UNIT = 4
# Bytes a cycle the grid's operands stream at (most re-reads hit L2): ~8 TB/s.
BYTES_PER_CYCLE = 4000.0
# Efficiency of the FMA pipes: the share a workgroup's invocations keep busy, by the
# FMAs an invocation does per shared-memory word it reads (register reuse), and by
# the warps a unit holds (latency hiding): the H200's 8 x 8 tiles at 16 warps a unit
# ran 0.45-0.48 of the FMA peak, at 8 warps 0.35; 4 x 4 at 32 warps 0.43.
FULL_REUSE = 16.0            # FMAs per shared word at which reuse stops limiting
# Past FULL_REUSE fewer shared reads still help, softly: 128 x 128 blocks of 8 x 16 (21.3
# FMAs a word) ran 1.08x the 8 x 8 tile (16) on the H200, both with their latency hidden
# (43.1 against 39.9 TFLOP/s at 4096): (21.3 / 16) ** 0.27.
BEYOND_REUSE = 0.27
WARPS_FOR_LATENCY = 16       # warps a unit needs to hide a stage's latency without db
# Two slabs (db) hide a stage's latency with fewer warps where the compiler issues the
# prefetch ahead of the FMAs, which NVIDIA's does from unchecked loads only (clamp = 1):
# the H200's 128 x 128 8 x 8 tile with db = 1 and clamp at 8 warps a unit ran 0.96-0.99x
# the one-slab tile at 16 (fully hidden: a gain of 2); with checked loads 0.77-0.82x (the
# loads wait before the FMAs or sink below them), which 0.5 + 0.5 * 8 / (16 / 1.28) gives.
DB_LATENCY_GAIN = 1.28
DB_CLAMPED_LATENCY_GAIN = 2.0
PEAK_SHARE = 0.55            # the best share measured kernels approach
# The knobs added after the constants above were measured, at what their
# instruction counts say until a GPU measures them (notes/gl-compute.md):
# - a checked load costs about 4 instructions more than an unchecked one (compare,
#   and, two selects) beside an FMA's one: clamp = 1 issues them only in a partial stage;
CHECK_OPS = 4
# - shuffle = 1 trades A's tm / 4 shared words a k-step for a quarter word and tm
#   32-bit shuffles, a quarter word's worth each of the same pipe: a quarter word more;
SHUFFLE_WORDS = 0.25
# - DRAM: bytes a cycle (H100 SXM, 3.35 TB/s at the clock above; an H200 reads faster).
DRAM_BYTES_PER_CYCLE = 1700.0
L2_BYTES = 50 << 20


def residency(L: ComputeLayout, limits: Mapping) -> int:
    """Workgroups of L resident on one unit at once."""
    regs = -(-L.registers // 8) * 8
    by_regs = REGISTERS // max(1, L.threads * regs)
    shared = int(limits.get("max_compute_shared_bytes", 49152)) * SHARED_PER_UNIT
    by_shared = shared // max(1, L.shared_bytes)
    by_threads = INVOCATIONS // L.threads
    return max(1, min(by_regs, by_shared, by_threads, WORKGROUP_SLOTS))


def efficiency(L: ComputeLayout, resident: int) -> float:
    """The share of the unit's FMA rate L keeps busy (see the constants above)."""
    words = (L.tm + L.tn) / 4                     # shared vec4 words an invocation reads a k-step
    if L.shuffle:
        words += SHUFFLE_WORDS
    ratio = (L.tm * L.tn / words) / FULL_REUSE
    reuse = min(1.0, ratio) * max(1.0, ratio) ** BEYOND_REUSE
    warps = resident * L.threads / 32
    gain = (DB_CLAMPED_LATENCY_GAIN if L.clamp else DB_LATENCY_GAIN) if L.db else 1.0
    hide = min(1.0, warps / (WARPS_FOR_LATENCY / gain))
    share = PEAK_SHARE * reuse * (0.5 + 0.5 * hide)
    if L.clamp:                                   # the checks PEAK_SHARE paid for, gone
        fmas = L.tm * L.tn * L.bk
        share *= (fmas + CHECK_OPS * (L.loads_a + L.loads_b)) / fmas
    return share


def dram_bytes(L: ComputeLayout, wave: int) -> float:
    """Bytes the operands move from DRAM: once where one product's fit in L2; else
    what each wave of `wave` resident workgroups reads together (a wave walks tile
    rows, or with swz > 1 strips of swz rows: its tile rows' slices of A and its tile
    columns' of B), every wave again."""
    per_product = 4 * (L.M * L.K + L.K * L.N)
    if per_product <= L2_BYTES:
        return float(L.batch * per_product)
    wave = max(1, min(wave, L.workgroups))
    if L.swz > 1:
        rows = min(L.swz, L.tiles_m)
        cols = min(L.tiles_n, -(-wave // rows))
    else:
        cols = min(L.tiles_n, wave)
        rows = min(L.tiles_m, -(-wave // L.tiles_n) + 1)   # a wave straddles a row's end
    kslice = min(L.ksplit, L.pass_k)
    return L.passes * math.ceil(L.workgroups / wave) * 4 * kslice * (rows * L.bm + cols * L.bn)


def compute_cycles(problem: Problem, config: Mapping, limits: Mapping) -> float:
    """Predicted cycles of one call of a compute config (taken from the space)."""
    L = ComputeLayout.of(problem, config)
    units = max(1, int(limits.get("compute_units", 1)))
    resident = residency(L, limits)
    waves = math.ceil(L.workgroups / (units * resident))
    kslice = min(L.ksplit, L.pass_k)
    per_workgroup = L.bm * L.bn * kslice / (LANES * efficiency(L, resident) / resident)
    fma = waves * per_workgroup * L.passes
    # C in the GEMM dispatches: read and written each pass, or each split's partial tile
    # (into a workspace, or added with atomics: kred); after them, in a dispatch of its
    # own that nothing overlaps, the reduce (the partials read, C read and written) or,
    # before them, C scaled by beta (kred)
    in_gemm = 4 * L.c_floats * (L.ks if L.ks > 1 else 2 * L.passes)
    serial = 4 * L.c_floats * ((2 if L.kred else L.ks + 2) if L.ks > 1 else 0)
    moved = 4 * L.batch * (L.tiles_n * L.M * L.K + L.tiles_m * L.K * L.N) + in_gemm
    memory = max(moved / (BYTES_PER_CYCLE * min(1.0, L.workgroups / units)),
                 dram_bytes(L, units * resident) / DRAM_BYTES_PER_CYCLE)
    dispatches = L.passes * (2 if L.ks > 1 else 1)
    return max(fma, memory) + serial / BYTES_PER_CYCLE + DISPATCH_CYCLES * dispatches


def compute_ms(problem: Problem, configs: Sequence[Mapping], limits: Mapping) -> list[float]:
    """Predicted milliseconds of each compute config (one the model cannot describe: inf)."""
    return milliseconds(compute_cycles, problem, configs, limits)
