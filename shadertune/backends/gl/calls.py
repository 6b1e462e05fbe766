"""How GLBackend executes one matmul call (Backend.run_call) and its named configs.

A product whose matrices exceed the device's max texture size is split into
tiles of at most that size in M, N and K; K chunks accumulate (each later
chunk adds onto the running result with beta = 1).  The main tile gets the
caller's config as given (checked strictly); a remainder tile gets the same
config moved to fit it, or its own default when nothing near fits.
"""
from __future__ import annotations

import itertools

import numpy as np

from ...host import run_on_host
from ...problem import Problem


def run_call(backend, call, plan):
    """Run `call` on host arrays in float32, tiled under the texture limit."""
    limit = int(backend.device().limits.get("max_texture_size", 4096))
    backend.ctx                   # made current: a thread may hold several (device indices)
    return run_on_host(call, lambda A, B, C, dest: _product(plan, call, limit, A, B, C, dest))


def _tiles(n: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def main_tile(M: int, N: int, K: int, limit: int) -> Problem:
    """The problem of a product's main tile (the whole product when it fits the limit)."""
    return Problem(min(M, limit), min(N, limit), min(K, limit))


def problem_of(backend, call):
    """(the main tile's problem, a note when the product is tiled): what run_call
    resolves a config for."""
    lim = int(backend.device().limits.get("max_texture_size", 4096))
    p = main_tile(call.M, call.N, call.K, lim)
    if p == call.problem:
        return p, None
    return p, (f"matmul tiles {call.M}x{call.N}x{call.K} under the texture limit {lim}: "
               f"the main tile shown")


def _product(plan, call, limit: int, A, B, C, dest) -> None:
    """dest = alpha * A @ B + beta * C for one 2-D product."""
    M, K = A.shape
    N = B.shape[1]
    main = main_tile(M, N, K, limit)
    tm, tn, tk = main.M, main.N, main.K
    if (tm, tn, tk) == (M, N, K) and dest.dtype == np.float32 and dest.flags.c_contiguous:
        # one tile: the kernel reads back straight into the caller's memory
        plan.kernel(main).run(A, B, C, alpha=call.alpha, beta=call.beta, out=dest)
        return
    for (m0, m1), (n0, n1) in itertools.product(_tiles(M, tm), _tiles(N, tn)):
        beta = call.beta
        acc = C[m0:m1, n0:n1] if C is not None else None
        for k0, k1 in _tiles(K, tk):
            p = Problem(m1 - m0, n1 - n0, k1 - k0)
            kern = plan.kernel(p, adapt=p != main)
            acc = kern.run(np.ascontiguousarray(A[m0:m1, k0:k1]), np.ascontiguousarray(B[k0:k1, n0:n1]),
                           acc, alpha=call.alpha, beta=beta)
            beta = 1.0
        dest[m0:m1, n0:n1] = acc


# --- named configs ---------------------------------------------------------------
PRESETS = {
    "fast": "the default config (what matmul runs untuned)",
    "jiang": "Jiang's codegen defaults: one channel (mc 1x1), one render target, 4 k per "
             "pass, no unrolling (his search's starting point)",
    "naive": "one output per fragment (mc 1x1, one render target), all of K in one pass",
}


def preset_config(name: str, problem: Problem) -> dict:
    one = {"glsl": "330", "fetch": "texelFetch", "unroll": 1, "mc": "1x1", "mrt_h": 1, "mrt_w": 1}
    if name == "jiang":
        return {**one, "np": 4}
    if name == "naive":
        return {**one, "np": -(-max(problem.K, 1) // 4) * 4}
    raise KeyError(f"backend 'gl' has no preset {name!r}")
