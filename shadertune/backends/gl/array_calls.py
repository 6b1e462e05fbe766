"""A matmul call with GL arrays (platform/arrays.py) among A, B and out: on the GPU end to end.

The result's kind follows the operands, as on the CUDA backend: `out` itself where
given (a GL array is written where it lies; a numpy out gets the result read back
into it), else a new GL array.  A host operand beside a GL array is uploaded once
for the call (and its buffer given back after).

Every operand is a region of a buffer (offset and strides: a view of a larger
matrix is one): a product runs as kernel.run_regions on the regions, with the
problem's trans flags saying which operand is stored transposed (a transposed view,
`A.T`, is read in place by the compute family; the fragment family packs either on
the GPU).  A region that is neither row- nor column-major (a view with a column
step) is copied into a contiguous one on the GPU first.  `out` sharing elements
with A or B (numpy's `a @= b`) gets the product made apart and copied in.  Products
past the device's limits are tiled (tiles.py), the tiles being views.

The 2-D products of matrices and vectors only: a stack (a batch) with a GL array
raises ValueError (GL arrays are matrices and vectors).
"""
from __future__ import annotations

import itertools

import numpy as np

from ...call.host import to_host
from ...core.problem import Problem
from .platform import glraw, regions
from .platform.arrays import GLArray, empty
from .tiles import main_tile, tile_limit, tiles


def run_call(backend, call, plan):
    """Execute `call` (inputs.MatmulCall with a GL array among A, B, out): the result in
    the caller's kind (see the module docstring)."""
    home = backend.arrays
    ctx = home.enter()
    if call.batch:
        raise ValueError(f"matmul: GL arrays take part in 2-D products (matrices and vectors), "
                         f"got stacked operands {call.where}: multiply them one product at a time")
    temps: list[GLArray] = []          # host operands uploaded for this call: released at its end
    try:
        a = _gl_operand(home, call.a.value, "A", temps)
        b = _gl_operand(home, call.b.value, "B", temps)
        out = call.out
        if isinstance(out, GLArray):
            _check_home(home, out, "out")
            dest = out
        else:
            dest = empty(home, call.shape)
            if out is not None:
                temps.append(dest)
                if call.beta != 0.0:         # the C added: out's values
                    dest._assign(np.asarray(to_host(out), np.float32))
        ar = a.region()
        br = b.region().T if call.squeeze_b else b.region()
        cr = dest.region().T if (call.squeeze_b and not call.squeeze_a) else dest.region()
        ran = _gemm(backend, ctx, plan, ar, br, cr, call.alpha, call.beta, home, temps)
        if ran is not None and not temps and a.ndim == 2 and b.ndim == 2 and dest.ndim == 2:
            # one kernel on the caller's arrays where they lie: what the express lane may
            # repeat (express.py), with the config it ran
            plan.repeat = ((home, ran[0], ar, br, cr), ran[1], plan.config(ran[0]))
        if out is None or isinstance(out, GLArray):
            glraw.flush()      # the GPU starts now, while the caller goes on (nothing waits)
            return dest
        out[...] = dest.numpy()              # numpy's casting into the caller's out
        return out
    finally:
        for t in temps:
            t.release()


def trans_flags(call) -> tuple[bool, bool]:
    """Whether the kernel of a call with GL arrays reads A and B transposed (a
    column-major view read in place): what its problem says (calls.problem_of)."""
    flags = []
    for op, column in ((call.a, False), (call.b, call.squeeze_b)):
        x = op.value
        if not isinstance(x, GLArray):
            flags.append(False)              # uploaded contiguous, row-major
            continue
        lay = (x.region().T if column else x.region()).layout()
        flags.append(lay is not None and lay[0] == "T")
    return flags[0], flags[1]


def _check_home(home, x: GLArray, name: str) -> None:
    if x.released:
        raise ValueError(f"matmul: {name} is a GL array that was released (release() on it or "
                         f"on the array it views, or its thread's context ended)")
    x._enter()                               # ContextError: another thread's array
    if x.home is not home:
        raise ValueError(f"matmul: {name} is a GL array of another GL context (another backend "
                         f"or device_index than this call's): move it with .numpy() first")


def _gl_operand(home, value, name: str, temps: list) -> GLArray:
    """A GL array of this call's context: the caller's, or a host operand uploaded."""
    if isinstance(value, GLArray):
        _check_home(home, value, name)
        return value
    host = np.asarray(to_host(value))
    up = empty(home, host.shape)
    temps.append(up)
    up._assign(np.ascontiguousarray(host, np.float32))
    return up


def _gemm(backend, ctx, plan, a, b, c, alpha: float, beta: float, home, temps: list):
    """c <- alpha * a @ b + beta * c on regions (c apart from a and b, else through a
    temporary); (problem, kernel) where one kernel ran on a, b and c themselves (a
    copy made for it is in temps), else None."""
    M, K = a.rows, a.cols
    N = b.cols
    if M == 0 or N == 0:
        return None
    if K == 0:                               # an empty sum: beta * C
        if beta == 0.0:
            regions.fill(ctx, c, 0.0)
        else:
            regions.copy(ctx, c, c, scale=beta)
        return None
    a = _readable(ctx, a, home, temps)
    b = _readable(ctx, b, home, temps)
    if c.overlaps(a) or c.overlaps(b):        # numpy's a @= b: made apart, then copied in
        work = empty(home, (M, N))
        temps.append(work)
        w = work.region()
        if beta != 0.0:
            regions.copy(ctx, c, w)
        _products(backend, plan, a, b, w, alpha, beta)
        regions.copy(ctx, w, c)
        return None
    return _products(backend, plan, a, b, c, alpha, beta)


def _readable(ctx, r, home, temps: list):
    """r where it is row- or column-major (a kernel reads it as it lies), else a
    contiguous copy of it made on the GPU."""
    if r.layout() is not None:
        return r
    tmp = empty(home, (r.rows, r.cols))
    temps.append(tmp)
    regions.copy(ctx, r, tmp.region())
    return tmp.region()


def _products(backend, plan, a, b, c, alpha: float, beta: float):
    """The product in tiles under the device's limits (one tile where it fits); K tiles
    add onto the running result (beta = 1 after the first).  (problem, kernel) where it
    is one tile, else None."""
    ta, tb = a.layout()[0] == "T", b.layout()[0] == "T"
    M, K, N = a.rows, a.cols, b.cols
    limit = tile_limit(backend.device().limits)
    main = main_tile(M, N, K, limit, ta, tb)
    if (main.M, main.N, main.K) == (M, N, K):
        kern = plan.kernel(main)
        kern.run_regions(a, b, c, alpha=alpha, beta=beta)
        return main, kern
    for (m0, m1), (n0, n1) in itertools.product(tiles(M, main.M), tiles(N, main.N)):
        beta_k = beta
        for k0, k1 in tiles(K, main.K):
            p = Problem(m1 - m0, n1 - n0, k1 - k0, trans_a=ta, trans_b=tb)
            kern = plan.kernel(p, adapt=p != main)
            kern.run_regions(a.sub(m0, m1, k0, k1), b.sub(k0, k1, n0, n1), c.sub(m0, m1, n0, n1),
                             alpha=alpha, beta=beta_k)
            beta_k = 1.0
    return None

