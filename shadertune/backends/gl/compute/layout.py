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
current one is multiplied (one barrier a stage).

K is cut twice, as Jiang's multi-pass driver does and past it: passes of `np`
k-values run one after the other, each adding its partial product into C (the
owning invocation reads and rewrites its own outputs); within a pass, ks
workgroups split the k-range (split-K across the grid), write partial tiles into a
workspace, and a reduce dispatch adds them into C.  Operands stay as the caller
stored them (row-major, either transpose): nothing is padded or copied on the host.
"""
from __future__ import annotations

from dataclasses import dataclass

WARP = 32            # invocations a group (the NVIDIA warp)
FRAG = 4             # an invocation's outputs come in 4 x 4 fragments
FLOAT = 4            # bytes


def one_pass_np(K: int) -> int:
    """The np value that means one pass: K rounded up to 4 (the fragment family's
    full-K value, so that one np domain serves both families)."""
    return -(-max(K, 1) // 4) * 4


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

    @classmethod
    def of(cls, problem, config) -> "ComputeLayout":
        """The layout of a config taken from the space (its rules already hold): no
        checks, for ranking many configs fast."""
        p = problem
        return cls(p.M, p.N, p.K, p.batch, bool(p.trans_a), bool(p.trans_b),
                   *(int(config[k]) for k in ("bm", "bn", "bk", "tm", "tn", "lanes_n", "vec",
                                              "pad", "a_t", "db", "ks", "np")),
                   config.get("unroll", "full"))

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

    # --- shared memory ----------------------------------------------------------
    @property
    def nbuf(self) -> int:
        return 2 if self.db else 1

    @property
    def lda4(self) -> int:
        """vec4 words a row of A's shared slab: k-major rows hold bm floats, m-major bk."""
        return ((self.bm if self.a_t else self.bk) + self.pad) // 4

    @property
    def ldb4(self) -> int:
        return (self.bn + self.pad) // 4

    @property
    def a_rows(self) -> int:
        """Rows of A's shared slab (k-major: bk of them, m-major: bm)."""
        return self.bk if self.a_t else self.bm

    @property
    def shared_bytes(self) -> int:
        return self.nbuf * 16 * (self.a_rows * self.lda4 + self.bk * self.ldb4)

    # --- registers: accumulators, one step's operands, the prefetched stage ------
    @property
    def registers(self) -> int:
        """An estimate of the 32-bit registers an invocation needs (see space.py's budget)."""
        prefetch = (self.loads_a + self.loads_b) * self.vec
        return self.tm * self.tn + self.tm + self.tn + prefetch + 24    # + addresses, loop state

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
    def workspace_floats(self) -> int:
        """Floats of the split-K workspace (0 without splits)."""
        return self.ks * self.batch * self.M * self.N if self.ks > 1 else 0

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
