"""matmul's express lane on the GL backend: the steady state of a call on GL arrays.

A call whose A and B are 2-D GL arrays (platform/arrays.py) of the door's home and
whose `out` is one too or None, run by the regular path (check_call -> run_call ->
array_calls) as one kernel's run_regions that reads A and B and writes C where they
lie (the compute family's in-place places: no upload, no copy of a strided
operand, no tile, no copy in or out of the kernel's own buffers, no temporary for
an out that overlaps), is described by its key: the config (a name or JSON text, a
Config, a dict's items: front/matmul._lane_config), where `auto` reads (`db`) and
each array's geometry (shape, strides and offset in elements: the layout kind and
leading dimension follow from them).  Not the buffers: a chain swaps X and Y (the
same geometry in other buffers) and out=None makes a new result every call.  Once
such a call has run the regular way, the lane keeps the kernel's launcher for the
key (ComputeKernel.launcher: the same program, uniforms, bindings and barriers,
GL's error flag checked, then glFlush); a later call with the same key binds this
call's buffers and dispatches, and does nothing else.

What the regular path decides from values the key does not hold is asked again
each call, and the call takes the regular path where any answer differs (which
then raises the regular path's error, if any):
- every array's storage is not released, lives in the door's home (its context,
  not another backend's or device's), the calling thread is the home's, its
  context is open and the process is the one that learned (not a forked child);
- `out` shares no element with A or B this call (the regular path then computes
  through a temporary, as numpy does);
- the kernel was not released (matmul's kernel cache releases what it drops; the
  lane marks it used in the cache on the recheck clock below);
- config='auto': the selection must still name the kept config, asked again on the
  rules of the CUDA lane: at most RECHECK_S after the last time, at once after a
  commit of this process to any store (the change counter the door hands over,
  db/changes.py) and, for the default store, when SHADERTUNE_DB, XDG_CACHE_HOME or
  HOME changed;
- a buffer texture (a_src / b_src = 'texture') must show the whole of a buffer it
  views (the launcher answers False otherwise: the regular path copies).
alpha and beta are the call's own (Python floats and ints; matmul converts).
Anything else takes the regular path: a key never seen, 1-D operands, host
operands, a fragment-family config (it packs its operands), a dict config whose
values cannot be hashed.  What a call costs: docs/gl.md, "What a repeated call does".
"""
from __future__ import annotations

import os
import threading

from ..express_rules import Lane, Plan
from .platform.arrays import GLArray, empty
from .platform.context import context_closed


class _Plan(Plan):
    """One learned call: what the regular path ran for its key."""
    __slots__ = ("home", "kkey", "kernel", "config", "problem", "auto", "go", "shape", "pid", "due",
                 "generation", "env")


def _geometry(x: GLArray) -> tuple:
    return x._shape, x._strides, x._offset


class Express(Lane):
    """The lane of one door (front/matmul.Door): learn() after a regular call, run() before one."""

    def __init__(self, door):
        super().__init__(door)
        self.hits = 0                   # calls the lane ran (tests and profiles read it)

    # --- the regular path tells what it ran -------------------------------------
    def learn(self, A, B, out, config, db, call, launch, kernel, cfg, auto: bool) -> None:
        """Keep the launch of a regular call that the lane may repeat (see the module).
        `launch` is array_calls' record: (home, problem, a, b, c), the home the arrays
        live in, the kernel's problem and the regions it ran on."""
        home, problem, a, b, c = launch
        if (type(A) is not GLArray or type(B) is not GLArray or A.ndim != 2 or B.ndim != 2
                or (out is not None and (type(out) is not GLArray or out.ndim != 2))
                or home is not self.backend.arrays):
            return
        launcher = getattr(kernel, "launcher", None)
        go = None if launcher is None else launcher(a, b, c)
        if go is None:                  # a fragment kernel, or a place it copies
            return
        key = (config, db, _geometry(A), _geometry(B), None if out is None else _geometry(out))
        shape = (c.rows, c.cols)
        plan = _Plan(home=home, kkey=(problem, cfg), kernel=kernel, config=cfg, problem=problem, auto=auto,
                     go=go, shape=shape, pid=os.getpid())
        self._keep(key, plan, db)

    # --- a call ----------------------------------------------------------------
    def run(self, A, B, out, config, alpha: float, beta: float, db):
        """The result of a learned call, or None: take the regular path."""
        if type(A) is not GLArray or type(B) is not GLArray:
            return None
        if out is None:
            where = None
        elif type(out) is GLArray:
            where = out._shape, out._strides, out._offset
        else:
            return None
        key = (config, db, (A._shape, A._strides, A._offset), (B._shape, B._strides, B._offset), where)
        try:
            plan = self._plans.get(key)
        except TypeError:                # a dict config with an unhashable value: never learned
            return None
        if plan is None:
            return None
        home = plan.home
        sa, sb = A._storage, B._storage
        if (sa.home is not home or sb.home is not home or home.thread != threading.get_ident()
                or plan.pid != os.getpid() or context_closed(home.raw_ctx)
                or not sa.finalizer.alive or not sb.finalizer.alive):
            return None
        so = None
        if out is not None:
            so = out._storage
            if so.home is not home or not so.finalizer.alive:
                return None
            if (so is sa or so is sb) and _overlaps(out, A, B):
                return None
        home.enter()                     # current here; buffers other threads dropped go back
        if not self._valid(plan, db):
            return None
        made = None
        if so is None:
            made = empty(home, plan.shape)          # as the regular path makes the result
            so = made._storage
        if not plan.go(sa.buffer, sb.buffer, so.buffer, alpha, beta):
            if made is not None:
                made.release()
            return None
        self.hits += 1
        return out if made is None else made


def _overlaps(out: GLArray, A: GLArray, B: GLArray) -> bool:
    """Whether out shares an element with A or B (Region.overlaps, the regular path's test)."""
    c = out.region()
    return c.overlaps(A.region()) or c.overlaps(B.region())
