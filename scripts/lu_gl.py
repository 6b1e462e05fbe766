"""A LAPACK-style client of GL arrays: blocked right-looking LU without pivoting.

    scripts/lu-gl [--size 2048] [--block 256] [--config auto] [--db STORE] [--repeats 3]
        [--seed 0] [--json FILE]

The matrix (uniform in [-1, 1] plus n on the diagonal: diagonally dominant by rows
and columns, so elimination needs no row exchange) is factored in place into L
(unit lower, below the diagonal) and U.  Each block step of nb columns:

    panel  A[k:, k:e]  comes to the host, is factored there (LAPACK's getrf through
                       scipy where it is installed, checked to exchange no row; else a
                       recursive numpy factorisation), and goes back;
    U12    A[k:e, e:] = inv(L11) @ A[k:e, e:]    one matmul on the GPU (L11's inverse,
                       nb x nb, made on the host);
    update A[e:, e:] -= A[e:, k:e] @ A[k:e, e:]  one matmul on the GPU, on views.

The GL client keeps the matrix on the GPU as a GL array from the first upload to the
last read-back; the numpy client runs the same steps with numpy.matmul on the host's
cores.  scipy.linalg.lu_factor (LAPACK getrf with partial pivoting, which exchanges no
row on this matrix) is timed beside them where scipy is installed.  Reported: the
median seconds of --repeats runs after a warm-up run (kernels built, configs resolved),
the speed-ups, and the errors: ||A - L U|| / ||A|| of each result in float64 and the
GL factors' distance from numpy's.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

try:                                  # LAPACK's panel factorisation and triangular solve
    import scipy.linalg as _sla
except ImportError:                   # pragma: no cover - scipy comes with scikit-learn
    _sla = None

LEAF = 32                             # the numpy panel factorisation's unblocked width


def test_matrix(n: int, seed: int = 0) -> np.ndarray:
    """float32 uniform [-1, 1] plus n on the diagonal: strictly diagonally dominant by
    rows and by columns (no row exchange in elimination)."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)
    A[np.diag_indices(n)] += np.float32(n)
    return A


# --- the host's part: panels and the inverse of L11 ------------------------------------
def panel_factor(P: np.ndarray) -> None:
    """P (m x b, m >= b) <- its LU factors without pivoting, in place: L unit lower
    below the diagonal, U on and above."""
    if _sla is not None:
        lu, piv = _sla.lu_factor(P, overwrite_a=True, check_finite=False)
        if np.any(piv != np.arange(len(piv))):
            raise ValueError("the matrix needs row exchanges: this client factors without pivoting "
                             "(diagonally dominant matrices)")
        if lu is not P:
            P[...] = lu
        return
    _panel_numpy(P)


def _panel_numpy(P: np.ndarray) -> None:
    m, b = P.shape
    if b <= LEAF:
        for j in range(b):                    # the top b x b block, unblocked
            if P[j, j] == 0:
                raise ValueError("a zero pivot: this client factors without pivoting")
            P[j + 1:b, j] /= P[j, j]
            P[j + 1:b, j + 1:] -= np.outer(P[j + 1:b, j], P[j, j + 1:])
        if m > b:                             # the rows below: L21 = A21 inv(U11)
            U = np.triu(P[:b])
            P[b:] = np.linalg.solve(U.T, P[b:].T).T
        return
    h = b // 2
    _panel_numpy(P[:, :h])
    P[:h, h:] = inv_unit_lower(P[:h, :h]) @ P[:h, h:]
    P[h:, h:] -= P[h:, :h] @ P[:h, h:]
    _panel_numpy(P[h:, h:])


def inv_unit_lower(L11: np.ndarray) -> np.ndarray:
    """The inverse of the unit lower triangle of L11 (b x b, float32)."""
    b = L11.shape[0]
    eye = np.eye(b, dtype=np.float32)
    if _sla is not None:
        return _sla.solve_triangular(L11, eye, lower=True, unit_diagonal=True, check_finite=False)
    return np.linalg.solve(np.tril(L11, -1) + eye, eye).astype(np.float32)


# --- the two clients -------------------------------------------------------------------------
def lu_numpy(A: np.ndarray, nb: int) -> np.ndarray:
    """A factored in place with numpy on the host; returns A."""
    n = A.shape[0]
    for k in range(0, n, nb):
        e = min(k + nb, n)
        panel_factor(A[k:, k:e])
        if e < n:
            A[k:e, e:] = inv_unit_lower(A[k:e, k:e]) @ A[k:e, e:]
            A[e:, e:] -= A[e:, k:e] @ A[k:e, e:]
    return A


def lu_gl(A: np.ndarray, nb: int, config="auto", db=None) -> np.ndarray:
    """A's factors, the matrix kept on the GPU as a GL array throughout: one upload,
    the panels moved as the host needs them, one read-back (a new array)."""
    import shadertune
    import shadertune.gl as gl
    n = A.shape[0]
    G = gl.asarray(A)
    for k in range(0, n, nb):
        e = min(k + nb, n)
        P = G[k:, k:e].numpy()
        panel_factor(P)
        G[k:, k:e] = P
        if e < n:
            # U12 = inv(L11) @ A12: out is an operand, so matmul makes it apart and copies it in
            shadertune.matmul(inv_unit_lower(P[:e - k]), G[k:e, e:], out=G[k:e, e:], config=config, db=db)
            shadertune.matmul(G[e:, k:e], G[k:e, e:], out=G[e:, e:], alpha=-1.0, beta=1.0,
                              config=config, db=db)
    return G.numpy()


def lu_scipy(A: np.ndarray) -> np.ndarray:
    lu, piv = _sla.lu_factor(A, overwrite_a=True, check_finite=False)
    if np.any(piv != np.arange(len(piv))):
        raise ValueError("scipy's getrf exchanged rows on a diagonally dominant matrix")
    return lu


# --- checking ----------------------------------------------------------------------------------
def residual(A0: np.ndarray, LU: np.ndarray) -> float:
    """||A0 - L U||_F / ||A0||_F in float64."""
    L = np.tril(LU, -1).astype(np.float64)
    L[np.diag_indices(L.shape[0])] = 1.0
    U = np.triu(LU).astype(np.float64)
    A = A0.astype(np.float64)
    return float(np.linalg.norm(A - L @ U) / np.linalg.norm(A))


def _median_time(fn, A0: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    fn(A0.copy())                                        # warm-up: kernels, configs, caches
    times, out = [], None
    for _ in range(repeats):
        work = A0.copy()
        t0 = time.perf_counter()
        out = fn(work)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run(size: int, block: int, config="auto", db=None, repeats: int = 3, seed: int = 0) -> dict:
    """Both clients (and scipy's lu_factor) on one matrix: times, speed-ups, errors."""
    if size < 1 or block < 1:
        raise ValueError(f"--size and --block must be >= 1, got {size} and {block}")
    A0 = test_matrix(size, seed)
    gl_s, gl_lu = _median_time(lambda W: lu_gl(W, block, config, db), A0, repeats)
    np_s, np_lu = _median_time(lambda W: lu_numpy(W, block), A0, repeats)
    row = {"n": size, "block": block, "config": config if isinstance(config, str) else dict(config),
           "panel": "scipy.linalg.lu_factor (LAPACK getrf, no row exchanged)" if _sla is not None
           else "numpy (recursive, unblocked below 32 columns)",
           "gl_s": gl_s, "numpy_s": np_s, "speedup_vs_numpy": np_s / gl_s,
           "gl_residual": residual(A0, gl_lu), "numpy_residual": residual(A0, np_lu),
           "gl_vs_numpy_factors": float(np.linalg.norm(gl_lu.astype(np.float64) - np_lu)
                                        / np.linalg.norm(np_lu.astype(np.float64))),
           "gflop": 2.0 * size ** 3 / 3.0 / 1e9}
    if _sla is not None:
        sp_s, sp_lu = _median_time(lu_scipy, A0, repeats)
        row.update(scipy_s=sp_s, speedup_vs_scipy=sp_s / gl_s, scipy_residual=residual(A0, sp_lu))
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| n | nb | GL s | numpy s | x numpy | scipy lu_factor s | x scipy | GL error | numpy error |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        sp = f"{r['scipy_s']:.4f} | {r['speedup_vs_scipy']:.2f}" if "scipy_s" in r else "- | -"
        lines.append(f"| {r['n']} | {r['block']} | {r['gl_s']:.4f} | {r['numpy_s']:.4f} | "
                     f"{r['speedup_vs_numpy']:.2f} | {sp} | {r['gl_residual']:.2e} | {r['numpy_residual']:.2e} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lu-gl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=lambda s: [int(x) for x in s.split(",")], default=[2048],
                    help="n, or several: 2048,4096 (default 2048)")
    ap.add_argument("--block", type=int, default=256, help="nb, columns a block step (default 256)")
    ap.add_argument("--config", default="auto", help="the matmul config (default auto; JSON knobs too)")
    ap.add_argument("--db", help="the tuning store auto reads (default: shadertune's)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs after the warm-up (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the rows here (JSON) as well")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    config = json.loads(args.config) if args.config.strip().startswith("{") else args.config
    rows = []
    try:
        for n in args.size:
            row = run(n, args.block, config, args.db, args.repeats, args.seed)
            rows.append(row)
            print(json.dumps(row), flush=True)
    except (ValueError, TypeError) as e:
        print(f"lu-gl: error: {e}", file=sys.stderr)
        return 2
    print(markdown(rows))
    if args.json:
        from shadertune.core.atomic import write_text
        write_text(args.json, json.dumps({"rows": rows}, indent=1))
    return 0
