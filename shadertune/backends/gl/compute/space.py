"""The compute family's knobs, rules, phase plan and defaults (family=compute).

Knobs (layout.py says what each does to the kernel):
- bm, bn: the block tile a workgroup computes;     bk: the k-depth of a stage;
- tm, tn: the outputs an invocation owns;          lanes_n: invocations of a group
  of 32 along N (the workgroup's shape: its groups tile 32/lanes_n x lanes_n);
- vec: floats a global load moves;                 pad: floats padding a shared row;
- a_t: A's slab k-major in shared memory (1) or m-major (0);
- db: two shared slabs with the next stage prefetched into registers (1), the
  prefetch in two halves (2), or one slab (0);
- ks: workgroups splitting a pass's k-range (split-K across the grid);
- skew: turned slabs' rows skewed (a bank-conflict-free transposed store);
- clamp: loads without per-load checks (clamped rows and columns, unchecked
  stages inside K);
- swz: tile rows a strip of the workgroups' walk over the grid (L2 reuse);
- shuffle: A's fragment words passed among lanes by subgroup shuffles (KHR);
- kred: splits added into C by float atomics instead of a reduce dispatch;
- shared with the fragment family: np (k-values a pass; Jiang's multi-pass),
  unroll (k-steps a loop body: 4, or 'full' for the whole slab), a_src, b_src
  (operands read from storage buffers, or from the same buffers through buffer
  textures) and glsl (fixed at 4.50).
A fragment config holds every compute knob at 0 (ks at 1) and a compute config
the fragment family's own knobs at fixed values (out='buffer', mc '1x4' on one
target, texelFetch, no image block), so no kernel appears twice.

Pruning, before anything compiles: device limits read at run time (GL 4.5,
shared memory and invocations a workgroup, work groups a dispatch, storage
block and buffer-texture sizes), the shape (no block past twice the matrix, vec
dividing the rows, splits only where the grid is small) and a register budget.
"""
from __future__ import annotations

from ....core.config import Config
from ....core.problem import Problem
from ....core.space import PhasePlan, Space
from .codegen import COMPUTE_GLSL, MAX_GROUPS
from .layout import ADDED_KNOBS, one_pass_np, row_words, shared_bytes, skew_step
from .model import compute_ms

# Domain orders put the untuned default first (compute_default): the phased plan's
# start and the model strategy's tie-break.
BLOCKS = (128, 64, 256, 32, 16)
# A block side of 16 only for a thin side of the product (a skinny M or N): elsewhere
# it only re-reads the other operand more often.
THIN_SIDE = 64
THIN_BLOCK = 16
ANY_BLOCK = 32       # the block side every product may take (it fits in one warp's tile)
BKS = (16, 8, 32)
THREAD_TILES = (8, 4, 16)
LANES_N = (8, 4, 16, 2)
VECS = (2, 4, 1)
PADS = (4, 0)
A_T = (1, 0)
DBS = (0, 1, 2)
SPLITS = (1, 2, 4, 8, 16, 32)
SKEWS = (0, 1)
CLAMPS = (0, 1)
SWIZZLES = (1, 8)
SHUFFLES = (0, 1)
KREDS = (0, 1)
COMPUTE_UNROLLS = ("full", 4)
SOURCES = ("ssbo", "texture")
# Registers an invocation may use by ComputeLayout.registers' estimate: NVIDIA's
# ceiling is 255, and the estimate leaves the compiler room for addresses.
REGISTER_BUDGET = 232
# Passes of a multi-pass compute config: powers of two of at least this many
# k-values, the MULTI_PASS largest below K (shorter passes only add C's traffic;
# one pass is always in the domain).
MIN_PASS_K = 1024
MULTI_PASS = 3
# A split pays only while the grid has few workgroups for the device's units.
SPLIT_WAVES = 2
# Halving a prefetch (db = 2) pays only where db = 1 keeps this many floats waiting.
HALF_PREFETCH_MIN = 8
# A swizzled walk (swz > 1) pays only where one product's operands exceed an L2 (H100
# 50 MB, H200 60 MB; smaller ones stay in L2 whatever order the tiles run in).
SWIZZLE_BYTES = 32 << 20

# the compute knobs' values on a fragment config (what "absent" means, for stored
# configs written before the compute family existed too)
FRAGMENT_VALUES = {"family": "fragment", "bm": 0, "bn": 0, "bk": 0, "tm": 0, "tn": 0, "lanes_n": 0,
                   "vec": 0, "pad": 0, "a_t": 0, "db": 0, "ks": 1, "shuffle": 0,
                   "skew": 0, "clamp": 0, "swz": 1, "kred": 0}
# the fragment family's knobs that a compute config gives a meaning of its own (its
# output and its GLSL version); the rest hold the fragment family's values off it
# (space.FRAGMENT_OFF)
COMPUTE_FIXED = {"out": "buffer", "glsl": COMPUTE_GLSL}
COMPUTE_KNOBS = ("bm", "bn", "bk", "tm", "tn", "lanes_n", "vec", "pad", "a_t", "db", "ks", "shuffle",
                 "skew", "clamp", "swz", "kred")

# The phased order of the compute family (notes/gl.md, "The phase order, measured";
# notes/gl-compute.md for the knobs added since): ks first (whether the grid fills the
# device; one evaluation where it does), then the block tile (the grid's waves and the
# global traffic per FMA, the largest effects), the invocation's tile and the group's
# shape together with db and clamp (registers decide residency jointly: an 8 x 16 tile
# pays only with one workgroup a unit and its prefetch in registers, db = 2 only where
# db = 1 costs a workgroup; and NVIDIA's compiler issues a prefetch ahead of the FMAs
# only from unchecked loads, clamp = 1: db without it measured 10-20% slower than with
# it), the stage's depth and loop body, the shared layout (vec, a_t, pad, skew), the
# walk (swz: orthogonal to the tiles), the operand path, the device-gated variants
# (shuffle, kred) and the passes last.
COMPUTE_PHASES = PhasePlan(outer=(), refine="ks",
                           groups=(("bm", "bn"), ("tm", "tn", "lanes_n", "db", "clamp"), ("bk", "unroll"),
                                   ("vec", "a_t", "pad", "skew"), ("swz",), ("a_src", "b_src"),
                                   ("shuffle", "kred"), ("np",)))


def compute_available(limits: dict) -> bool:
    return bool(limits.get("compute")) and int(limits.get("max_ssbo_bytes", 0)) > 0


def compute_np_values(K: int) -> tuple[int, ...]:
    """np on the compute family: one pass (K rounded up to 4, the fragment family's
    one-pass value too), then passes of the MULTI_PASS largest powers of two below K
    that hold at least MIN_PASS_K k-values (2, 4, 8 ... passes)."""
    more = []
    v = 1 << max(0, (K - 1).bit_length() - 1)          # the largest power of two below K
    while v >= MIN_PASS_K and len(more) < MULTI_PASS and v < K:
        more.append(v)
        v //= 2
    return (one_pass_np(K), *more)


def compute_space(problem: Problem, limits: dict) -> Space:
    """The compute family's own knobs and rules on this device (the module docstring)."""
    M, N, K = problem.M, problem.N, problem.K
    shared = int(limits.get("max_compute_shared_bytes", 0))
    invocations = int(limits.get("max_compute_invocations", 0))
    groups = list(limits.get("max_compute_groups", (MAX_GROUPS,) * 3))
    ssbo_bytes = int(limits.get("max_ssbo_bytes", 0))
    texels = int(limits.get("max_texture_buffer_texels", 0))
    units = max(1, int(limits.get("compute_units", 1)))
    subgroup_shuffle = bool(limits.get("subgroup_shuffle"))
    atomic_float = bool(limits.get("atomic_float"))
    batch = problem.batch

    def threads(bm, bn, tm, tn) -> int:
        return (bm // tm) * (bn // tn)

    # rules are functions whose parameter names are the knobs they read; each
    # docstring is the message when it fails
    def workgroup_shape(bm, bn, tm, tn, lanes_n) -> bool:
        """tm divides bm and tn divides bn, groups of 32 tile the block, 32 to the most invocations a workgroup"""
        if bm % tm or bn % tn:
            return False
        t = threads(bm, bn, tm, tn)
        return (32 <= t <= invocations and t % 32 == 0
                and bm % ((32 // lanes_n) * tm) == 0 and bn % (lanes_n * tn) == 0)

    def block_fits_shape(bm, bn) -> bool:
        """no block past twice the matrix (a side of 32 always fits); a side of 16 only
        where that side of the product is at most 64 (THIN_SIDE)"""
        def fits(b, side):
            return side <= THIN_SIDE if b == THIN_BLOCK else (b < 2 * side or b == ANY_BLOCK)
        return fits(bm, M) and fits(bn, N)

    def vec_divides_rows(vec) -> bool:
        """vec divides the stored rows of A and B (a load never straddles a row)"""
        a = M if problem.trans_a else K
        b = K if problem.trans_b else N
        return a % vec == 0 and b % vec == 0

    def loads_divide(bm, bn, bk, tm, tn, vec, a_t) -> bool:
        """a stage's slabs split evenly into the workgroup's vector loads, and each
        invocation's into whole groups (4 / vec along a row, 4 rows where the slab turns)"""
        step = threads(bm, bn, tm, tn) * vec
        if (bm * bk) % step or (bk * bn) % step:
            return False
        group_a = 4 // vec if problem.trans_a == bool(a_t) else 4
        group_b = 4 // vec if not problem.trans_b else 4
        return (bm * bk // step) % group_a == 0 and (bk * bn // step) % group_b == 0

    def turns(a_t) -> tuple[bool, bool]:
        """Whether A's and B's slab stores turn (layout.a_along / b_along)."""
        return problem.trans_a != bool(a_t), problem.trans_b

    def shared_fits(bm, bn, bk, pad, a_t, db, skew, vec) -> bool:
        """the stage's slabs within the device's shared memory a workgroup"""
        nbuf = 2 if db else 1
        turn_a, turn_b = turns(a_t)
        rows_a, row_a = (bk, bm + pad) if a_t else (bm, bk + pad)
        sa = skew_step(bm if problem.trans_a else bk, vec) if skew and turn_a else 0
        sb = skew_step(bk if problem.trans_b else bn, vec) if skew and turn_b else 0
        return shared_bytes(rows_a, row_words(row_a, rows_a, vec, nbuf, sa),
                            bk, row_words(bn + pad, bk, vec, nbuf, sb), nbuf) <= shared

    def register_budget(bm, bn, bk, tm, tn, db) -> bool:
        """accumulators, one step's operands and the prefetched stage (half of it with db = 2)
        within the register budget"""
        prefetch = (bm + bn) * bk // threads(bm, bn, tm, tn) if db else 0
        waiting = -(-prefetch // 2) if db == 2 else prefetch
        return tm * tn + tm + tn + waiting + 24 <= REGISTER_BUDGET

    def half_prefetch(bm, bn, bk, tm, tn, vec, a_t, db) -> bool:
        """db = 2 where the prefetch db = 1 holds is 8 floats or more, in two load groups
        or more (a group fills whole words of shared memory)"""
        if db != 2:
            return True
        t = threads(bm, bn, tm, tn)
        turn_a, turn_b = turns(a_t)
        groups = (bm * bk // (t * vec)) // (4 if turn_a else 4 // vec) \
            + (bk * bn // (t * vec)) // (4 if turn_b else 4 // vec)
        return (bm + bn) * bk // t >= HALF_PREFETCH_MIN and groups >= 2

    def skew_turned(skew, a_t, vec, pad) -> bool:
        """skew = 1 only where a slab's store turns, with vec 2 or 4 and no pad (with vec 1
        a pad of 4 floats already spreads the store; the skew replaces the pad)"""
        return skew == 0 or (any(turns(a_t)) and vec > 1 and pad == 0)

    def swizzle_pays(bm, swz) -> bool:
        """swz > 1 only where one product's operands exceed an L2 (32 MB, SWIZZLE_BYTES)
        and the grid has more tile rows than a strip"""
        return swz == 1 or (4 * (M * K + K * N) > SWIZZLE_BYTES and -(-M // bm) > swz)

    def shuffle_shares(shuffle, a_t, lanes_n, tm) -> bool:
        """shuffle = 1 only on a device with subgroup shuffles of 32 lanes, with A k-major
        in shared memory (a_t = 1) and lanes_n >= tm (each lane of a group reads one word)"""
        return shuffle == 0 or (subgroup_shuffle and a_t == 1 and lanes_n >= tm)

    def refinements_on_main_form(db, skew, clamp, swz, shuffle, kred, unroll, a_src, b_src, np) -> bool:
        """db = 2, clamp, shuffle and kred only on the family's main form: a fully unrolled
        stage from storage buffers in one pass (they refine its main loop; unroll 4 and
        passes are alternatives to it that measured slower or even, and every refinement
        on every alternative would multiply the space); skew, swz and clamp also with
        operands read through textures (the slab's store in shared memory, the grid's
        order and the loads' indices do not depend on where a slab is read from, and a
        texture source measured faster than the buffer where skew and swz did too)"""
        if db != 2 and not (skew or clamp or shuffle or kred) and swz == 1:
            return True
        if unroll != "full" or np < K:
            return False
        return (a_src == "ssbo" and b_src == "ssbo") or not (db == 2 or shuffle or kred)

    def atomic_splits(kred, ks) -> bool:
        """kred = 1 only with splits (ks > 1), on a device with float atomics on storage buffers"""
        return kred == 0 or (atomic_float and ks > 1)

    def splits_in_one_pass(np, ks) -> bool:
        """splits (ks > 1) only in a config of one pass"""
        return ks == 1 or np >= K

    def split_pays(bm, bn, bk, ks) -> bool:
        """ks > 1 only while the grid has fewer than 2 waves of workgroups for the device's
        units, and every split gets at least two slabs"""
        if ks == 1:
            return True
        tiles = -(-M // bm) * -(-N // bn) * batch
        return tiles < SPLIT_WAVES * units and -(-K // bk) >= 2 * ks

    def grid_fits(bm, bn, ks) -> bool:
        """the dispatch's work groups within the device's counts"""
        return -(-N // bn) <= groups[0] and -(-M // bm) <= groups[1] and batch * ks <= groups[2]

    def buffers_fit(a_src, b_src, ks, vec, kred) -> bool:
        """operands, C and the split-K workspace (none with kred = 1) within the device's
        storage block size; a texture source within its buffer-texture size"""
        a, b, c = batch * M * K, batch * K * N, batch * M * N
        if 4 * max(a, b, c * (1 if kred else ks)) > ssbo_bytes:
            return False
        return all(src == "ssbo" or n // vec <= texels for src, n in ((a_src, a), (b_src, b)))

    def unroll_body(unroll, bk) -> bool:
        """unroll 4 is a loop over a slab of more than 4 k-steps"""
        return unroll == "full" or bk > 4

    knobs = {"bm": BLOCKS, "bn": BLOCKS, "bk": BKS, "tm": THREAD_TILES, "tn": THREAD_TILES,
             "lanes_n": LANES_N, "vec": VECS, "pad": PADS, "a_t": A_T, "db": DBS,
             "ks": SPLITS, "shuffle": SHUFFLES, "np": compute_np_values(K), "unroll": COMPUTE_UNROLLS,
             "a_src": SOURCES, "b_src": SOURCES, "skew": SKEWS, "clamp": CLAMPS, "swz": SWIZZLES,
             "kred": KREDS}
    rules = [workgroup_shape, block_fits_shape, vec_divides_rows, loads_divide, shared_fits,
             register_budget, splits_in_one_pass, split_pays, grid_fits, buffers_fit, unroll_body,
             half_prefetch, skew_turned, swizzle_pays, shuffle_shares, atomic_splits,
             refinements_on_main_form]
    # the limits the cost model reads (model.py), kept with the space
    return Space(knobs, rules, {"compute_units": units, "max_compute_shared_bytes": shared,
                                "software_renderer": bool(limits.get("software_renderer"))})


# The untuned compute defaults: 128 x 128 blocks of 8 x 16 an invocation (8 x 4 lanes
# a group: a 64 x 64 warp tile), bk 8, the next stage prefetched in registers across the
# FMAs (db = 1) from unchecked loads (clamp = 1): 43.1 TFLOP/s at 4096 on the H200, 0.88x
# cuBLAS, against 39.9 for the one-slab 8 x 8 tile (bk 16, A k-major from 8-byte loads),
# the default before it and the next candidate; then smaller blocks for products it does not fit or
# leaves with too few workgroups, and 16-wide blocks for a thin side (M or N at most
# THIN_SIDE). A tile with its own knobs takes them; the others the first valid variant
# of VARIANTS, every knob added since the 8 x 8 tile's measurement off. The cost model
# ranks them (notes/gl-compute.md).
DEFAULT_TILES = ((128, 128, 8, 16, dict(bk=8, vec=2, lanes_n=4, a_t=1, db=1, clamp=1)),
                 (128, 128, 8, 8), (64, 128, 8, 8), (128, 64, 8, 8), (64, 64, 8, 8),
                 (64, 64, 4, 4), (32, 64, 4, 4), (64, 32, 4, 4), (32, 32, 4, 4),
                 (16, 128, 4, 4), (128, 16, 4, 4), (16, 64, 4, 4), (64, 16, 4, 4))
# (bk, vec, lanes_n, a_t) of a tile without knobs of its own, in order of preference
VARIANTS = ((16, 2, 8, 1), (16, 1, 8, 1), (16, 4, 8, 0), (16, 2, 8, 0), (16, 1, 8, 0),
            (8, 4, 8, 0), (8, 1, 8, 0), (8, 1, 4, 0), (8, 1, 16, 0), (8, 1, 2, 0))


def compute_candidates(problem: Problem, space) -> list[Config]:
    """Valid compute configs of the default shapes, one per tile of DEFAULT_TILES (its
    own knobs, or its first valid variant) with the splits of K the space allows it,
    fastest first by the cost model (model.py, with the limits kept in the space's
    constants): a small or deep-K product gets tiles or splits that give every unit a
    workgroup."""
    out = []
    kpad = one_pass_np(problem.K)
    for bm, bn, tm, tn, *own in DEFAULT_TILES:
        variants = [own[0]] if own else [dict(bk=bk, vec=vec, lanes_n=ln, a_t=a_t)
                                         for bk, vec, ln, a_t in VARIANTS]
        for v in variants:
            # in canonical form: every knob, the fragment knobs at the family's values
            knobs = {**ADDED_KNOBS, "db": 0, **v}
            cfg = Config(family="compute", **COMPUTE_FIXED, unroll="full", np=kpad,
                         a_src="ssbo", b_src="ssbo", bm=bm, bn=bn, tm=tm, tn=tn, pad=4, ks=1, **knobs)
            if cfg in space:
                out.append(cfg)
                # where the grid leaves units idle: its splits of K too (space rules say where)
                out += [c for c in (cfg.replace(ks=k) for k in SPLITS[1:]) if c in space]
                break
    ms = compute_ms(problem, out, space.constants)
    return [c for _, _, c in sorted(zip(ms, range(len(out)), out))]
