"""The 3xTF32 emulator (shadertune/backends/cuda/emulate.py) and the error bounds
(accuracy.py), checked without a GPU: against numpy's float32 arithmetic,
against scalar references written independently here with exact rationals
(Fraction), on cases worked out by hand, and against the bounds."""
import math
from fractions import Fraction

import numpy as np
import pytest

from shadertune.backends.cuda import accuracy as acc
from shadertune.backends.cuda import emulate as em
from shadertune.core.problem import Problem

F32_MAX = Fraction((2 - Fraction(1, 2 ** 23)) * 2 ** 127)


# --- scalar references (exact rationals; independent of the emulator's float64 tricks) -------

def floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


def to_f32(x: Fraction, mode: str) -> np.float32:
    """x rounded to float32 (subnormals included) by integer arithmetic."""
    if x == 0:
        return np.float32(0.0)
    sign, x = (-1 if x < 0 else 1), abs(x)
    e = max(floor_log2(x), -126)
    q = x / Fraction(2) ** (e - 23)
    n = math.floor(q)
    rem = q - n
    if mode == "rn" and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2)):
        n += 1
    v = n * Fraction(2) ** (e - 23)
    if v > F32_MAX:
        return np.float32(sign * (math.inf if mode == "rn" else float(F32_MAX)))
    return np.float32(sign * float(v))


def ref_exact(c, a, b, mode):
    return to_f32(Fraction(float(c)) + sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b)), mode)


def ref_sequential_rz(c, a, b):
    d = Fraction(float(c))
    for x, y in zip(a, b):
        d = Fraction(float(to_f32(d + Fraction(float(x)) * Fraction(float(y)), "rz")))
    return np.float32(float(d))


def ref_hopper(c, a, b, neab=2):
    """Khattak & Mikaitis's model step by step (their Generic_BFMA_TC.m,
    fpbits_IEEE2): integer significands with 23 fraction bits, products >= 2
    normalised by one right shift, `neab` extra bits (+1 for the carry case),
    right shifts to the largest exponent (truncation), exact signed sum, RZ."""
    prods = []
    for x, y in zip(a, b):
        if x == 0 or y == 0:
            continue
        fx, fy = Fraction(float(abs(x))), Fraction(float(abs(y)))
        ex, ey = max(floor_log2(fx), -126), max(floor_log2(fy), -126)
        psig = (fx / Fraction(2) ** ex) * (fy / Fraction(2) ** ey)
        sig = psig * 2 ** 23
        assert sig.denominator == 1          # TF32 x TF32: 20 fraction bits
        sig, e = int(sig), ex + ey
        if psig >= 2:
            sig, e = sig >> 1, e + 1
        prods.append(((x < 0) != (y < 0), sig, e, ex + ey, psig))
    terms = [(neg, sig, e) for neg, sig, e, _, _ in prods]
    if c != 0:
        fc = Fraction(float(abs(c)))
        ec = max(floor_log2(fc), -126)
        sc = fc / Fraction(2) ** ec * 2 ** 23
        assert sc.denominator == 1
        terms.append((c < 0, int(sc), ec))
    if not terms:
        return np.float32(0.0)
    flag = False
    if prods:
        top_u = max(p[3] for p in prods)
        top = max(p[4] for p in prods if p[3] == top_u)
        flag = top >= 2 and (c == 0 or top_u >= max(floor_log2(Fraction(float(abs(c)))), -126))
    n = neab + int(bool(flag))
    e_max = max(e for _, _, e in terms)
    total = sum((-1 if neg else 1) * ((sig << n) >> (e_max - e)) for neg, sig, e in terms)
    return to_f32(Fraction(total) * Fraction(2) ** (e_max - 23 - n), "rz")


REFS = {"hopper": ref_hopper, "exact-rz": lambda c, a, b: ref_exact(c, a, b, "rz"),
        "exact-rn": lambda c, a, b: ref_exact(c, a, b, "rn"), "sequential-rz": ref_sequential_rz}


def bits_equal(x, y) -> bool:
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return bool(np.all((x == y) | (np.isnan(x) & np.isnan(y))))


# --- TF32 split ---------------------------------------------------------------------------

def test_split_of_every_float_in_a_binade():
    """Over all 2^23 floats of [1, 2): big is the nearest TF32 (ties away from
    zero), small the nearest TF32 to the exact rest, and x - big - small is at
    most 2^-23 = one float32 ulp (the bound's split lemma), attained."""
    worst = 0.0
    for start in range(0, 1 << 23, 1 << 20):
        x = (np.arange(start, start + (1 << 20), dtype=np.uint32) | np.uint32(0x3F800000)).view(np.float32)
        big, small = em.split_tf32(x)
        x64 = x.astype(np.float64)
        assert np.array_equal(np.floor(x64 * 2 ** 10 + 0.5) / 2 ** 10, big)
        r = x64 - big                                   # exact rest, |r| <= 2^-11
        e = np.floor(np.log2(np.where(r != 0, np.abs(r), 1.0)))
        ulp = np.exp2(e - 10)
        assert np.array_equal(np.sign(r) * np.floor(np.abs(r) / ulp + 0.5) * ulp, small)
        worst = max(worst, float(np.abs(r - small).max()))
    assert worst == 2.0 ** -23


def test_split_at_the_ends_of_the_float32_range():
    """The integer rounding works on the bit pattern, so TF32's grid continues
    into the subnormals at 2^-136: a rest below 2^-137 is lost (the split's
    absolute error floor, 2^-137), and the tiniest subnormals vanish entirely.
    At the top, |x| >= 2^128 - 2^116 rounds big to infinity (the kernels'
    product is then not finite; the emulator refuses such inputs)."""
    x = np.array([-1.5, 3e-39, -1e-45, 3.4e38, -0.0, 2.0 ** -126 * 1.75, 2.0 ** -120 * 1.2345], np.float32)
    big, small = em.split_tf32(x)
    assert (big.view(np.uint32) & 0x1FFF == 0).all() and (small.view(np.uint32) & 0x1FFF == 0).all()
    x64 = x.astype(np.float64)
    assert np.all(np.abs(x64 - big - small) <= np.maximum(2.0 ** -23 * np.abs(x64), 2.0 ** -137))
    assert big[2] == 0 and small[2] == 0 and x[2] != 0
    assert np.abs(x64[6] - big[6] - small[6]) > 2.0 ** -23 * abs(x64[6])      # the floor, not the relative bound
    top = np.array([2.0 ** 128 - 2.0 ** 116, np.nextafter(np.float32(2.0 ** 128 - 2.0 ** 116), np.float32(0))],
                   np.float32)
    assert np.isinf(em.tf32_rna(top[0])) and np.isfinite(em.tf32_rna(top[1]))
    with pytest.raises(ValueError, match="split"):
        em.emulate_3xtf32(top[:1].reshape(1, 1), np.ones((1, 1), np.float32))


def test_split_error_bound_holds_and_is_nearly_attained():
    rs = np.random.default_rng(3)
    a, b = (rs.uniform(1, 2, 200_000).astype(np.float32) for _ in range(2))
    (ab, as_), (bb, bs) = em.split_tf32(a), em.split_tf32(b)
    p3 = ab.astype(np.float64) * bb + ab.astype(np.float64) * bs + as_.astype(np.float64) * bb
    rel = np.abs(a.astype(np.float64) * b - p3) / (a.astype(np.float64) * b)
    assert rel.max() <= acc.EPS_SPLIT
    assert rel.max() > 0.75 * 2.0 ** -21         # 4M samples reach 0.98 * 2^-21


# --- exact rounding ----------------------------------------------------------------------------

def _pairs(rs, n):
    """(hi, lo) = two_sum(x, y) pairs near float32 rounding boundaries: float32
    values and midpoints (normal, subnormal, near the overflow threshold)
    plus or minus tiny amounts, and random sums."""
    y = np.concatenate([rs.uniform(-4, 4, n), np.exp2(rs.uniform(-149, -120, n)) * rs.choice([-1, 1], n),
                        rs.uniform(3.3e38, 3.4e38, n) * rs.choice([-1, 1], n)]).astype(np.float32)
    up = np.nextafter(y, np.float32(np.inf)).astype(np.float64)
    mid = (y.astype(np.float64) + up) / 2
    base = np.concatenate([y.astype(np.float64), mid, rs.uniform(-10, 10, y.size)])
    tiny = np.abs(base) * 2.0 ** -60 * rs.choice([-1.0, 0.0, 1.0], base.size) + rs.choice([0, 1e-300], base.size)
    return em.two_sum(base, tiny)


@pytest.mark.parametrize("mode", ["rn", "rz"])
def test_round_f32_is_exact_rounding(mode):
    hi, lo = _pairs(np.random.default_rng(5), 300)
    got = em.round_f32(hi, lo, mode)
    want = [to_f32(Fraction(float(h)) + Fraction(float(l)), mode) for h, l in zip(hi, lo)]
    assert bits_equal(got, np.array(want, np.float32))


def test_unfused_plain_fp32_equals_numpy_float32_in_the_same_order():
    """numpy's float32 arithmetic (IEEE, round to nearest) is the oracle for the
    emulator's rounding: c = c + a_k * b_k, k in order, bit for bit."""
    A, B = acc.wide_range(9, 11, 300, seed=2, lo=-75, hi=55)    # subnormal products and sums too
    want = np.zeros((9, 11), np.float32)
    with np.errstate(under="ignore", over="ignore"):
        for k in range(300):
            want = want + A[:, k, None] * B[None, k, :]
    assert bits_equal(em.emulate_sgemm(A, B, fused=False), want)


def test_fused_plain_fp32_equals_exact_fma_chain():
    A, B = acc.wide_range(4, 5, 40, seed=4)
    got = em.emulate_sgemm(A, B, fused=True)
    for i in range(4):
        for j in range(5):
            c = Fraction(0)
            for k in range(40):
                c = Fraction(float(to_f32(c + Fraction(float(A[i, k])) * Fraction(float(B[k, j])), "rn")))
            assert got[i, j] == np.float32(float(c))


# --- one tensor-core instruction ---------------------------------------------------------------

def _blocks(rs, kind, M=5, N=6, k=8):
    """c (M, N) float32 and TF32 a (M, 1, k), b (1, N, k) of one kind."""
    def tf32(x):
        return em.tf32_rna(np.asarray(x, np.float32))
    if kind == "uniform":
        a, b, c = rs.uniform(-1, 1, (M, 1, k)), rs.uniform(-1, 1, (1, N, k)), rs.uniform(-2, 2, (M, N))
    elif kind == "wide":
        def draw(s):
            return rs.choice([-1, 1], s) * np.exp2(rs.uniform(-30, 30, s))
        a, b, c = draw((M, 1, k)), draw((1, N, k)), draw((M, N))
    elif kind == "carry":           # products with significands >= 2, c near them
        a = rs.choice([-1, 1], (M, 1, k)) * rs.uniform(1.4, 2, (M, 1, k))
        b = rs.choice([-1, 1], (1, N, k)) * rs.uniform(1.4, 2, (1, N, k)) * np.exp2(rs.integers(-3, 3, (1, N, k)))
        c = rs.uniform(-8, 8, (M, N)) * np.exp2(rs.integers(-30, 3, (M, N)))
    elif kind == "cancel":          # c cancels the products' sum but for its last bits
        a, b = rs.uniform(-1, 1, (M, 1, k)), rs.uniform(-1, 1, (1, N, k))
        s = (tf32(a).astype(np.float64) * tf32(b)).sum(-1)
        c = -s * (1 + rs.uniform(-1e-6, 1e-6, (M, N)))
    elif kind == "tiny":            # subnormal inputs and c
        a = rs.choice([-1, 1], (M, 1, k)) * np.exp2(rs.uniform(-140, -110, (M, 1, k)))
        b = rs.uniform(-1, 1, (1, N, k))
        c = rs.choice([-1, 1], (M, N)) * np.exp2(rs.uniform(-149, -120, (M, N)))
    a, b = tf32(a), tf32(b)
    a[0, 0, :3] = 0                 # zero inputs take no part
    c = np.asarray(c, np.float32)
    c[1, :2] = 0
    return c, a, b


@pytest.mark.parametrize("model", sorted(em.TC_MODELS))
@pytest.mark.parametrize("kind", ["uniform", "wide", "carry", "cancel", "tiny"])
def test_block_fma_matches_the_model_s_scalar_reference(model, kind):
    rs = np.random.default_rng(hash((model, kind)) % 2 ** 32)
    for k in (8, 5):
        c, a, b = _blocks(rs, kind, k=k)
        with np.errstate(under="ignore"):
            got = em.block_fma(c, a, b, model)
        ref = REFS[model]
        want = np.array([[ref(c[i, j], a[i, 0], b[0, j]) for j in range(c.shape[1])] for i in range(c.shape[0])])
        assert bits_equal(got, want), (model, kind, k)


def test_models_differ_where_truncation_matters():
    """1 - 2^-40 (c = 1, one product -2^-40): the aligned adder drops the product
    (it lies below 2^-25), exact truncation lands one float32 below 1, rounding
    to nearest returns 1."""
    c = np.ones((1, 1), np.float32)
    a = np.array([[[2.0 ** -20]]], np.float32)
    b = np.array([[[-2.0 ** -20]]], np.float32)
    got = {m: em.block_fma(c, a, b, m)[0, 0] for m in em.TC_MODELS}
    below_one = np.nextafter(np.float32(1), np.float32(0))
    assert got == {"hopper": 1.0, "exact-rz": below_one, "sequential-rz": below_one, "exact-rn": 1.0}


def test_hopper_carry_bit_keeps_one_more_bit():
    """1.5 * 1.5 - 1.5 * 1.5 + 2^-13 * 2^-12: the top product's significand is
    2.25 >= 2, so the grid is 2^(1 - 23 - 3) = 2^-25 and 2^-25 survives; 2^-26
    would not (the exact models keep both)."""
    c = np.zeros((1, 1), np.float32)
    b = np.array([[[1.5, -1.5, 2.0 ** -12]]], np.float32)
    for tiny, hopper in ((2.0 ** -13, 2.0 ** -25), (2.0 ** -14, 0.0)):
        a = np.array([[[1.5, 1.5, tiny]]], np.float32)
        assert em.block_fma(c, a, b, "hopper")[0, 0] == hopper
        assert em.block_fma(c, a, b, "exact-rz")[0, 0] == tiny * 2.0 ** -12


# --- the kernels' whole product ---------------------------------------------------------------

def test_dropped_small_times_small_is_the_only_error_of_one_product():
    """(1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: big = 1, small = 2^-12, and 3xTF32
    drops small * small = 2^-24, in every model."""
    x = np.array([[1 + 2.0 ** -12]], np.float32)
    for model in em.TC_MODELS:
        assert em.emulate_3xtf32(x, x, model=model)[0, 0] == np.float32(1 + 2.0 ** -11)


def test_small_integers_are_exact_in_every_model_and_merge():
    rs = np.random.default_rng(6)
    A = rs.integers(-8, 9, (6, 70)).astype(np.float32)
    B = rs.integers(-8, 9, (70, 5)).astype(np.float32)
    want = A.astype(np.int64) @ B.astype(np.int64)
    for model in em.TC_MODELS:
        for merge in (1, 3, 9):
            assert np.array_equal(em.emulate_3xtf32(A, B, merge=merge, model=model), want)


def test_split_k_runs_each_range_from_zero_and_reduces_in_the_kernel_s_order():
    A, B = acc.wide_range(7, 9, 200, seed=8)
    ranges = em.split_ranges(200, 4)
    assert ranges == [(0, 48), (48, 96), (96, 144), (144, 200)]     # grains of 8, balanced
    W = [em.emulate_3xtf32(A[:, b:e], B[b:e], merge=2) for b, e in ranges]
    got = em.emulate_3xtf32(A, B, merge=2, KG=4, RZ=2)
    assert bits_equal(got, (W[0] + W[2]) + (W[1] + W[3]))            # lanes z = 0, 2 and 1, 3
    assert bits_equal(em.emulate_3xtf32(A, B, merge=2, KG=4), ((W[0] + W[1]) + W[2]) + W[3])


def test_for_config_maps_the_kernels():
    p = Problem(32, 32, 60000, trans_b=True)
    base = dict(BM=64, BN=64, BK=32, TM=4, TN=4, WM=64, WN=64, trans=1, VEC=4, PAD=4, DB=1, ST=3, KL=1)
    assert em.for_config(p, {**base, "MMA": 3, "KG": 1, "KR": 0}) == {"merge": 1, "KG": 1, "RZ": 1}
    assert em.for_config(p, {**base, "MMA": 4, "KG": 1, "KR": 0}) == {"merge": 4, "KG": 1, "RZ": 1}
    assert em.for_config(p, {**base, "MMA": 4, "BK": 16, "KG": 64, "KR": 0}) == {"merge": 2, "KG": 64, "RZ": 8}
    assert em.for_config(p, {**base, "MMA": 4, "KG": 64, "KR": 1})["RZ"] == 1
    # pre-split operands: PS = 1 chains a stage, PS = 2 two stages
    assert em.for_config(p, {**base, "MMA": 4, "KG": 1, "KR": 0, "PS": 1})["merge"] == 4
    assert em.for_config(p, {**base, "MMA": 4, "BK": 16, "KG": 1, "KR": 0, "PS": 2})["merge"] == 4
    with pytest.raises(ValueError, match="not a 3xTF32 config"):
        em.for_config(p, {**base, "MMA": 0, "KG": 1, "KR": 0})


def test_split_grain_is_the_kernels():
    from shadertune.backends.cuda.space import _k_units
    assert _k_units(Problem(64, 64, 1000)) == (em.BLOCK, 125)


@pytest.mark.parametrize("bad, err", [
    ((np.ones((2, 3)), np.ones((3, 2), np.float32)), TypeError),
    ((np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)), ValueError),
    ((np.full((2, 3), np.nan, np.float32), np.ones((3, 2), np.float32)), ValueError),
])
def test_bad_operands_are_refused(bad, err):
    with pytest.raises(err):
        em.emulate_3xtf32(*bad)


def test_bad_parameters_are_refused():
    A = np.ones((2, 8), np.float32)
    with pytest.raises(ValueError, match="merge"):
        em.emulate_3xtf32(A, A.T.copy(), merge=0)
    with pytest.raises(ValueError, match="RZ"):
        em.emulate_3xtf32(A, A.T.copy(), KG=4, RZ=3)
    with pytest.raises(ValueError, match="model"):
        em.emulate_3xtf32(A, A.T.copy(), model="volta")


# --- errors against the bounds --------------------------------------------------------------

@pytest.mark.parametrize("data", ["uniform", "wide", "positive"])
@pytest.mark.parametrize("model", ["hopper", "sequential-rz"])
def test_errors_stay_within_the_componentwise_bound(data, model):
    M, N, K = 12, 10, 512
    if data == "uniform":
        A, B = acc.uniform(M, N, K, seed=9)
    elif data == "wide":
        A, B = acc.wide_range(M, N, K, seed=9)
    else:           # one sign everywhere: truncation errors add up, nothing cancels
        A, B = (np.abs(x) for x in acc.uniform(M, N, K, seed=9))
    ref, mag = acc.reference(A, B), acc.magnitude(A, B)
    for merge in (1, 2, 4, 8, K // 8):
        err = acc.componentwise_error(em.emulate_3xtf32(A, B, merge=merge, model=model), ref, mag)
        assert err <= acc.bound_3xtf32(K, merge, model), (merge, err)
    assert acc.componentwise_error(em.emulate_sgemm(A, B), ref, mag) <= acc.bound_sgemm(K)


def test_long_truncating_chains_lose_accuracy():
    """Run O's failure: summing all of K in the tensor cores (one chain) is far
    less accurate on one-signed data than merging every k-step, and its bound
    is above plain float32's, while merging every k-step is well below it."""
    M, N, K = 8, 8, 1024
    A, B = (np.abs(x) for x in acc.uniform(M, N, K, seed=10))
    ref = acc.reference(A, B)
    e1 = acc.rel_error(em.emulate_3xtf32(A, B, merge=1), ref)
    e_all = acc.rel_error(em.emulate_3xtf32(A, B, merge=K // 8), ref)
    assert e_all > 20 * e1
    assert acc.bound_3xtf32(K, 1) < acc.bound_sgemm(K) / 4 < acc.bound_sgemm(K) < acc.bound_3xtf32(K, K // 8)


def test_reference_survives_cancellation():
    """The compensated reference agrees with exact rational sums where plain
    float64 would not: an ill-conditioned product (kappa ~ 1e7)."""
    A, B = acc.ill_conditioned(4, 3, 64, t=1e-9, seed=11)
    ref = acc.reference(A, B)
    exact = [[sum(Fraction(float(A[i, k])) * Fraction(float(B[k, j])) for k in range(64)) for j in range(3)]
             for i in range(4)]
    assert np.allclose(ref, np.array(exact, dtype=np.float64), rtol=1e-14, atol=0)
    assert acc.condition(A, B, ref) > 1e5
