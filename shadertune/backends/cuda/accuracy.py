"""Error bounds, test data and error measures for float32 GEMMs (3xTF32 and plain
FP32): what scripts/accuracy-3xtf32 reports and docs/accuracy.md states.

Bounds are componentwise: |C_computed - C|_ij <= gamma * (|A| |B|)_ij, with
u = 2^-24 (float32's unit roundoff). notes/cuda-accuracy.md derives them.

- Plain FP32 (any order of K fused or unfused multiply-adds): gamma_K = K u / (1 - K u)
  (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 3.1).
- 3xTF32 as the kernels run it (emulate.py): the split's representation error
  EPS_SPLIT, the tensor-core chains of 3 * merge instructions, the FADD merges and
  the K_G reduction; see bound_3xtf32.
"""
from __future__ import annotations

import math

import numpy as np

from .emulate import BLOCK, HOPPER_NEAB, split_ranges, two_sum

U = 2.0 ** -24   # float32 unit roundoff (round to nearest)
# |a b - (big_a big_b + big_a small_b + small_a big_b)| <= EPS_SPLIT |a| |b|:
# small_a small_b (<= 2^-22), and the 1-ulp residuals a - big_a - small_a (<= 2^-23
# each) times the other operand; 2^-21 plus second-order terms.
EPS_SPLIT = 2.0 ** -21 * (1 + 2.0 ** -20)


def gamma(n: int) -> float:
    """Higham's gamma_n = n u / (1 - n u) for float32 (n u < 1)."""
    if n * U >= 1:
        return math.inf
    return n * U / (1 - n * U)


def eps_block(model: str = "hopper", neab: int = HOPPER_NEAB) -> float:
    """One tensor-core instruction's error, relative to |c| + sum |products|:
    hopper: at most 8 terms lose < 2^(Emax - 23 - neab) each to the alignment, and
    the final truncation < 2^-23 |d|; exact-rz: the truncation; exact-rn: u;
    sequential-rz: 8 truncated additions of partial sums."""
    return {"hopper": BLOCK * 2.0 ** -(23 + neab) + 2.0 ** -23,
            "exact-rz": 2.0 ** -23,
            "exact-rn": U,
            "sequential-rz": BLOCK * 2.0 ** -23}[model]


def chain_factor(merge: int) -> float:
    """c_m: a chain of `merge` k-steps (3 instructions each, small terms first)
    makes an error <= c_m * eps_block * sum |a| |b| over its k-steps. Instruction j
    errs by eps_block times everything summed so far, so k-step i's products are
    counted once per later instruction; the worst case puts all the weight on the
    first k-step: (3 m - 2) big products (scaled by (1 + 2^-11)^2 for |big| <= |x|
    (1 + 2^-11)) and the 2 (3 m) - 1 small ones, 2^-11 relative."""
    t = 2.0 ** -11
    return (3 * merge - 2) * (1 + t) ** 2 + (6 * merge - 1) * t * (1 + t)


def bound_3xtf32(K: int, merge: int = 1, model: str = "hopper", KG: int = 1,
                 neab: int = HOPPER_NEAB) -> float:
    """gamma with |C_3xTF32 - C| <= gamma |A| |B| (componentwise, no underflow):
    (1 + EPS_SPLIT)(1 + c_m eps_b (1 + eps_b)^(3 m))(1 + gamma_(n + KG - 2)) - 1,
    n = the most merges of one K_G split (the first merge adds to 0: exact)."""
    eb = eps_block(model, neab)
    longest = max(e - b for b, e in split_ranges(K, KG))
    n = max(1, -(-longest // (BLOCK * merge)))
    chain = chain_factor(merge) * eb * (1 + eb) ** (3 * merge)
    return (1 + EPS_SPLIT) * (1 + chain) * (1 + gamma(n - 1 + KG - 1)) - 1


def bound_sgemm(K: int) -> float:
    """gamma_K: plain float32 recursive summation of K products (fused or not)."""
    return gamma(K)


# --- data sets ------------------------------------------------------------------------------

def uniform(M: int, N: int, K: int, seed: int = 0):
    """A, B with entries uniform in (-1, 1) (the benchmarks' operands)."""
    rs = np.random.default_rng(seed)
    return (rs.uniform(-1, 1, (M, K)).astype(np.float32), rs.uniform(-1, 1, (K, N)).astype(np.float32))


def wide_range(M: int, N: int, K: int, seed: int = 0, lo: float = -20, hi: float = 20):
    """Entries +-2^U(lo, hi), random signs: 40 binades, so every product sum mixes
    terms 2^80 apart (alignment and truncation at work)."""
    rs = np.random.default_rng(seed)

    def draw(shape):
        return (rs.choice([-1.0, 1.0], shape) * np.exp2(rs.uniform(lo, hi, shape))).astype(np.float32)
    return draw((M, K)), draw((K, N))


def ill_conditioned(M: int, N: int, K: int, t: float, seed: int = 0):
    """A, B whose product cancels, for any shape: A's rows are [x, x + t r] and
    B's columns [y; -y] (x, r, y uniform in (-1, 1), K/2 entries each), so
    a_i . b_j = -t r . y while (|A| |B|)_ij ~ 2 |x| . |y|: rows of A nearly
    orthogonal to columns of B, condition ~ 1/t until float32's rounding of
    x + t r (2^-24 relative) limits it. The k order is shuffled (the same
    permutation for A's columns and B's rows, so A B is unchanged): the
    cancelling pairs fall anywhere, inside one tensor-core instruction or
    across merges. An odd K gets one zero column. Measure the condition with
    `condition` on the float32 data."""
    rs = np.random.default_rng(seed)
    h = K // 2
    x, r = rs.uniform(-1, 1, (M, h)), rs.uniform(-1, 1, (M, h))
    y = rs.uniform(-1, 1, (h, N))
    A = np.concatenate([x, x + t * r, np.zeros((M, K - 2 * h))], axis=1)
    B = np.concatenate([y, -y, np.zeros((K - 2 * h, N))], axis=0)
    perm = rs.permutation(K)
    return A[:, perm].astype(np.float32), B[perm].astype(np.float32)


# --- reference and measures -------------------------------------------------------------------

def reference(A, B) -> np.ndarray:
    """A @ B of float32 operands to ~float64 accuracy even under cancellation:
    the products are exact in float64, summed with two_sum-compensation (Ogita,
    Rump & Oishi's Dot2: error <= u64 |C| + gamma64_K^2 |A| |B|)."""
    A64, B64 = np.asarray(A, np.float64), np.asarray(B, np.float64)
    s = np.zeros((A64.shape[0], B64.shape[1]))
    comp = np.zeros_like(s)
    for k in range(A64.shape[1]):
        s, e = two_sum(s, np.outer(A64[:, k], B64[k]))
        comp += e
    return s + comp


def magnitude(A, B) -> np.ndarray:
    """|A| |B| (float64): what the componentwise bounds scale with."""
    return np.abs(np.asarray(A, np.float64)) @ np.abs(np.asarray(B, np.float64))


def condition(A, B, ref=None) -> float:
    """The product's condition number kappa = || |A| |B| ||_F / || A B ||_F: a
    componentwise error gamma |A| |B| is at most gamma * kappa relative (Frobenius)."""
    ref = reference(A, B) if ref is None else ref
    return float(np.linalg.norm(magnitude(A, B)) / np.linalg.norm(ref))


def rel_error(C, ref) -> float:
    """|| C - ref ||_F / || ref ||_F (the benchmarks' measure); inf if C is not finite."""
    C = np.asarray(C, np.float64)
    if not np.isfinite(C).all():
        return math.inf
    return float(np.linalg.norm(C - ref) / np.linalg.norm(ref))


def componentwise_error(C, ref, mag) -> float:
    """max_ij |C - ref|_ij / (|A| |B|)_ij: the measured counterpart of a bound's gamma."""
    err = np.abs(np.asarray(C, np.float64) - ref)
    return float(np.max(np.where(mag > 0, err / np.where(mag > 0, mag, 1), 0)))
