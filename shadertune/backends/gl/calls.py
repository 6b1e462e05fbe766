"""How GLBackend executes one matmul call (Backend.run_call) and its named configs.

Stacked products (a batch) run as one dispatch of the compute family where the
device has it: the operands go up as the caller's stacks (a 2-D operand stands
for every product, read with a stride of 0) and C comes back into the caller's
`out`.  Otherwise every 2-D product runs on its own (host.run_on_host).

A product whose matrices exceed what one kernel holds (the device's max texture
size; for the compute family, its largest storage buffer) is split into tiles of
at most that size in M, N and K; K chunks accumulate (each later chunk adds onto
the running result with beta = 1).  The main tile gets the caller's config as
given (checked strictly); a remainder tile gets the same config moved to fit it,
or its own default when nothing near fits.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...call.host import accumulator, deliver, destination, host_operands, run_on_host, to_host
from ...core.problem import Problem
from .paths import path_of


def run_call(backend, call, plan):
    """Run `call` on host arrays in float32: a stack in one dispatch where the compute
    family can take it, else one product at a time, tiled under the device's limits."""
    limits = backend.device().limits
    limit = tile_limit(limits)
    backend.ctx                   # made current: a thread may hold several (device indices)
    count = math.prod(call.batch)
    if count > 1 and call.K > 0 and min(call.M, call.N) > 0 and limits.get("compute") \
            and max(call.M, call.N, call.K) <= limit:
        done = _stacked(backend, call, plan, count)
        if done is not None:
            return done
    return run_on_host(call, lambda A, B, C, dest: _product(plan, call, limit, A, B, C, dest))


def tile_limit(limits: dict) -> int:
    """The largest side of a product's tile: the max texture size, and where the device
    has the compute family, no side past what a storage buffer holds square."""
    limit = int(limits.get("max_texture_size", 4096))
    ssbo = int(limits.get("max_ssbo_bytes", 0))
    if limits.get("compute") and ssbo:
        limit = min(limit, math.isqrt(ssbo // 4))
    return limit


def _stacked(backend, call, plan, count: int):
    """The whole stack as one problem of `count` products (one dispatch), or None where
    its config is not of the compute family (the caller then runs the products one by
    one)."""
    problem = Problem(call.M, call.N, call.K, batch=count)
    try:
        config = plan.config(problem)
    except ValueError:
        return None              # no compute config holds this stack (buffer sizes)
    if not path_of(config).batched:
        return None
    A, B = host_operands(call)
    a = _stack(to_host(call.a.value), A, count)
    b = _stack(to_host(call.b.value), B, count)
    C = accumulator(call)
    C = None if C is None else np.ascontiguousarray(C, np.float32).reshape(count, call.M, call.N)
    res, direct = destination(call)
    # the kernel reads back straight into res where res is one C-contiguous stack
    into = res.reshape(count, call.M, call.N) if res.flags.c_contiguous else None
    got = plan.kernel(problem).run(a, b, C, alpha=call.alpha, beta=call.beta, out=into)
    if into is None:
        res[...] = got.reshape(res.shape)
    return deliver(call, res, direct)


def _stack(raw: np.ndarray, broadcast: np.ndarray, count: int) -> np.ndarray:
    """An operand as the kernel takes it: one 2-D matrix where the caller gave one for
    every product (a stride of 0, no copy), else the stack as (count, rows, cols)."""
    core = broadcast.shape[-2:]
    if raw.ndim <= 2:
        return np.ascontiguousarray(broadcast.reshape((-1,) + core)[0], np.float32)
    return np.ascontiguousarray(broadcast, np.float32).reshape((count,) + core)


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
