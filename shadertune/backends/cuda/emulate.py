"""Bit-faithful CPU emulation of the 3xTF32 kernels' arithmetic (numpy).

What the kernels do (shaders/cuda/gemm_mma.cu, gemm_wgmma.cu), element by
element of C, and what this module reproduces exactly:

1. Split: every float32 x becomes big = tf32(x) and small = tf32(x - big),
   tf32 = round to 10 fraction bits, ties away from zero, by integer bit
   arithmetic ((bits + 0x1000) & ~0x1fff). x - big is exact in float32.
2. Chain: a k-step of 8 is three tensor-core instructions, in this order:
   small_a * big_b, big_a * small_b, big_a * big_b (small_a * small_b is
   dropped). A chain of `merge` k-steps (3 * merge instructions) sums into a
   temporary that starts from zero. mma.sync (MMA = 3) chains one k-step;
   the wgmma kernel (MMA = 4) chains one stage, BK / 8 k-steps (two stages
   on pre-split operands with PS = 2).
3. Merge: the chain's result is added to the float32 accumulator in one
   round-to-nearest FADD.
4. K_G split-K: each split runs 1-3 from zero over its K range (balanced on
   an 8-element grain, as the kernels split); the partials are summed in the
   reduce kernel's fixed order.
5. Stream-K (SK): each tile's K is cut where the persistent blocks' ranges of
   k tiles cross it (streamk.py); each segment runs 1-3 from zero over its
   range, and a tile of several segments sums them from zero in block order.

One tensor-core instruction (k = 8) is, per element, d = c + a_1 b_1 + ... +
a_8 b_8 with TF32 a, b (products exact) and float32 c, d. How that sum is
rounded is not documented by NVIDIA; it is a model here (TC_MODELS):

  hopper         Khattak & Mikaitis's model of the H100 tensor core for TF32
                 (arXiv:2512.07004; their MATLAB-tensor-core models, H100TC.m):
                 the 8 products and c are aligned to the largest exponent
                 Emax, each keeps 23 + 2 fraction bits below 2^Emax (one more
                 when the largest product's significand is >= 2), the bits
                 shifted out are dropped (truncation, no sticky bit), the
                 aligned terms are summed exactly and the sum is truncated
                 (round toward zero) to float32. Subnormals kept. c = 0 takes
                 no part in the alignment.
  exact-rz       the exact sum, truncated once to float32.
  sequential-rz  the products added to c one at a time (k order), every
                 addition truncated to float32.
  exact-rn       the exact sum, rounded once to nearest (no real tensor core:
                 the ideal one, for comparison).

Plain float32 (sgemm): the FMA chain c = fma(a_k, b_k, c), k = 0..K-1, each
rounded to nearest (fused=True, a SIMT SGEMM's order), or c = c + a_k * b_k
with two roundings (fused=False, what numpy float32 arithmetic does).

Exactness: products of float32 (and TF32) values are exact in float64; sums are
made exact by two_sum or by fixed-point integers in float64, and rounded to
float32 by round_f32, which is exact given a float64 pair (hi, lo) with
hi = fl(hi + lo). The exact models fall back to Python's Fraction for the rare
elements whose sum they cannot settle in float64.

Not modelled: alpha != 1 and beta != 0 (the accuracy study computes C = A B),
Inf/NaN inputs, the sign of zero results, and the H100 model's clamp of product
exponents below 2^-133 (no data set here comes near it).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

TC_MODELS = {
    "hopper": "8 products + c aligned to the largest exponent with 2 extra bits, truncated, "
              "summed exactly, truncated to float32 (Khattak & Mikaitis's H100 TF32 model)",
    "exact-rz": "exact sum of the 8 products + c, truncated once to float32",
    "sequential-rz": "products added to c one at a time, each addition truncated to float32",
    "exact-rn": "exact sum of the 8 products + c, rounded once to nearest (an ideal tensor core)",
}
BLOCK = 8            # products per tensor-core instruction (k = 8 for TF32)
HOPPER_NEAB = 2      # the H100 model's extra alignment bits (H100TC.m: neab = 2)
F32_EMIN = -126      # float32's smallest normal exponent
_NO_EXP = -(1 << 20)  # the exponent of a zero term: below any real one (sums of two stay int32)
# The smallest float32 whose TF32 rounding overflows to infinity (bits 0x7f7ff000).
SPLIT_OVERFLOW = np.float32(2.0 ** 128 - 2.0 ** 116)
_EXACT_BITS = 47     # fixed-point bits below 2^Emax in the exact models (sums stay < 2^53)


# --- TF32 split -----------------------------------------------------------------

def tf32_rna(x) -> np.ndarray:
    """x (float32) rounded to TF32 as the kernels do: + half a TF32 ulp on the
    magnitude bits, low 13 bits cleared (ties away from zero; unsigned wrap)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def split_tf32(x) -> tuple[np.ndarray, np.ndarray]:
    """(big, small): big = tf32(x), small = tf32(x - big); x - big is exact in float32."""
    x = np.asarray(x, dtype=np.float32)
    big = tf32_rna(x)
    with np.errstate(invalid="ignore", over="ignore"):
        small = tf32_rna(x - big)
    return big, small


# --- exact rounding to float32 --------------------------------------------------------

def two_sum(a, b) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth; float64, no overflow)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def round_f32(hi, lo=None, mode: str = "rn") -> np.ndarray:
    """float32 of x = hi + lo exactly, where hi = fl64(x) (as two_sum returns):
    mode 'rn' to nearest, ties to even; 'rz' toward zero (overflow to +-FLT_MAX).

    Why the correction is enough: no float64, so no float32, lies strictly
    between x and hi = fl64(x). Rounding hi instead of x can then go wrong only
    where hi itself is a float32 rounding boundary: a midpoint between two
    float32 (rn) or a float32 value (rz), and lo says on which side x lies."""
    hi = np.asarray(hi, dtype=np.float64)
    with np.errstate(over="ignore"):
        y = hi.astype(np.float32)
    if mode == "rz":
        y64 = y.astype(np.float64)
        over = np.abs(y64) > np.abs(hi)
        y = np.where(over, np.nextafter(y, np.float32(0)), y)
        if lo is not None:
            lo = np.asarray(lo, dtype=np.float64)
            inward = (y.astype(np.float64) == hi) & (lo != 0) & (np.sign(lo) != np.sign(hi))
            y = np.where(inward, np.nextafter(y, np.float32(0)), y)
        return y
    if mode != "rn":
        raise ValueError(f"mode must be 'rn' or 'rz', got {mode!r}")
    if lo is None:
        return y
    lo = np.asarray(lo, dtype=np.float64)
    d = hi - y.astype(np.float64)            # exact (Sterbenz); 0 where hi is a float32
    other = np.nextafter(y, np.where(d > 0, np.float32(np.inf), np.float32(-np.inf)))
    midpoint = (d != 0) & (other.astype(np.float64) - hi == d) & (lo != 0)
    beyond = np.sign(lo) == np.sign(d)       # x lies past hi, toward `other`
    return np.where(midpoint & beyond, other, y)


def round_fraction_f32(x: Fraction, mode: str = "rn") -> np.float32:
    """float32 of the rational x (the exact fallback; one element)."""
    hi = float(x)                            # int / int: correctly rounded in CPython
    lo = float(x - Fraction(hi))
    return round_f32(np.float64(hi), np.float64(lo), mode)[()]


# --- one tensor-core instruction ----------------------------------------------------------

def _exponent(x: np.ndarray) -> np.ndarray:
    """floor(log2 |x|) clamped to float32's subnormal exponent (-126); _NO_EXP for 0."""
    _, e = np.frexp(x.astype(np.float64))
    return np.where(x != 0, np.maximum(e - 1, F32_EMIN), _NO_EXP).astype(np.int32)


def block_fma(c, a, b, model: str = "hopper", neab: int = HOPPER_NEAB) -> np.ndarray:
    """d = c + sum_k a[..., k] * b[..., k] as one tensor-core instruction under `model`.

    c: float32 (M, N); a: TF32 values (M, 1, k); b: TF32 values (1, N, k), k <= 8
    (any shapes that broadcast to (M, N, k) with c's (M, N))."""
    c = np.asarray(c, dtype=np.float32)
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    p = a.astype(np.float64) * b.astype(np.float64)       # exact: 11 x 11 (24 x 24) bits
    p = np.broadcast_to(p, c.shape + p.shape[-1:])
    if model == "hopper":
        return _block_aligned(c, a, b, p, neab)
    if model in ("exact-rz", "exact-rn"):
        return _block_exact(c, p, model[-2:])
    if model == "sequential-rz":
        d = c
        for k in range(p.shape[-1]):
            d = round_f32(*two_sum(d.astype(np.float64), p[..., k]), mode="rz")
        return d
    raise ValueError(f"unknown tensor-core model {model!r}; one of {sorted(TC_MODELS)}")


def _block_aligned(c, a, b, p, neab: int) -> np.ndarray:
    """The H100 model (see the module docstring): exponents as the model takes
    them (an input's exponent clamped at -126, products normalised to [1, 2)
    by at most one step), then fixed point on the grid 2^(Emax - 23 - neab - x)."""
    if not 0 <= neab <= 24:
        raise ValueError(f"neab must be in 0..24 (the aligned sum must stay exact), got {neab}")
    ea, eb = _exponent(a), _exponent(b)       # a zero input: _NO_EXP, so its products rank last
    sig = (np.ldexp(np.abs(a.astype(np.float64)), -np.maximum(ea, F32_EMIN))
           * np.ldexp(np.abs(b.astype(np.float64)), -np.maximum(eb, F32_EMIN)))
    unnorm = ea + eb                           # a product's exponent before normalising
    e_prod = unnorm + (sig >= 2)
    top_unnorm, top_prod = unnorm.max(axis=-1), e_prod.max(axis=-1)
    e_c = _exponent(c)
    e_max = np.maximum(top_prod, e_c)
    # One more bit where the largest product (by its unnormalised exponent) has a
    # significand >= 2, i.e. normalising raised the top exponent, and c does not
    # lie above it (the model's carry bit).
    carry = (top_prod == top_unnorm + 1) & ((c == 0) | (top_unnorm >= e_c))
    g = np.where(e_max > _NO_EXP, e_max - 23 - neab - carry, 0)
    q = np.trunc(np.ldexp(p, -g[..., None])).sum(axis=-1) + np.trunc(np.ldexp(c.astype(np.float64), -g))
    return round_f32(np.ldexp(q, g), mode="rz")             # q: an exact integer (< 2^53)


def _block_exact(c, p, mode: str) -> np.ndarray:
    """The exact sum of p's terms and c, rounded once. Fixed point 47 bits below
    the largest term; where the dropped bits could change the float32 result
    (its rounding differs between the sum's lower and upper bound), Fraction."""
    c64 = c.astype(np.float64)
    e_max = np.maximum(_exponent(p).max(axis=-1), _exponent(c))
    g = np.where(e_max > _NO_EXP, e_max - _EXACT_BITS, 0)
    sp, sc = np.ldexp(p, -g[..., None]), np.ldexp(c64, -g)
    qp, qc = np.trunc(sp), np.trunc(sc)
    rp, rc = sp - qp, sc - qc                              # dropped parts, |r| < 1 unit
    n_pos = (rp > 0).sum(axis=-1) + (rc > 0)
    n_neg = (rp < 0).sum(axis=-1) + (rc < 0)
    q = qp.sum(axis=-1) + qc                               # exact: |q| < 9 * 2^48
    lo_bound = round_f32(np.ldexp(q - n_neg, g), mode=mode)
    hi_bound = round_f32(np.ldexp(q + n_pos, g), mode=mode)
    d = lo_bound
    for idx in zip(*np.nonzero(lo_bound != hi_bound)):
        x = sum((Fraction(float(t)) for t in p[idx]), Fraction(float(c64[idx])))
        d[idx] = round_fraction_f32(x, mode)
    return d


# --- the kernels -------------------------------------------------------------------------------

def emulate_3xtf32(A, B, merge: int = 1, model: str = "hopper", KG: int = 1, RZ: int = 1,
                   neab: int = HOPPER_NEAB, streamk: tuple | None = None) -> np.ndarray:
    """C = A @ B (float32, logical M x K and K x N) as the 3xTF32 kernels compute
    it: `merge` k-steps of 8 per round-to-nearest merge (mma.sync: 1; wgmma:
    BK / 8), tensor-core instructions under `model`, KG split-K partials summed
    by RZ lanes of the reduce kernel (RZ = 1: in z order, as KR = 1 does); with
    streamk = (BM, BN, KT, G), stream-K's segments of each tile (point 5)."""
    A, B = _operands(A, B)
    if merge < 1:
        raise ValueError(f"merge must be >= 1 k-step, got {merge}")
    if KG < 1 or RZ < 1 or KG % RZ:
        raise ValueError(f"KG (got {KG}) and RZ (got {RZ}) must be >= 1 with RZ dividing KG")
    if model not in TC_MODELS:
        raise ValueError(f"unknown tensor-core model {model!r}; one of {sorted(TC_MODELS)}")
    M, K = A.shape
    N = B.shape[1]
    a_big, a_small = split_tf32(A)
    b_big, b_small = split_tf32(np.ascontiguousarray(B.T))

    def partial(rows, cols, kbeg, kend):
        acc = np.zeros((rows.stop - rows.start, cols.stop - cols.start), np.float32)
        for c0 in range(kbeg, kend, BLOCK * merge):
            t = np.zeros_like(acc)
            for k0 in range(c0, min(c0 + BLOCK * merge, kend), BLOCK):
                k = slice(k0, min(k0 + BLOCK, kend))
                for x, y in ((a_small, b_big), (a_big, b_small), (a_big, b_big)):
                    t = block_fma(t, x[rows, None, k], y[None, cols, k], model, neab)
            acc = acc + t                                   # the merge: one FADD, to nearest
        return acc
    if streamk is not None:
        return _streamk_tiles(M, N, K, streamk, partial)
    every = slice(0, M), slice(0, N)
    return reduce_splits([partial(*every, kbeg, kend) for kbeg, kend in split_ranges(K, KG)], RZ)


def _streamk_tiles(M: int, N: int, K: int, sk: tuple, partial) -> np.ndarray:
    """C of stream-K (BM, BN, KT, G): each tile's segments' partials, from zero, in
    block order (streamk_fixup.cu; a tile of one segment is that segment's)."""
    from . import streamk
    BM, BN, KT, G = sk
    ntn, kt = -(-N // BN), -(-K // KT)
    tiles = -(-M // BM) * ntn
    W = tiles * kt
    C = np.zeros((M, N), np.float32)
    for t in range(tiles):
        rows = slice(t // ntn * BM, min(M, (t // ntn + 1) * BM))
        cols = slice(t % ntn * BN, min(N, (t % ntn + 1) * BN))
        lo, hi = streamk.tile_blocks(t, kt, G, W)
        parts = []
        for b in range(lo, hi + 1):
            u0, u1 = streamk.block_units(b, G, W)
            k0, k1 = max(u0, t * kt) - t * kt, min(u1, (t + 1) * kt) - t * kt
            parts.append(partial(rows, cols, k0 * KT, min(K, k1 * KT)))
        C[rows, cols] = reduce_splits([np.zeros_like(parts[0])] + parts) if len(parts) > 1 else parts[0]
    return C


def split_ranges(K: int, KG: int, grain: int = BLOCK) -> list[tuple[int, int]]:
    """The kernels' K_G ranges: split z takes grains [z * units / KG, (z + 1) * units / KG)."""
    units = -(-K // grain)
    return [(min(K, grain * (z * units // KG)), min(K, grain * ((z + 1) * units // KG))) for z in range(KG)]


def reduce_splits(parts: list, RZ: int = 1) -> np.ndarray:
    """The K_G reduction's float32 order: lane y sums z = y, y + RZ, ... from 0,
    then the RZ lane sums in order (splitk_reduce.cu; RZ = 1 is KR = 1's z order)."""
    if len(parts) == 1:
        return parts[0]
    lanes = []
    for y in range(RZ):
        s = np.zeros_like(parts[0])
        for z in range(y, len(parts), RZ):
            s = s + parts[z]
        lanes.append(s)
    out = lanes[0]
    for s in lanes[1:]:
        out = out + s
    return out


def emulate_sgemm(A, B, fused: bool = True) -> np.ndarray:
    """Plain float32 C = A @ B in the fixed order k = 0..K-1 from 0: one FMA per
    k rounded to nearest (fused), or the product and the sum each rounded (not
    fused). Both through round_f32 on exact float64 values (the rounding this
    module's other models rely on; the unfused order is what numpy's float32
    arithmetic does, so tests check one against the other)."""
    A, B = _operands(A, B)
    acc = np.zeros((A.shape[0], B.shape[1]), np.float64)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    for k in range(A.shape[1]):
        p = np.outer(A64[:, k], B64[k])                      # exact
        if not fused:
            p = round_f32(p).astype(np.float64)
        acc = round_f32(*two_sum(acc, p)).astype(np.float64)
    return acc.astype(np.float32)


def _operands(A, B) -> tuple[np.ndarray, np.ndarray]:
    A, B = np.asarray(A), np.asarray(B)
    if A.dtype != np.float32 or B.dtype != np.float32:
        raise TypeError(f"A and B must be float32 (the kernels' inputs), got {A.dtype} and {B.dtype}")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"shapes {A.shape} and {B.shape} do not multiply (need M x K and K x N)")
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise ValueError("A and B must be finite (Inf/NaN propagation is not modelled)")
    if max(np.abs(A).max(initial=0), np.abs(B).max(initial=0)) >= SPLIT_OVERFLOW:
        raise ValueError(f"|A| or |B| >= {SPLIT_OVERFLOW:.6g}: the kernels' TF32 split rounds such values "
                         "to infinity (their result is not finite); not modelled")
    return A, B


def for_config(problem, config, sms: int = 132) -> dict:
    """emulate_3xtf32's keyword arguments for a CUDA config (MMA = 3 or 4):
    merge (mma.sync 1; wgmma BK / 8, 2 BK / 8 with PS = 2), KG and the reduce kernel's
    RZ; with stream-K (SK), its tiles and grid on a device of `sms` SMs."""
    from . import streamk
    from .codegen import reduce_shape
    mma = config.get("MMA", 0)
    if mma not in (3, 4):
        raise ValueError(f"not a 3xTF32 config (MMA = {mma}): only MMA = 3 and 4 are emulated")
    kg = config.get("KG", 1)
    rz = reduce_shape(problem, config)[1] if kg > 1 and not config.get("KR", 0) else 1
    # wgmma: a stage's k-steps, two stages' on pre-split operands with PS = 2
    stages = 2 if config.get("PS", 0) == 2 else 1
    kw = {"merge": 1 if mma == 3 else stages * config["BK"] // BLOCK, "KG": kg, "RZ": rz}
    if config.get("SK", 0):
        units = streamk.shape(problem, config["BM"], config["BN"], config["BK"])[2]
        kw["streamk"] = (config["BM"], config["BN"], config["BK"], streamk.grid(units, config["SK"], sms))
    return kw
