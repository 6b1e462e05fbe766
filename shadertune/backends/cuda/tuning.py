"""The CUDA cost model and a focused candidate list per problem.

model_cycles is the backend's cost model (Backend.predict_ms; the model
strategy ranks the space by it): FMA work on the busiest SM at an efficiency
set by the register tile's reuse and the warps resident, against the bytes
moved (including split-K's workspace), plus launch and per-stage overheads.

candidates() is a short list from a small product of shapes known to work,
filtered by the space (so every one is valid) and ranked by the model; its
first config is default_config (what matmul uses untuned) and every search's
start point.  For a problem timed as calls (its device-time pick under the
backend's CALL_TIMED_MS) the list is ranked by call_cycles: the device cycles
plus what a single call of the config costs beyond them.  Where each rule
below came from: notes/cuda.md, "Where the candidate rules come from".
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

from ...core.config import Config
from ...core.problem import Problem
from . import dmma, driver, streamk
from .space import KNOB_DEFAULTS, WARP, block_tiles, derive, extra_regs

_TILES = [(128, 128), (128, 256), (256, 128), (128, 64), (64, 128), (64, 64), (32, 64), (64, 32),
          (32, 32), (128, 32), (256, 32), (128, 16), (64, 16), (256, 16), (32, 16), (16, 16)]
_THREAD_TILES = {"float32": [(8, 8), (8, 16), (16, 8), (8, 4), (4, 8), (4, 4)],
                 "float64": [(4, 4), (8, 4), (4, 8), (8, 8), (4, 2), (2, 4), (2, 2)]}
CLOCK_HZ = 1.98e9          # H100/H200 boost clock: the model's unit
STAGE_LATENCY = 700        # cycles: one global->shared stage when nothing else hides it
BYTES_PER_CYCLE = 1800.0   # ~3.6 TB/s of sustained HBM traffic at that clock


def _raw(problem: Problem, limits: dict):
    FV = 16 // problem.itemsize
    sms = limits["num_sms"]
    for (BM, BN), (TM, TN) in itertools.product(_TILES, _THREAD_TILES[problem.dtype]):
        for lanes_m in (4, 8, 2, 16):   # squarish warp tiles first
            WM, WN = TM * lanes_m, TN * (WARP // lanes_m)
            if BM % WM or BN % WN:
                continue
            tiles = block_tiles(problem, BM, BN)
            splits = [(1, 1)]
            if tiles < sms:
                splits += [(kg, kl) for kg in (1, 2, 4, 8, 16, 32, 64, 128, 256) for kl in (1, 2, 4, 8)
                           if (kg, kl) != (1, 1)]
            for (KG, KL), BK in itertools.product(splits, (8, 16, 32)):
                for KR, VEC in itertools.product((0, 1) if KG > 1 else (0,), (4, 2, 1)):
                    yield dict(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN, WM=WM, WN=WN, trans=1,
                               VEC=VEC, PAD=FV, DB=1, ST=0, KG=KG, KL=KL, KR=KR, MMA=0, AR=0, PS=0, SK=0)


# Tensor-core (MMA = 3) warp tiles, (WM, WN): mma fragments of 16 x 8.
_MMA_WARP_TILES = [(64, 32), (32, 64), (64, 64), (32, 32), (64, 16), (32, 16), (16, 32), (16, 16)]
# 3xTF32 FMAs per cycle per SM at full efficiency through mma.sync: 1.14 x the
# FFMA kernel's 128, the measured ratio of the two kernels' best at 4096^2,
# where the model gives both full efficiency.
MMA_FMA_RATE = 146


def _raw_mma(problem: Problem, limits: dict):
    """The tensor-core kernel's product: block and warp tiles, k-depth, splits."""
    if problem.dtype != "float32":
        return
    for (BM, BN), (WM, WN) in itertools.product(_TILES, _MMA_WARP_TILES):
        if BM % WM or BN % WN or not 2 <= (BM // WM) * (BN // WN) <= 16:
            continue
        yield from _tensor_core_configs(problem, limits, 3, BM, BN, WM, WN, (32, 16, 8))


def _tensor_core_configs(problem: Problem, limits: dict, mma: int, BM, BN, WM, WN, bks):
    """One tile of a tensor-core kernel: its K_G splits (where the tiles leave
    SMs idle), k-depths `bks`, reductions and vector widths, and without K_G
    stream-K's one and two blocks an SM where the tiles leave the last wave
    part-empty (the space says where); the FFMA-only knobs at their canonical
    values."""
    tiles = block_tiles(problem, BM, BN)
    sms = limits["num_sms"]
    kgs = (1, 2, 4, 8, 16, 32, 64, 128, 256) if tiles < sms else (1,)
    sks = (0, 1, 2) if tiles % sms and problem.batch == 1 else (0,)
    for KG, BK in itertools.product(kgs, bks):
        for KR, VEC, SK in itertools.product((0, 1) if KG > 1 else (0,), (4, 2, 1), sks if KG == 1 else (0,)):
            yield dict(BM=BM, BN=BN, BK=BK, TM=4, TN=4, WM=WM, WN=WN, trans=1,
                       VEC=VEC, PAD=4, DB=1, ST=3, KG=KG, KL=1, KR=KR, MMA=mma, AR=int(mma == 4), PS=0, SK=SK)


# Warpgroup-MMA (MMA = 4) warp tiles: a warpgroup's 64 x WN.
_WGMMA_WNS = (128, 64, 32, 16)
# 3xTF32 FMAs per cycle per SM through wgmma at full efficiency: a guess from
# the TF32 peak (1024 FMA/cycle/SM, three per product) at ~60%; to be
# calibrated on a GPU run like MMA_FMA_RATE. With A from shared memory (AR = 0)
# the kernel moves 1.4x the shared-memory bytes per FMA: its best at 4096^2
# ran 0.85x the best with A from registers (notes/cuda.md, "A from registers").
WGMMA_FMA_RATE = 200
WGMMA_SHARED_A = 0.85
# Pre-split operands (PS = 1): no split, loads or stores in the main loop, so
# the stage's fixed cost and the tensor work remain (~1.6x the A-from-registers
# kernel by the stage costs measured for it: notes/cuda.md, "Pre-split
# operands"); not yet calibrated. The pack kernel first moves 12 bytes per
# element of A and B (4 read, 8 written) and costs one more launch.
WGMMA_PRESPLIT = 1.3
PACK_BYTES = 12
PACK_LAUNCH = 3000
# Stream-K: what a segment costs a block besides its k tiles (the pipeline
# filled again, an epilogue, a barrier): a guess of about two stages' latency,
# not calibrated on a GPU (notes/cuda.md, session 12). Until it is, a stream-K
# config ranks above the same config without it only where the model gives it
# more than SK_MARGIN: the untuned default of a shape whose waves are nearly
# full stays the measured kernel, and searches still time stream-K (the list
# and the ranking keep it).
SK_SEGMENT = 1500
SK_MARGIN = 1.15
# The DMMA kernel's stream-K configs measured slower than the same tile without it on
# nearly every float64 shape of the H200 shape-classes run (1000^3: 1.9-2.2x, 1536^3
# 64 x 64: 1.4x, 3000^3: 1.07-1.7x; notes/cuda.md, session 13): its margin is larger.
SK_MARGIN_DMMA = 1.3
# A launch's fixed cost (the grid's start and drain), the K_G reduce kernel's launch
# (KR = 0), and the in-launch reduction's fixed cost (KR = 1: a fence, the count, one
# more L2 round trip before the last block reads the partials), in cycles. The two
# reductions are set from the measured stores: the same config with the reduce kernel
# ran 0.86x the time of the in-launch reduction (geometric mean of 293 pairs on 21
# H200 problems, faster on every one: a call on the express lane or a graph launches
# the reduce kernel without a host gap), so the reduce kernel's launch is cheaper and
# the in-launch reduction dearer than first guessed; a launch under 3000 cycles made the
# DMMA kernel split 1000^3, measured 1.17x slower (notes/cuda.md, session 18).
LAUNCH_CYCLES = 4000
REDUCE_LAUNCH = 3000
KR_CYCLES = 8000
# A round of blocks on the busiest SM (the blocks resident at once: busiest / per SM)
# pays a fixed cost besides its k loop: the pipeline's fill before the first tile's
# math and the epilogue's store after the last (about two stage latencies), which the
# blocks of one round overlap but rounds in turn do not. Without it the model split
# K (or shrank tiles) for a finer wave at no cost and picked the most splits of the
# largest tile; chosen on the stores' training problems (notes/cuda.md, session 19).
ROUND_CYCLES = 1000
SK_VARIANTS = 3       # shapes of a candidate list that bring their stream-K twin
# What one call costs beyond the device time, for problems timed as calls: a config
# whose call needs a workspace (the K_G partials, the pre-split operands, stream-K's
# partials) above WORKSPACE_CHARGED bytes. Above the size a kernel keeps
# (driver.WORKSPACE_KEEP, 32 MiB) the call allocates it every time and launches
# through enqueue rather than its steady launch or graph: measured 12-15 us more a call
# than the same launches with a kept workspace (graphs; 8-11 us launched as kernels) on
# the H200 host, for any number of kernels. From 8 MiB the same charge stands for the
# partials' traffic the device model undercounts: charged only above 32 MiB, the
# untuned picks of 900x700x1300, 2560x64x2560 and 2560x128x2560 ran 0.92, 1.07 and
# 1.13x cuBLAS as calls, against 1.19, 1.63 and 1.54x charged from 8 MiB (one H200
# host; notes/gpu-session-21.md). A second kernel as such (the reduce kernel, the
# pack) costs a call nothing measurable beyond its device time: the launches queue
# while the first kernel runs. 24000 cycles (12 us at the model's clock): the low end
# of the measured cost, inside the span whose picks score alike on the stores'
# training problems (12000-32000 cycles; notes/cuda.md, session 20).
CALL_WORKSPACE = 24000
WORKSPACE_CHARGED = 8 << 20


def _raw_wgmma(problem: Problem, limits: dict):
    """The warpgroup-MMA kernel's product (sm_90 only; float32)."""
    if problem.dtype != "float32" or limits["arch"].rstrip("a") != "sm_90":
        return
    for (BM, BN), WN in itertools.product(_TILES, _WGMMA_WNS):
        if BM % 64 or BN % WN or not 1 <= (BM // 64) * (BN // WN) <= 4:
            continue
        yield from _tensor_core_configs(problem, limits, 4, BM, BN, 64, WN, (16, 32, 8))


def _raw_dmma(problem: Problem, limits: dict):
    """The FP64 tensor-core kernel's product (float64, sm_90+; dmma.py)."""
    yield from dmma.raw_configs(problem, limits, _TILES, _tensor_core_configs)


def model_ms(problem: Problem, configs, limits: dict) -> list[float]:
    """model_cycles of each config at the model's clock, in milliseconds."""
    return [model_cycles(problem, c, limits) / CLOCK_HZ * 1e3 for c in configs]


def model_cycles(problem: Problem, c, limits: dict) -> float:
    # a plain dict: ranking a space reads ~20 knobs of each of ~10^5 configs
    c = {**KNOB_DEFAULTS, **(c.to_dict() if isinstance(c, Config) else c)}
    d = derive(problem, c)
    sms = limits["num_sms"]
    regs = max(32, math.ceil(d.regs_est / 8) * 8)
    per_sm = max(1, min(2048 // d.threads, limits["regs_per_block"] // (d.threads * regs),
                        (228 * 1024) // (d.smem_bytes + 1024), 32))
    blocks = d.grid[0] * d.grid[1] * d.grid[2]
    busiest = -(-blocks // sms)                       # blocks on the busiest SM
    k_work = min(d.k_chunk, max(problem.K, 1))        # k of one block
    sk = c.get("SK", 0)
    if sk:    # stream-K: G persistent blocks of ceil(units / G) k tiles each (streamk.py)
        tiles, kt, units = streamk.shape(problem, c["BM"], c["BN"], d.KT)
        g = streamk.grid(units, sk, sms)
        busiest, k_work = -(-g // sms), -(-units // g) * d.KT
    warps = min(per_sm, busiest) * d.threads // WARP  # warps resident to hide latency
    block_reuse = c["BM"] * c["BN"] / (c["BM"] + c["BN"])   # FMAs per element fetched to shared
    if c.get("MMA", 0) == 4:
        # the tensor cores read both operands from shared memory: a block's
        # reuse and one warpgroup per SM sub-partition set the efficiency
        eff = min(1.0, warps / 4.0) * min(1.0, block_reuse / 40.0)
        fma_rate = WGMMA_FMA_RATE * (WGMMA_PRESPLIT if c.get("PS", 0) else 1.0 if c.get("AR", 0) else WGMMA_SHARED_A)
    elif c.get("MMA", 0) == dmma.MMA:
        eff, fma_rate = dmma.efficiency(c, d, warps, block_reuse, extra_regs(problem, c["SK"])), dmma.FMA_RATE
    elif c.get("MMA", 0):
        # per shared element read (and split in two), a warp's WM x WN tile does WM * WN / (WM + WN) FMAs
        reuse = c["WM"] * c["WN"] / (c["WM"] + c["WN"])
        eff = min(1.0, reuse / 21.0) * min(1.0, warps / 8.0) * min(1.0, block_reuse / 40.0)
        fma_rate = MMA_FMA_RATE
    else:
        reuse = c["TM"] * c["TN"] / (c["TM"] + c["TN"])   # FMAs per shared element read
        eff = min(1.0, reuse / 4.0) * min(1.0, warps / 8.0) * min(1.0, block_reuse / 40.0)
        fma_rate = 128 if problem.dtype == "float32" else 64
    # an empty C (M or N = 0) has no blocks: no work and no efficiency to divide by
    compute = busiest * c["BM"] * c["BN"] * k_work / (fma_rate * eff) if busiest else 0.0
    # A stage cannot finish faster than a global load (~700 cycles); DB hides
    # one stage of it, blocks resident on one SM overlap theirs. (The model
    # ranks register-path configs only: candidates() adds the pipelines.)
    stages = -(-k_work // d.KT) * -(-busiest // per_sm)
    latency = stages * STAGE_LATENCY
    compute = max(compute, latency)
    # K_G reduction: a second launch (~3 us incl. the gap between kernels), or
    # in the launch (KR) the last block of a tile reads all KG partials of it
    # alone (~64 B/cycle for one SM) after one more L2 round trip.  (A second
    # launch was measured nearer 7 us; not recalibrated, see notes/cuda.md.)
    if c["KG"] > 1 and c.get("KR", 0):
        reduce = KR_CYCLES + c["KG"] * c["BM"] * c["BN"] * problem.itemsize / 64
    else:
        reduce = REDUCE_LAUNCH if c["KG"] > 1 else 0
    it = problem.itemsize
    partials = 0
    if sk:
        # a block's segments (each refills the pipeline and ends in an epilogue) and,
        # where it splits a tile, a fixup that reads the tile's partials (as KR's)
        segs = 1 + -(-k_work // d.KT) // kt
        partials = streamk.partial_estimate(tiles, kt, g)
        splits = partials / max(1, tiles)
        reduce = segs * SK_SEGMENT + (KR_CYCLES + (1 + splits) * c["BM"] * c["BN"] * it / 64 if partials else 0)
    overhead = stages * 80 + reduce + LAUNCH_CYCLES + ROUND_CYCLES * -(-busiest // per_sm)
    if c.get("PS", 0):   # the pack kernel runs before the GEMM
        overhead += PACK_LAUNCH + PACK_BYTES * problem.K * (problem.M + problem.N) / BYTES_PER_CYCLE
    traffic = it * (problem.M * problem.K * d.grid[0] / 4 + problem.K * problem.N * d.grid[1] / 4
                    + problem.M * problem.N * (1 + 2 * (c["KG"] > 1) * c["KG"])
                    + 2 * partials * c["BM"] * c["BN"])
    margin = (SK_MARGIN_DMMA if c.get("MMA", 0) == dmma.MMA else SK_MARGIN) if sk else 1.0
    return (max(compute, traffic / BYTES_PER_CYCLE) + overhead) * margin


def call_cycles(problem: Problem, c, limits: dict) -> float:
    """model_cycles plus what a single call of `c` costs beyond its device time
    (CALL_WORKSPACE where its workspace is above WORKSPACE_CHARGED): the ranking of a
    problem timed as calls (candidates with call_ms)."""
    return model_cycles(problem, c, limits) + _call_extra(problem, c, limits)


def _call_extra(problem: Problem, c, limits: dict) -> float:
    big = driver.call_workspace(problem, c, limits["num_sms"]) * problem.itemsize > WORKSPACE_CHARGED
    return CALL_WORKSPACE if big else 0.0


def _as_calls(problem: Problem, ranked: list, space, limits: dict) -> list:
    """`ranked` (model cycles, config) re-ranked by the call's cost of the variant
    _pick lists first for each config: the wgmma kernel's is pre-split (PS, whose
    packed operands are the call's workspace) wherever that is valid. Stable: equal
    costs keep the device ranking's order."""
    presplit: dict = {}      # PS variant -> whether _pick lists it first (valid)
    out = []
    for cyc, cfg in ranked:
        first = cfg
        if cfg.get("MMA", 0) == 4 and cfg["KG"] == 1:
            for t in (_variant(cfg, st, ar, ps) for st, ar, ps in _ORDER_WGMMA[:2]):   # its pre-split ones
                ok = presplit.get(t)
                if ok is None:
                    ok = presplit[t] = space.why_invalid(t) is None
                if ok:
                    first = t
                    break
        out.append((cyc + _call_extra(problem, first, limits), cfg))
    out.sort(key=lambda t: t[0])
    return out


def _ranked(problem: Problem, space, limits: dict, raw) -> list:
    """(model cycles, config) of the valid configs of `raw`, best first."""
    seen, ranked = set(), []
    for d in raw:
        # most of the product is invalid (tiles larger than the problem, splits the
        # grid does not need): judged on the plain dict, a Config only for the rest
        if not space.admits(d):
            continue
        items = tuple(sorted(d.items()))
        if items in seen:
            continue
        seen.add(items)
        cfg = Config.from_sorted_items(items)
        ranked.append((model_cycles(problem, cfg, limits), cfg))
    ranked.sort(key=lambda t: t[0])
    return ranked


def candidates(problem: Problem, space, limits: dict, n: int = 24,
               call_ms: float | None = None) -> list[Config]:
    """Up to `n` valid configs: the model's pick first, then the kernels'
    lists in turn (FFMA, 3xTF32 mma.sync, 3xTF32 wgmma, float64 DMMA where the
    space has them). Where the wgmma kernel exists it gets half the list: the
    fastest kernel where it exists (measured: 1.13-1.16x the mma.sync one on
    squares).  The pick that leads (default_config) is the model's best of any
    kernel (on sm_90 a float64 list leads with DMMA: its first pick ran 1.8-2.4x
    the FFMA one at 2048-8192, notes/cuda.md, "DMMA"). `call_ms`: see listing()."""
    return listing(problem, space, limits, n, call_ms).configs


class Listing(NamedTuple):
    configs: list           # candidates(), best first
    calls: bool             # ranked as calls (call_cycles)


def listing(problem: Problem, space, limits: dict, n: int = 24, call_ms: float | None = None) -> Listing:
    """candidates() and how they were ranked. With `call_ms` (the backend's
    CALL_TIMED_MS) a problem whose device-time pick (the list's head by
    model_cycles alone) the model puts under call_ms is timed as calls, and its
    list is ranked by call_cycles instead; the device-time pick decides, so that
    the rule does not depend on its own outcome (CUDABackend.call_timed)."""
    kinds = [r for r in (_ranked(problem, space, limits, raw(problem, limits))
                         for raw in (_raw, _raw_mma, _raw_wgmma, _raw_dmma)) if r]
    calls = False
    if call_ms is not None:
        head = _listed(kinds, space, 1)
        calls = bool(head) and model_ms(problem, head, limits)[0] < call_ms
        if calls:
            kinds = [_as_calls(problem, r, space, limits) for r in kinds]
    return Listing(_listed(kinds, space, n), calls)


def _listed(kinds: list, space, n: int) -> list[Config]:
    """The list of candidates() from each kernel's ranked (cost, config) list."""
    if len(kinds) <= 1:
        return _pick(kinds[0] if kinds else [], space, n)
    wgmma = kinds[-1][0][1].get("MMA", 0) == 4
    weights = [1] * len(kinds)
    if wgmma:
        weights[-1] = len(kinds) - 1
    shares = [n * w // sum(weights) for w in weights]
    lead = min(range(len(kinds)), key=lambda i: kinds[i][0][0])   # the model's pick leads
    i = lead
    while sum(shares) < n:   # the rounding's leftovers, the lead's kind first (n = 1: default_config)
        shares[i] += 1
        i = (i + 1) % len(kinds)
    lists = [_pick(r, space, k) for r, k in zip(kinds, shares)]
    out = [lists[lead].pop(0)] if lists[lead] else []
    while any(lists) and len(out) < n:
        for i, lst in enumerate(lists):   # the wgmma list (last) takes two turns per round
            take = 2 if wgmma and i == len(lists) - 1 else 1
            out += lst[:take]
            del lst[:take]
    return out[:n]


# The wgmma kernel's pipeline variants, (ST, AR, PS), in _pick's order.
_ORDER_WGMMA = ((4, 0, 1), (3, 0, 1), (4, 1, 0), (3, 0, 0))


def _variant(cfg: Config, st: int, ar: int, ps: int) -> Config:
    return cfg.replace(ST=st, AR=ar, PS=ps, **({"VEC": 1} if ps else {}))


def _pick(ranked: list, space, n: int) -> list[Config]:
    """Up to `n` configs from one kernel's ranked list (see below)."""
    if n <= 0:
        return []
    picked, shapes = [], set()

    def take(cfg):
        # KR is left out of the shape: both reductions of one shape would fill
        # the list in pairs and push other shapes out; the best shape's other
        # reduction is added explicitly below.
        shape = tuple((k, v) for k, v in cfg.items() if k not in ("VEC", "WM", "WN", "KR", "ST", "AR", "PS"))
        if shape not in shapes and len(picked) < n:
            shapes.add(shape)
            picked.append(cfg)

    if ranked:               # the model's pick first: it is default_config and the search's start
        take(ranked[0][1])
    if ranked and ranked[0][1]["KG"] > 1:   # both K_G reductions of the best split config
        best = ranked[0][1]
        twin = best.replace(KR=1 - best["KR"])
        if space.why_invalid(twin) is None and len(picked) < n:
            picked.append(twin)
        # and the best split configs without K_L for two register tiles, each
        # at two k-depths (the second with the separate reduction): the model
        # ranks them below many K_L permutations of one tile, and it misorders
        # k-depths of split configs (a measured winner ran 2x faster than the
        # model's pick of the same tile).
        tiles: dict = {}
        for _, cfg in ranked:
            if cfg["KL"] == 1 and cfg["KG"] > 1:
                bks = tiles.setdefault((cfg["TM"], cfg["TN"]), {})
                if len(tiles) <= 2 and cfg["BK"] not in bks and len(bks) < 2:
                    if bks:      # the second k-depth with the separate reduction
                        kr0 = cfg.replace(KR=0)
                        cfg = kr0 if space.why_invalid(kr0) is None else cfg
                    bks[cfg["BK"]] = cfg
                    take(cfg)
    best_per_kg = {}
    for _, cfg in ranked:
        best_per_kg.setdefault(cfg["KG"], cfg)
    if len(best_per_kg) > 1:
        for cfg in sorted(best_per_kg.values(), key=lambda c: -c["KG"])[: max(1, n // 3)]:
            take(cfg)
    for _, cfg in ranked:
        take(cfg)
    # The copy pipeline is not in the model: the list is ranked on the
    # register path and every shape comes with its cp.async pipelines, most
    # often fastest first: FFMA 2 deep, then 4 deep without a split, then the
    # register path (which wins mostly split configs); mma.sync 3 deep first
    # (a guess, unmeasured); wgmma on pre-split operands (4, else 3 deep:
    # whichever fits), then with A from registers 4 deep, then 3 deep with A
    # from shared memory (which stands in where neither fits: split-K, four
    # warpgroups): two per shape, so that the list keeps as many shapes.
    out = []
    streamed = 0      # shapes given a stream-K variant (SK_VARIANTS at most)
    for cfg in picked:
        if cfg.get("MMA", 0) == 4:
            order = _ORDER_WGMMA
        elif cfg.get("MMA", 0):
            order = tuple((st, 0, 0) for st in ((3, 4, 2) if cfg["KG"] == 1 else (3, 2)))
        else:
            order = tuple((st, 0, 0) for st in ((2, 4, 0) if cfg["KG"] == 1 else (2, 0)))
        added = []    # the PS values taken for this shape
        for st, ar, ps in order:
            if cfg.get("MMA", 0) == 4 and (len(added) == 2 or (ps and any(added))):
                continue    # two per wgmma shape, at most one of them pre-split
            t = _variant(cfg, st, ar, ps)
            if t not in out and (t == cfg or space.why_invalid(t) is None):
                out.append(t)
                added.append(ps)
        # the stream-K twin of the shape's first variant, instead of its K_G split if
        # it has one (the model's SK_MARGIN keeps it below where it is not clearly
        # better: the search times it early anyway)
        first = out[-len(added)] if added else None
        if first is not None and streamed < SK_VARIANTS and first.get("MMA", 0):
            base = first.replace(KG=1, KR=0)
            bases = ([base.replace(PS=1, AR=0, VEC=1)] if first.get("MMA", 0) == 4 else []) + [base]   # wgmma: pre-split first
            twins = [b.replace(SK=k) for b in bases for k in (1, 2) if k != first.get("SK", 0)]
            twins = [t for t in twins if space.why_invalid(t) is None and t not in out]
            if twins:
                out.append(twins[0])
                streamed += 1
    return out[:n]
