"""The GL backend's analytical cost model and roofline: what a config costs, in time.

The compute family (compute_layout.py) is modelled the way the CUDA backend's SIMT
kernels are: FMA work on the busiest compute unit at an efficiency set by the
invocation's register tile and the workgroups resident on a unit, against the
bytes the grid moves (operands once per tile row or column, C, a split's
workspace), plus a dispatch per pass and per reduce.  Residency is the fewest of
what registers, shared memory, invocations and the hardware's workgroup slots
allow.  The fragment family is modelled by its roofline (fetch or ALU bound,
roofline/model.py) at the rates NVIDIA's Hopper gives fragment shaders, which run
on a few of its units, so that one ranking covers both families; on a software
renderer fragment shaders run faster than compute shaders (measured on llvmpipe),
and the fragment rates are scaled for it.

Every constant below is a measurement on the H200 through NVIDIA's GL driver
(notes/gl.md, "The compute family's cost model"); on other devices the model still
ranks by the same quantities, which is what the model strategy needs.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ...problem import Problem
from .compute_layout import ComputeLayout

# A compute unit (an NVIDIA SM): FMA lanes, 32-bit registers, workgroup slots,
# invocations, and the clock the model's cycles are counted in.
LANES = 128
REGISTERS = 65536
WORKGROUP_SLOTS = 32
INVOCATIONS = 2048
CLOCK_HZ = 1.98e9
# Shared memory a unit gives resident workgroups, in multiples of the most one
# workgroup may ask for (48 KB on NVIDIA's GL driver; 64 x 64 tiles of 9.5 KB ran 16
# workgroups a unit on the H200).
SHARED_PER_UNIT = 4
# Bytes a cycle the grid's operands stream at (most re-reads hit L2): ~8 TB/s.
BYTES_PER_CYCLE = 4000.0
DISPATCH_CYCLES = 10_000     # a dispatch's fixed cost (~5 us)
# Efficiency of the FMA pipes: the share a workgroup's invocations keep busy, by the
# FMAs an invocation does per shared-memory word it reads (register reuse), and by
# the warps a unit holds (latency hiding): the H200's 8 x 8 tiles at 16 warps a unit
# ran 0.45-0.48 of the FMA peak, at 8 warps 0.35; 4 x 4 at 32 warps 0.43.
FULL_REUSE = 16.0            # FMAs per shared word at which reuse stops limiting
WARPS_FOR_LATENCY = 16       # warps a unit needs to hide a stage's latency without db
PEAK_SHARE = 0.55            # the best share measured kernels approach
# Fragment rates relative to the compute FMA peak, on the H200 (fragment FMA peak 1.94
# TFLOP/s, 31.7 G fetches/s, 25.3 G storage-buffer loads/s against 62.3 TFLOP/s); on a
# software renderer fragment shaders ran 1.7x the compute family's best (llvmpipe).
FRAGMENT_FMA_SHARE = 1.94 / 62.3
FRAGMENT_FETCH_PER_FLOP = 31.7 / 62.3e3       # G fetches per GFLOP of compute peak
FRAGMENT_LOAD_PER_FLOP = 25.3 / 62.3e3
SOFTWARE_FRAGMENT_GAIN = 1.7 / FRAGMENT_FMA_SHARE


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
    reuse = min(1.0, (L.tm * L.tn / words) / FULL_REUSE)
    warps = resident * L.threads / 32
    hide = min(1.0, warps / (WARPS_FOR_LATENCY / (2 if L.db else 1)))
    return PEAK_SHARE * reuse * (0.5 + 0.5 * hide)


def compute_cycles(problem: Problem, config: Mapping, limits: Mapping) -> float:
    """Predicted cycles of one call of a compute config (taken from the space)."""
    L = ComputeLayout.of(problem, config)
    units = max(1, int(limits.get("compute_units", 1)))
    resident = residency(L, limits)
    waves = math.ceil(L.workgroups / (units * resident))
    kslice = min(L.ksplit, L.pass_k)
    per_workgroup = L.bm * L.bn * kslice / (LANES * efficiency(L, resident) / resident)
    fma = waves * per_workgroup * L.passes
    moved = 4 * L.batch * (L.tiles_n * L.M * L.K + L.tiles_m * L.K * L.N) \
        + 4 * L.c_floats * (2 * L.passes + (3 * L.ks if L.ks > 1 else 0))
    memory = moved / (BYTES_PER_CYCLE * min(1.0, L.workgroups / units))
    dispatches = L.passes * (2 if L.ks > 1 else 1)
    return max(fma, memory) + DISPATCH_CYCLES * dispatches


def fragment_cycles(problem: Problem, config: Mapping, limits: Mapping) -> float:
    """Predicted cycles of a fragment config: its roofline bound at the fragment rates
    relative to the compute peak (the module docstring), plus a draw per pass."""
    from .roofline import gl_config_roofline
    units = max(1, int(limits.get("compute_units", 1)))
    peak = units * LANES * 2 * CLOCK_HZ / 1e9                    # compute GFLOP/s
    scale = SOFTWARE_FRAGMENT_GAIN if limits.get("software_renderer") else 1.0
    rates = {"fragment_fma_gflops": peak * FRAGMENT_FMA_SHARE * scale,
             "fetch_gtexels": peak * FRAGMENT_FETCH_PER_FLOP * scale,
             "ssbo_gloads": peak * FRAGMENT_LOAD_PER_FLOP * scale}
    gflops = gl_config_roofline(config, rates, problem.K)["gflops"]
    np_ = int(config.get("np") or problem.K)
    passes = -(-problem.K // max(1, min(np_, problem.K)))
    return problem.flops / (gflops * 1e9) * CLOCK_HZ + DISPATCH_CYCLES * passes


def predict_ms(problem: Problem, configs: Sequence[Mapping], limits: Mapping) -> list[float]:
    """Predicted milliseconds of each config (a config the model cannot describe: inf)."""
    out = []
    for c in configs:
        try:
            cycles = (compute_cycles if c.get("family") == "compute" else fragment_cycles)(problem, c, limits)
        except (KeyError, ValueError, ZeroDivisionError):
            cycles = math.inf
        out.append(cycles / CLOCK_HZ * 1e3)
    return out
