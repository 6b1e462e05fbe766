"""Geometry of the compute family (family=compute): what a config does with a problem.

A workgroup computes a bm x bn tile of C with (bm / tm) x (bn / tn) invocations;
each invocation owns tm x tn outputs.  Invocations are grouped in 32s, the warp of
NVIDIA's hardware (on other devices a grouping like any other): a group tiles
wm x wn = (32 / lanes_n) * tm x lanes_n * tn of the block, and an invocation owns
its outputs as (tm / 4) x (tn / 4) fragments of 4 x 4, strided by the group's
width, so that neighbouring invocations read neighbouring 16-byte words of shared
memory (a warp's vec4 reads are conflict-free or broadcasts).

Each stage moves a bk-deep slab of A (bm x bk) and B (bk x bn) from global memory
into shared memory, `vec` floats a load; B's slab is stored k-major, A's k-major
when a_t = 1 (vec4 fragment reads; the store transposes) or m-major when a_t = 0
(vector stores; a 16-byte word of 4 k-values a row, read once every 4 k-steps); `pad` floats pad each shared row.  With
db = 1 two slabs alternate and the next stage's loads are in registers while the
current one is multiplied (one barrier a stage); with db = 2 the prefetch goes in two
halves, each loaded before and stored after half of the stage's k-steps, so half
as many registers wait across the FMAs.

Four knobs change how the same tiles are computed, each off (0, or swz 1) in the
kernel the family had before them:
- skew: a slab whose store turns has row k start k // vec words later, so the
  vec rows one load group writes fall in different banks (the store is then
  conflict-free for vec 2 and 4; reads stay base + constant);
- clamp: a row of A or a column of B past the matrix is read at the last one
  (its products land in outputs nobody stores) instead of being replaced by
  zero; only the k bound still selects;
- swz: workgroups walk the tile grid in column strips swz tile rows tall (a
  dispatch's first workgroups share B's columns and a few of A's rows in L2);
- shuffle: A's k-major fragment words are read once per group of lanes_n lanes
  (one word a lane for 4 k-steps) and passed by subgroupShuffle (KHR, subgroups
  of 32);
- kred: the splits of ks > 1 add into C with float atomics (NV_shader_atomic_float)
  after C is set to beta * C, instead of a workspace and a reduce dispatch.

K is cut twice, as Jiang's multi-pass driver does and past it: passes of `np`
k-values run one after the other, each adding its partial product into C (the
owning invocation reads and rewrites its own outputs); within a pass, ks
workgroups split the k-range (split-K across the grid), write partial tiles into a
workspace, and a reduce dispatch adds them into C.  Operands stay as the caller
stored them (row-major, either transpose): nothing is padded or copied on the host.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

WARP = 32            # invocations a group (the NVIDIA warp)
FRAG = 4             # an invocation's outputs come in 4 x 4 fragments
FLOAT = 4            # bytes
# Knobs the family gained after its first stored configs, and their off values (the
# kernel those configs ran): a config that leaves one out means off.
ADDED_KNOBS = {"skew": 0, "clamp": 0, "swz": 1, "shuffle": 0, "kred": 0}
DB_REGISTERS = 12    # registers two slabs hold beyond the prefetch (ComputeLayout.registers)


def one_pass_np(K: int) -> int:
    """The np value that means one pass: K rounded up to 4 (the fragment family's
    full-K value, so that one np domain serves both families)."""
    return -(-max(K, 1) // 4) * 4


def skew_step(width: int, vec: int) -> int:
    """Words a turned slab's rows shift by every vec rows: the invocations that store one
    stored row's vectors (width / vec of them) then write words 1, 2, ... apart across
    rows, and where fewer than 8 share a row the next rows' words fill the gaps (a
    quarter warp's 8 words of 16 bytes cover the 32 banks once)."""
    return max(1, 8 // max(1, width // vec))


def row_words(floats: int, rows: int, vec: int, nbuf: int, skew: int) -> int:
    """vec4 words a shared row holds a stage: its floats (padding included), and with a
    skew room for the last row's shift, rounded so that vec rows apart are a multiple
    of 8 words apart (the skew alone then sets the banks: skew_step)."""
    words = floats // 4
    if not skew:
        return words
    words += skew * ((rows - 1) // vec)
    unit = 8 // math.gcd(8, vec * nbuf)
    return -(-words // unit) * unit


def shared_bytes(rows_a: int, lda4: int, rows_b: int, ldb4: int, nbuf: int) -> int:
    """Bytes of a workgroup's shared slabs."""
    return nbuf * 16 * (rows_a * lda4 + rows_b * ldb4)


@dataclass(frozen=True)
class ComputeLayout:
    M: int
    N: int
    K: int
    batch: int
    trans_a: bool
    trans_b: bool
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    lanes_n: int
    vec: int
    pad: int
    a_t: int
    db: int
    ks: int
    np: int              # k-values a pass (>= K: one pass)
    unroll: object       # k-steps written out per loop body: 4 or 'full' (all bk)
    skew: int = 0        # turned slabs' rows skewed by k // vec words (module docstring)
    clamp: int = 0       # rows/columns past the matrix read clamped, not zeroed
    swz: int = 1         # tile rows a strip of the workgroup walk
    shuffle: int = 0     # A's fragment words through subgroup shuffles
    kred: int = 0        # splits add into C with float atomics

    @classmethod
    def of(cls, problem, config) -> "ComputeLayout":
        """The layout of a config taken from the space (its rules already hold): no
        checks, for ranking many configs fast.  A knob added after the family
        (ADDED_KNOBS) reads as off where a config leaves it out."""
        p = problem
        return cls(p.M, p.N, p.K, p.batch, bool(p.trans_a), bool(p.trans_b),
                   *(int(config[k]) for k in ("bm", "bn", "bk", "tm", "tn", "lanes_n", "vec",
                                              "pad", "a_t", "db", "ks", "np")),
                   config.get("unroll", "full"),
                   *(int(config.get(k, off)) for k, off in ADDED_KNOBS.items()))

    @classmethod
    def plan(cls, problem, config) -> "ComputeLayout":
        """The layout of `config` for `problem`; ValueError names the first rule broken
        (the space's rules prune these configs before anything compiles)."""
        p = problem
        try:
            L = cls.of(p, config)
        except KeyError as e:
            raise ValueError(f"compute config is missing knob {e.args[0]!r}") from None
        why = L.why_invalid()
        if why:
            raise ValueError(f"compute config does not fit {p.M}x{p.N}x{p.K}: {why}")
        return L

    # --- validity: the rules the space states as restrictions, in one place ---
    def why_invalid(self) -> str | None:
        if min(self.M, self.N, self.K) < 1:
            return "M, N, K must be >= 1"
        for name in ("bm", "bn", "bk", "tm", "tn", "lanes_n", "vec", "ks"):
            if getattr(self, name) < 1:
                return f"{name} must be >= 1"
        if self.tm % FRAG or self.tn % FRAG:
            return "tm and tn must be multiples of 4 (4 x 4 fragments)"
        if self.bm % self.tm or self.bn % self.tn:
            return "tm must divide bm and tn divide bn"
        if WARP % self.lanes_n or self.bm % self.wm or self.bn % self.wn:
            return f"a group of {WARP} tiles wm x wn = {self.wm} x {self.wn}, which must divide the block"
        if self.threads % WARP:
            return "invocations a workgroup must be a multiple of 32"
        if self.vec not in (1, 2, 4) or self.bk % max(self.vec, FRAG):
            return "vec must be 1, 2 or 4, and bk a multiple of 4 and of vec"
        if (self.bm * self.bk) % (self.threads * self.vec) or (self.bk * self.bn) % (self.threads * self.vec):
            return "a stage's slabs must split evenly into the workgroup's vector loads"
        if self.loads_a % self.group_size(self.a_along) or self.loads_b % self.group_size(self.b_along):
            return ("an invocation's loads of a slab must come in whole groups (4 / vec along a "
                    "row, 4 rows where the slab turns)")
        if self.a_contiguous % self.vec or self.b_contiguous % self.vec:
            return "vec must divide the contiguous extent of A and of B"
        if self.unroll not in (4, "full"):
            return "unroll must be 4 or 'full'"
        if self.np < self.K and (self.np % self.bk or self.ks > 1):
            return "a pass of np < K must be a whole number of bk slabs, with ks = 1"
        if self.db not in (0, 1, 2):
            return "db must be 0, 1 or 2"
        if self.db == 2 and (self.load_groups < 2 or self.bk < 8):
            return ("db = 2 splits a stage's loads and its k-steps in two halves: it needs two load "
                    "groups or more and bk >= 8")
        if self.skew not in (0, 1) or self.clamp not in (0, 1) or self.shuffle not in (0, 1) \
                or self.kred not in (0, 1):
            return "skew, clamp, shuffle and kred must be 0 or 1"
        if self.swz < 1 or self.swz & (self.swz - 1):
            return "swz must be a power of two"
        if self.shuffle and not (self.a_t and self.lanes_n >= self.tm):
            return ("shuffle = 1 passes A's k-major fragment words (a_t = 1) among the lanes_n lanes "
                    "that share them: lanes_n >= tm")
        if self.kred and self.ks == 1:
            return "kred = 1 adds splits with atomics: it needs ks > 1"
        return None

    # --- the workgroup --------------------------------------------------------
    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def lanes_m(self) -> int:
        return WARP // self.lanes_n

    @property
    def wm(self) -> int:
        return self.lanes_m * self.tm

    @property
    def wn(self) -> int:
        return self.lanes_n * self.tn

    @property
    def warps_n(self) -> int:
        return self.bn // self.wn

    # --- global memory --------------------------------------------------------
    @property
    def a_contiguous(self) -> int:
        """Floats of A that lie side by side in memory: a row of the stored array."""
        return self.M if self.trans_a else self.K

    @property
    def b_contiguous(self) -> int:
        return self.K if self.trans_b else self.N

    @property
    def c_vec(self) -> int:
        """Floats a store of C writes: the widest of 4, 2, 1 that divides N (a wider
        aligned store is never slower, so this is not a knob)."""
        return next(v for v in (4, 2, 1) if self.N % v == 0)

    @property
    def a_along(self) -> bool:
        """Whether A's stored rows run the way its shared rows do (else the store turns
        the slab: loaded 4 rows at a time, stored as words across them)."""
        return self.trans_a == bool(self.a_t)

    @property
    def b_along(self) -> bool:
        return not self.trans_b           # B's shared slab is k-major

    def group_size(self, along: bool) -> int:
        """Vector loads that fill whole vec4 words of shared memory together: 4 / vec
        along a row, or one on each of 4 rows where the slab turns."""
        return 4 // self.vec if along else 4

    @property
    def loads_a(self) -> int:
        """Vector loads of A an invocation issues a stage."""
        return self.bm * self.bk // (self.threads * self.vec)

    @property
    def loads_b(self) -> int:
        return self.bk * self.bn // (self.threads * self.vec)

    @property
    def load_groups(self) -> int:
        """Load groups an invocation issues a stage, A's and B's together (db = 2 issues
        them in two halves)."""
        return (self.loads_a // self.group_size(self.a_along)
                + self.loads_b // self.group_size(self.b_along))

    # --- shared memory ----------------------------------------------------------
    @property
    def nbuf(self) -> int:
        return 2 if self.db else 1

    @property
    def a_skew(self) -> int:
        """Words A's slab rows shift by every vec rows (0: no skew): skew = 1 where A's
        store turns (skew_step)."""
        return skew_step(self.bm if self.trans_a else self.bk, self.vec) if self.skew and not self.a_along else 0

    @property
    def b_skew(self) -> int:
        return skew_step(self.bk if self.trans_b else self.bn, self.vec) if self.skew and not self.b_along else 0

    @property
    def turns(self) -> bool:
        """Whether a slab's store turns (what skew acts on)."""
        return not (self.a_along and self.b_along)

    @property
    def lda4(self) -> int:
        """vec4 words a row of A's shared slab: k-major rows hold bm floats, m-major bk;
        with a skew, room for the last row's shift (row_words)."""
        return row_words((self.bm if self.a_t else self.bk) + self.pad, self.a_rows, self.vec,
                         self.nbuf, self.a_skew)

    @property
    def ldb4(self) -> int:
        return row_words(self.bn + self.pad, self.bk, self.vec, self.nbuf, self.b_skew)

    @property
    def a_rows(self) -> int:
        """Rows of A's shared slab (k-major: bk of them, m-major: bm)."""
        return self.bk if self.a_t else self.bm

    @property
    def shared_bytes(self) -> int:
        return shared_bytes(self.a_rows, self.lda4, self.bk, self.ldb4, self.nbuf)

    # --- registers: accumulators, one step's operands, the prefetched stage ------
    @property
    def in_flight(self) -> int:
        """Floats of a stage's loads in registers at once: all of them (one slab issues
        them together; db = 1 holds them across the FMAs), half with db = 2."""
        floats = (self.loads_a + self.loads_b) * self.vec
        return -(-floats // 2) if self.db == 2 else floats

    @property
    def registers(self) -> int:
        """An estimate of the 32-bit registers an invocation needs (see space.py's budget):
        accumulators, one step's operands, the loads in flight, addresses and loop state,
        and with two slabs the next stage's addresses held across the FMAs (the H200's
        128 x 128 8 x 8 tile took 115-125 registers with one slab, past 128 with db = 1)."""
        held = DB_REGISTERS if self.db else 0
        return self.tm * self.tn + self.tm + self.tn + self.in_flight + 24 + held

    # --- K: passes and splits ----------------------------------------------------
    @property
    def pass_k(self) -> int:
        """k-values a pass covers."""
        return min(self.np, self.K)

    @property
    def passes(self) -> int:
        return -(-self.K // self.pass_k)

    @property
    def ksplit(self) -> int:
        """k-values a split of a pass covers (whole bk slabs)."""
        per = -(-self.pass_k // self.ks)
        return -(-per // self.bk) * self.bk

    def pass_range(self, p: int) -> tuple[int, int]:
        k0 = p * self.pass_k
        return k0, min(k0 + self.pass_k, self.K)

    # --- the grid ------------------------------------------------------------------
    @property
    def tiles_n(self) -> int:
        return -(-self.N // self.bn)

    @property
    def tiles_m(self) -> int:
        return -(-self.M // self.bm)

    @property
    def hc(self) -> int:
        """Tile rows (the grid's y): a checked run is timed in bands of them."""
        return self.tiles_m

    @property
    def workgroups(self) -> int:
        return self.tiles_m * self.tiles_n * self.batch * self.ks

    @property
    def reduces(self) -> bool:
        """Whether splits go through a workspace and a reduce dispatch (ks > 1, kred = 0)."""
        return self.ks > 1 and not self.kred

    @property
    def workspace_floats(self) -> int:
        """Floats of the split-K workspace (0 without one)."""
        return self.ks * self.batch * self.M * self.N if self.reduces else 0

    # --- the buffers (floats) ------------------------------------------------------
    @property
    def a_floats(self) -> int:
        return self.batch * self.M * self.K

    @property
    def b_floats(self) -> int:
        return self.batch * self.K * self.N

    @property
    def c_floats(self) -> int:
        return self.batch * self.M * self.N

    # --- traffic a workgroup moves, for the cost model and the roofline ---------
    def global_floats_per_fma(self) -> float:
        """Floats read from global memory per FMA: each stage loads (bm + bn) x bk for
        bm x bn x bk FMAs."""
        return (self.bm + self.bn) / (self.bm * self.bn)

    def shared_bytes_per_fma(self) -> float:
        """Bytes read from shared memory per FMA: per k-step an invocation reads tm + tn
        floats for tm x tn FMAs (a_t = 0 reads a 16-byte word of 4 k-values per row,
        once every 4 k-steps: the same bytes)."""
        return (self.tm + self.tn) * FLOAT / (self.tm * self.tn)
