"""Stream-K (knob SK), the tensor-core kernels' persistent schedule: the same
arithmetic as the kernels in Python, for the driver (grid, workspace), the cost
model, the emulator and the tests.

Work units are the output's tiles (row-major over its N tiles) times each tile's
k tiles of KT: unit i is k tile i % kt of tile i // kt. A grid of G = min(SK x
SMs, units) blocks splits the units into G equal ranges, block b taking units
[b W / G, (b + 1) W / G) (W units in all; every block gets at least one). A
block runs its range as segments, one tile's run of k tiles each. A segment that
covers its whole tile writes C; the others write their partial sum to a slot of
the workspace and count themselves on the tile's counter. Of a block's segments
only its first and its last can share a tile with another block, so block b's
partials take slots 2 b (its first segment) and 2 b + 1 (its last): 2 G slots,
whatever the number of tiles; the segment that brings the count to
the tile's number of segments sums the tile's slots in block order (a fixed
order, whoever comes last) and writes C. No block waits for another, so no
schedule can deadlock.

shaders/cuda/streamk_loop.cu and streamk_fixup.cu compute the same ranges; the
tests check these formulas cover every unit once and give unique slots.
"""
from __future__ import annotations

from ...core.problem import Problem


def shape(problem: Problem, BM: int, BN: int, KT: int) -> tuple[int, int, int]:
    """(tiles, k tiles per tile, units) of one product."""
    tiles = -(-problem.M // BM) * -(-problem.N // BN)
    kt = -(-problem.K // KT)
    return tiles, kt, tiles * kt


def grid(units: int, sk: int, sms: int) -> int:
    """Blocks of the persistent grid: SK a streaming multiprocessor, at most one a unit."""
    return max(1, min(sk * sms, units))


def block_units(b: int, G: int, W: int) -> tuple[int, int]:
    """[start, end) of block b's units."""
    return b * W // G, (b + 1) * W // G


def block_of(i: int, G: int, W: int) -> int:
    """The block whose range holds unit i: the largest b with b W / G <= i."""
    return ((i + 1) * G - 1) // W


def segments(b: int, G: int, W: int, kt: int) -> list[tuple[int, int, int]]:
    """Block b's segments, in order: (tile, first k tile, end k tile)."""
    at, end = block_units(b, G, W)
    out = []
    while at < end:
        t, k0 = divmod(at, kt)
        k1 = min(kt, k0 + (end - at))
        out.append((t, k0, k1))
        at += k1 - k0
    return out


def tile_blocks(t: int, kt: int, G: int, W: int) -> tuple[int, int]:
    """(first, last) block holding units of tile t: the tile's segments are those
    blocks', one each."""
    return block_of(t * kt, G, W), block_of((t + 1) * kt - 1, G, W)


def slot(b: int, t: int, kt: int, G: int, W: int) -> int:
    """The workspace slot of block b's partial of tile t: 2 b + 1 where b's range
    began before the tile (the tile is b's last segment), else 2 b (its first)."""
    return 2 * b + (block_units(b, G, W)[0] < t * kt)


def workspace(G: int, BM: int, BN: int) -> int:
    """Elements of the partials' workspace: 2 G slots of BM x BN."""
    return 2 * G * BM * BN


def busiest(units: int, G: int, sms: int) -> tuple[int, int]:
    """(units on the busiest SM, blocks resident on it): ceil(G / sms) blocks of at
    most ceil(W / G) units each."""
    per_sm = -(-G // sms)
    return per_sm * -(-units // G), per_sm


def partial_segments(tiles: int, kt: int, G: int, W: int) -> int:
    """Segments that write a partial (their tile has more than one): what the
    fixup moves through L2, twice (written, read)."""
    n = 0
    for t in range(tiles):
        lo, hi = tile_blocks(t, kt, G, W)
        if hi > lo:
            n += hi - lo + 1
    return n


def partial_estimate(tiles: int, kt: int, G: int) -> int:
    """partial_segments without the loop over tiles (the cost model's): none where
    every block takes whole tiles, else two a block boundary (an upper bound)."""
    W = tiles * kt
    return 0 if W % G == 0 and (W // G) % kt == 0 else 2 * (G - 1)


# The most blocks a grid may have here: SK <= 2 blocks an SM, at most 256 SMs.
MAX_GRID = 512


def index_type(units: int) -> str:
    """The kernels' type of unit indices: 32 bits where units x MAX_GRID fit (the
    block ranges' products), else 64 (a 64-bit division costs ptxas ~40
    registers: shaders/cuda/streamk_loop.cu)."""
    return "unsigned" if units * MAX_GRID < 2 ** 32 else "unsigned long long"
