"""The compute family's knobs, rules, phase plan and defaults (family=compute).

Knobs (layout.py says what each does to the kernel):
- bm, bn: the block tile a workgroup computes;     bk: the k-depth of a stage;
- tm, tn: the outputs an invocation owns;          lanes_n: invocations of a group
  of 32 along N (the workgroup's shape: its groups tile 32/lanes_n x lanes_n);
- vec: floats a global load moves;                 pad: floats padding a shared row;
- a_t: A's slab k-major in shared memory (1) or m-major (0);
- db: two shared slabs with the next stage prefetched into registers (1) or one (0);
- ks: workgroups splitting a pass's k-range (split-K across the grid);
- shuffle: reserved for subgroup shuffles (only 0 is generated today; the knob
  exists so stores keep one key when it grows a value);
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
from .layout import one_pass_np
from .model import compute_ms

# Domain orders put the untuned default first (compute_default): the phased plan's
# start and the model strategy's tie-break.
BLOCKS = (128, 64, 256, 32)
BKS = (16, 8, 32)
THREAD_TILES = (8, 4, 16)
LANES_N = (8, 4, 16, 2)
VECS = (2, 4, 1)
PADS = (4, 0)
A_T = (1, 0)
DBS = (0, 1)
SPLITS = (1, 2, 4, 8, 16, 32)
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

# the compute knobs' values on a fragment config (what "absent" means, for stored
# configs written before the compute family existed too)
FRAGMENT_VALUES = {"family": "fragment", "bm": 0, "bn": 0, "bk": 0, "tm": 0, "tn": 0, "lanes_n": 0,
                   "vec": 0, "pad": 0, "a_t": 0, "db": 0, "ks": 1, "shuffle": 0}
# the fragment family's knobs that a compute config gives a meaning of its own (its
# output and its GLSL version); the rest hold the fragment family's values off it
# (space.FRAGMENT_OFF)
COMPUTE_FIXED = {"out": "buffer", "glsl": COMPUTE_GLSL}
COMPUTE_KNOBS = ("bm", "bn", "bk", "tm", "tn", "lanes_n", "vec", "pad", "a_t", "db", "ks", "shuffle")

# The phased order of the compute family (notes/gl.md, "Compute phase order"): the
# block tile first (it sets the grid's waves and the global traffic per FMA, the
# largest effects), then the invocation's tile and the group's shape (registers and
# shared-memory traffic per FMA), the stage (depth, double buffering, loop body),
# the memory access shape, the operand path, and K's splits and passes last (they
# matter where the grid is small, which the tile decides).
COMPUTE_PHASES = PhasePlan(outer=(), refine="ks",
                           groups=(("bm", "bn"), ("tm", "tn", "lanes_n"), ("bk", "db", "unroll"),
                                   ("vec", "a_t", "pad"), ("a_src", "b_src"), ("np",)))


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
        """no block past twice the matrix (the smallest block always fits)"""
        return (bm < 2 * M or bm == min(BLOCKS)) and (bn < 2 * N or bn == min(BLOCKS))

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

    def shared_fits(bm, bn, bk, pad, a_t, db) -> bool:
        """the stage's slabs within the device's shared memory a workgroup"""
        rows_a, row_a = (bk, bm + pad) if a_t else (bm, bk + pad)
        return (2 if db else 1) * 4 * (rows_a * row_a + bk * (bn + pad)) <= shared

    def register_budget(bm, bn, bk, tm, tn, db) -> bool:
        """accumulators, one step's operands and the prefetched stage within the register budget"""
        prefetch = (bm + bn) * bk // threads(bm, bn, tm, tn) if db else 0
        return tm * tn + tm + tn + prefetch + 24 <= REGISTER_BUDGET

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

    def buffers_fit(a_src, b_src, ks, vec) -> bool:
        """operands, C and the split-K workspace within the device's storage block size;
        a texture source within its buffer-texture size"""
        a, b, c = batch * M * K, batch * K * N, batch * M * N
        if 4 * max(a, b, c * ks) > ssbo_bytes:
            return False
        return all(src == "ssbo" or n // vec <= texels for src, n in ((a_src, a), (b_src, b)))

    def unroll_body(unroll, bk) -> bool:
        """unroll 4 is a loop over a slab of more than 4 k-steps"""
        return unroll == "full" or bk > 4

    knobs = {"bm": BLOCKS, "bn": BLOCKS, "bk": BKS, "tm": THREAD_TILES, "tn": THREAD_TILES,
             "lanes_n": LANES_N, "vec": VECS, "pad": PADS, "a_t": A_T, "db": DBS,
             "ks": SPLITS, "shuffle": (0,), "np": compute_np_values(K), "unroll": COMPUTE_UNROLLS,
             "a_src": SOURCES, "b_src": SOURCES}
    rules = [workgroup_shape, block_fits_shape, vec_divides_rows, loads_divide, shared_fits,
             register_budget, splits_in_one_pass, split_pays, grid_fits, buffers_fit, unroll_body]
    # the limits the cost model reads (model.py), kept with the space
    return Space(knobs, rules, {"compute_units": units, "max_compute_shared_bytes": shared,
                                "software_renderer": bool(limits.get("software_renderer"))})


# The untuned compute defaults, best first: 128 x 128 blocks of 8 x 8 an invocation,
# bk 16, A k-major in shared memory from 8-byte loads, one slab (on the H200 the
# fastest of its one-knob neighbourhood: 32.1 TFLOP/s at 4096, against 28.4 with A
# m-major and 23.3 double buffered, which takes more than 128 registers and halves
# the warps a unit holds; notes/gl.md), then smaller blocks for products it does not
# fit or leaves with too few workgroups.
DEFAULT_TILES = ((128, 128, 8, 8), (64, 128, 8, 8), (128, 64, 8, 8), (64, 64, 8, 8),
                 (64, 64, 4, 4), (32, 64, 4, 4), (64, 32, 4, 4), (32, 32, 4, 4))


def compute_candidates(problem: Problem, space) -> list[Config]:
    """Valid compute configs of the default shapes, one per tile of DEFAULT_TILES (its
    first valid variant) with the splits of K the space allows it, fastest first by the
    cost model (model.py, with the limits kept in the space's constants): a
    small or deep-K product gets tiles or splits that give every unit a workgroup."""
    out = []
    kpad = one_pass_np(problem.K)
    for bm, bn, tm, tn in DEFAULT_TILES:
        for bk, vec, ln, a_t in ((16, 2, 8, 1), (16, 1, 8, 1), (16, 4, 8, 0), (16, 2, 8, 0), (16, 1, 8, 0),
                                 (8, 4, 8, 0), (8, 1, 8, 0), (8, 1, 4, 0), (8, 1, 16, 0), (8, 1, 2, 0)):
            # in canonical form: every knob, the fragment knobs at the family's values
            cfg = Config(family="compute", **COMPUTE_FIXED, unroll="full", np=kpad,
                         a_src="ssbo", b_src="ssbo", bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, lanes_n=ln,
                         vec=vec, pad=4, a_t=a_t, db=0, ks=1, shuffle=0)
            if cfg in space:
                out.append(cfg)
                # where the grid leaves units idle: its splits of K too (space rules say where)
                out += [c for c in (cfg.replace(ks=k) for k in SPLITS[1:]) if c in space]
                break
    ms = compute_ms(problem, out, space.constants)
    return [c for _, _, c in sorted(zip(ms, range(len(out)), out))]
