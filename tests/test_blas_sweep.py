"""Reference BLAS-style sweeps: GEMM and GEMV for sizes 0..9, transposes, alpha in {0, 1, 0.7},
beta in {0, 1, 1.3}, strided and padded views, out of float32 and float64 inside a padded
array whose padding must stay untouched.

Every size 0..9 appears as M, as N and as K (a covering set of shapes, not their product:
each shape costs a kernel compile on llvmpipe, its 72 calls reuse it from the cache).
With beta = 0 out starts as NaN: it must not be read (BLAS convention).
Each element is checked against a float64 reference within its own error bound:
|C - ref| <= 1e-5 (|alpha| |op(A)| |op(B)| + |beta| |C0|).
"""
import itertools

import numpy as np
import pytest

import shadertune

SHAPES = [(m, (3 * m + 1) % 10, (7 * m + 2) % 10) for m in range(10)] + \
         [(1, 1, 1), (9, 9, 9), (1, 9, 9), (9, 1, 9), (9, 9, 1)]
ALPHAS = (0.0, 1.0, 0.7)
BETAS = (0.0, 1.0, 1.3)
PAD = 2           # rows/columns of padding around every view
SENTINEL = -7.25  # what the padding holds


def _view(rng, shape, strided: bool, dtype=np.float64, fill=None):
    """An array of `shape`: contiguous, or a strided view (step 2) into a padded parent;
    returns (view, parent)."""
    if not strided:
        a = rng.standard_normal(shape).astype(dtype) if fill is None else np.full(shape, fill, dtype)
        return a, a
    big = tuple(2 * s + 2 * PAD for s in shape)
    parent = np.full(big, SENTINEL, dtype)
    view = parent[tuple(slice(PAD, PAD + 2 * s, 2) for s in shape)]
    view[...] = rng.standard_normal(shape) if fill is None else fill
    return view, parent


def _check(got, ref, bound):
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert np.all(err <= 1e-5 * bound + 1e-30), float(np.max(err - 1e-5 * bound))


def _padding_untouched(parent, view):
    if parent is view:
        return
    mask = np.ones(parent.shape, bool)
    mask[tuple(slice(PAD, PAD + 2 * s, 2) for s in view.shape)] = False
    assert np.all(parent[mask] == SENTINEL), "matmul wrote outside out"


@pytest.mark.parametrize("M,N,K", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_gemm_sweep(M, N, K):
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    for ta, tb, strided, (alpha, beta) in itertools.product(
            (False, True), (False, True), (False, True), itertools.product(ALPHAS, BETAS)):
        A, _ = _view(rng, (K, M) if ta else (M, K), strided)
        B, _ = _view(rng, (N, K) if tb else (K, N), strided, np.float32)
        opA, opB = (A.T if ta else A), (B.T if tb else B)
        out_dtype = np.float64 if strided else np.float32
        C0 = rng.standard_normal((M, N)) if beta else np.full((M, N), np.nan)
        out, parent = _view(rng, (M, N), strided, out_dtype, fill=C0)
        C0 = out.astype(np.float64)                      # as rounded into out's dtype
        a64, b64 = opA.astype(np.float64), opB.astype(np.float64)
        ref = alpha * (a64 @ b64) + (beta * C0 if beta else 0.0)
        bound = abs(alpha) * (np.abs(a64) @ np.abs(b64)) + (abs(beta) * np.abs(C0) if beta else 0.0)
        got = shadertune.matmul(opA, opB, out, alpha=alpha, beta=beta, config="default")
        assert got is out
        _check(out, ref, bound)
        _padding_untouched(parent, out)


@pytest.mark.parametrize("M,K", [(m, k) for m, _, k in SHAPES[:10]] + [(9, 1), (1, 9)])
def test_gemv_sweep(M, K):
    """y = alpha * op(A) @ x + beta * y and y = alpha * x @ op(A) + beta * y."""
    rng = np.random.default_rng(M * 10 + K)
    for ta, strided, left, (alpha, beta) in itertools.product(
            (False, True), (False, True), (False, True), itertools.product(ALPHAS, BETAS)):
        A, _ = _view(rng, (K, M) if ta else (M, K), strided)
        opA = A.T if ta else A
        a64 = opA.astype(np.float64)
        n_in, n_out = (M, K) if left else (K, M)
        x, _ = _view(rng, (n_in,), strided)
        y0 = rng.standard_normal(n_out) if beta else np.full(n_out, np.nan)
        y, parent = _view(rng, (n_out,), strided, np.float32, fill=y0)
        y0 = y.astype(np.float64)
        prod = x @ a64 if left else a64 @ x
        absprod = np.abs(x) @ np.abs(a64) if left else np.abs(a64) @ np.abs(x)
        ref = alpha * prod + (beta * y0 if beta else 0.0)
        bound = abs(alpha) * absprod + (abs(beta) * np.abs(y0) if beta else 0.0)
        got = shadertune.matmul(x, opA, y, alpha=alpha, beta=beta, config="default") if left else \
            shadertune.matmul(opA, x, y, alpha=alpha, beta=beta, config="default")
        assert got is y
        _check(y, ref, bound)
        _padding_untouched(parent, y)
