"""matmul's express lane on the CUDA backend: the steady state of a call key.

A call whose operands are two CuPy arrays, two PyTorch CUDA tensors or two
CUDA DLPack objects of one type (and `out`, if given, of the same kind), read
and written in place (no copy, no temporary), with no first-use tuning, is
described completely by its key: the arrays' shapes, strides, dtypes, base
alignment and device, the config (a name or JSON text, a Config, a dict's
items: api._lane_config), where `auto` reads (`db`: None, a str, a pathlib
path or a Store object) and the door.  Once such a call has run the regular
way (check_call -> prepare -> execute: every check, every decision), the lane
keeps what it launched under that key (Express.learn); a later call with the
same key is a lookup, the result's allocation by the caller's framework (its
caching allocator) and the kernel's launches through parameter arrays of the
key's own (executable graphs of them, graphs.py, unless SHADERTUNE_CUDA_LAUNCH=kernels
when the key is learned: driver.SteadyLaunch), on the stream
the regular path would use, and nothing else.  What each step costs:
docs/cuda.md, "What a call costs".

What the regular path decides from values the key does not hold is decided
again each call, or the call takes the regular path:
- the current device must be the backend's (the regular path switches to it);
- the kernel must not have been released (matmul's kernel cache releases what
  it drops; the lane marks it used in the cache on the recheck clock below);
- config='auto': the selection must still name the kept config.  It is asked
  again (selection/chain.py: the store's stamp and change counter, the model file) on a
  short clock (express_rules.RECHECK_S), at once after a commit of this process to any store
  (the store's change counter, db/changes.py, which the door hands the lane:
  a tune() or Store.put here is seen by the next call) and, for the default store, when SHADERTUNE_DB, XDG_CACHE_HOME or HOME
  changed; another process's write is seen within RECHECK_S;
- the process must not be a child forked after CUDA was used (check_not_forked);
- `out` must share no memory with A or B this call (else the regular path
  computes through a temporary, as numpy does).
alpha and beta are launch constants (Python floats and ints; other types take
the regular path, which converts them; beta != 0 needs `out`).  Anything else
the key does not cover takes the regular path: a key never seen, another
array kind, a dict config with a value that cannot be hashed, a path-like db
other than pathlib's.  A DLPack object's producer is asked for its capsule every
call (__dlpack__ on the stream the kernel runs on: its stream handshake), and the
capsule is read in place (dlpack_view.py), not imported into CuPy: the key is the
one the imported CuPy array gives (its byte strides, dtype, base alignment and
device), and a capsule the reader does not take (not CUDA or managed memory,
another DLPack version, vector or bfloat16 elements) goes to the regular path.
"""
from __future__ import annotations

import sys

from . import graphs
from .api import _lock_of, check_not_forked
from .call import _external_stream, _overlaps, _torch_stream, torch_alloc
from .dlpack_view import DL_CUDA, DL_CUDA_MANAGED, consumer_stream, view
from ..express_rules import Lane, Plan
from .driver import _Enqueue


class _Plan(Plan):
    """One learned call: what the regular path launched for its key."""
    __slots__ = ("kkey", "kernel", "config", "problem", "auto", "go", "shape", "dtype", "device_id",
                 "torch_dtype", "torch_device", "torch_type", "spans", "due", "generation", "env", "alloc")


class Express(Lane):
    """The lane of one door (api.Door): learn() after a regular call, run() before one."""

    def __init__(self, door):
        super().__init__(door)
        self._runs: dict = {}           # operand type -> the lane's run for that kind (learned)

    # --- the regular path tells what it ran -------------------------------------
    def learn(self, A, B, out, config, db, call, launch, kernel, cfg, auto: bool) -> None:
        """Keep the launch of a regular call that the lane may repeat (see the module)."""
        lay = launch.layout
        if (call.logical or lay.problem is None or lay.a.copy or lay.b.copy or lay.waits
                or type(A) is not type(B) or lay.kind not in ("cupy", "torch")
                or launch.a.kind != lay.kind or launch.b.kind != lay.kind):
            return
        if out is not None and (type(out) is not type(A) or not launch.out_in_place
                                or launch.out.kind != lay.kind):
            return
        kind = lay.kind
        if call.a.info is not None and call.a.info.kind == "dlpack":
            if kind != "cupy" or out is not None:
                return
            run = self._run_dlpack
        elif launch.a.obj is not A or launch.b.obj is not B:   # read through another object
            return
        else:
            run = self._run_cupy if kind == "cupy" else self._run_torch
        # the key of the arrays the kernel reads (a DLPack object's: the CuPy array it was imported as)
        a, b, o = launch.a.obj, launch.b.obj, None if out is None else launch.out.obj
        key = (_cupy_key if kind == "cupy" else _torch_key)(a, b, o, config, db)
        use_graphs = graphs.wanted()
        go = (kernel.launcher(lay.a.stride, lay.b.stride, lay.problem.batch, graphs=use_graphs)
              if hasattr(kernel, "launcher") else None)
        if go is None:    # a kernel without prebuilt launches (tests' stand-ins): its enqueue
            go = _Enqueue(kernel, lay.a.stride, lay.b.stride, lay.problem.batch)
        plan = _Plan(kkey=(lay.problem, cfg), kernel=kernel, config=cfg, problem=lay.problem, auto=auto,
                     go=go, shape=lay.shape, dtype=lay.dtype, device_id=self.backend.device_id,
                     torch_dtype=None, torch_device=None, torch_type=None, spans=lay.spans,
                     alloc=None)
        if kind == "torch":
            torch = sys.modules["torch"]
            plan.torch_dtype = getattr(torch, lay.dtype.name)
            plan.torch_device = torch.device("cuda", plan.device_id)
            plan.torch_type = torch.Tensor
            plan.alloc = torch_alloc(plan.device_id)
        if self._keep(key, plan, db):
            self._runs[type(A)] = run

    # --- a call ----------------------------------------------------------------
    def run(self, A, B, out, config, alpha: float, beta: float, db):
        """The result of a learned call, or None: take the regular path."""
        run = self._runs.get(type(A))
        if run is None or type(B) is not type(A) or (out is not None and type(out) is not type(A)):
            return None
        return run(A, B, out, config, alpha, beta, db)


    def _run_cupy(self, A, B, out, config, alpha: float, beta: float, db):
        da, dbb = A.data, B.data
        pa, pb = da.ptr, dbb.ptr
        key = (config, db, A.shape, A.strides, A.dtype, pa & 15, da.device_id,
               B.shape, B.strides, B.dtype, pb & 15, dbb.device_id)
        po = None
        if out is not None:
            do = out.data
            po = do.ptr
            key += (out.shape, out.strides, out.dtype, po & 15, do.device_id)
        try:
            plan = self._plans.get(key)
        except TypeError:                # a dict config with an unhashable value: never learned
            return None
        if plan is None:
            return None
        check_not_forked()
        cp = sys.modules["cupy"]
        if cp.cuda.runtime.getDevice() != plan.device_id or not self._valid(plan, db):
            return None
        if po is not None and _overlaps(plan.spans, pa, pb, po):
            return None
        with _lock_of(self.backend):
            st = cp.cuda.get_current_stream()
            if out is None:
                out = cp.ndarray(plan.shape, plan.dtype)
                po = out.data.ptr
            plan.go(pa, pb, po, alpha, beta, st)
        return out

    def _run_torch(self, A, B, out, config, alpha: float, beta: float, db):
        pa, pb = A.data_ptr(), B.data_ptr()
        key = (config, db, A.shape, A.stride(), A.dtype, pa & 15, A.get_device(),
               B.shape, B.stride(), B.dtype, pb & 15, B.get_device())
        po = None
        if out is not None:
            po = out.data_ptr()
            key += (out.shape, out.stride(), out.dtype, po & 15, out.get_device())
        try:
            plan = self._plans.get(key)
        except TypeError:
            return None
        if plan is None:
            return None
        check_not_forked()
        cp = sys.modules["cupy"]
        dev = plan.device_id
        if cp.cuda.runtime.getDevice() != dev or not self._valid(plan, db):
            return None
        if po is not None and _overlaps(plan.spans, pa, pb, po):
            return None
        with _lock_of(self.backend):
            st = _external_stream(cp, _torch_stream(dev), dev)
            if out is None:
                # A's dtype and device are the result's (the key read A in place):
                # Tensor.new_empty parses no dtype or device (torch.empty's keywords
                # cost the host more); a subclass of Tensor gets torch.empty's plain one
                out = (A.new_empty(plan.shape) if type(A) is plan.torch_type
                       else sys.modules["torch"].empty(plan.shape, dtype=plan.torch_dtype, device=plan.torch_device))
                po = out.data_ptr()
            plan.go(pa, pb, po, alpha, beta, st, plan.alloc)
        return out

    def _run_dlpack(self, A, B, out, config, alpha: float, beta: float, db):
        """A call on two CUDA DLPack objects: each producer's __dlpack__ on the stream
        the kernel runs on (the handshake, every call: dlpack_view), its capsule read
        for the key the imported CuPy array gives (_run_cupy's), the launch on the
        addresses read.  Any capsule this reader does not take (not CUDA memory, another
        DLPack version, vector lanes, a dtype CuPy lacks) or a producer that raises goes
        to the regular path, which imports through cupy.from_dlpack."""
        if out is not None:
            return None
        check_not_forked()
        cp = sys.modules["cupy"]
        if cp.cuda.runtime.getDevice() != self.backend.device_id:   # the stream is the current device's
            return None
        st = cp.cuda.get_current_stream()      # the launch's stream, asked once a call
        stream = consumer_stream(cp, st)
        try:
            va, vb = view(A, stream), view(B, stream)
        except Exception:    # noqa: BLE001 (the regular path asks again and says what went wrong)
            return None
        if va is None or vb is None:
            return None
        # the capsules (ca, cb) stay referenced until the launch is enqueued (dlpack_view)
        ca, pa, sha, sta, dta, ta, ia = va
        cb, pb, shb, stb, dtb, tb, ib = vb
        if ta != DL_CUDA:
            if ta != DL_CUDA_MANAGED:
                return None
            ia = cp.cuda.runtime.pointerGetAttributes(pa).device     # CuPy's device of managed memory
        if tb != DL_CUDA:
            if tb != DL_CUDA_MANAGED:
                return None
            ib = cp.cuda.runtime.pointerGetAttributes(pb).device
        key = (config, db, sha, sta, dta, pa & 15, ia, shb, stb, dtb, pb & 15, ib)
        try:
            plan = self._plans.get(key)
        except TypeError:                # a dict config with an unhashable value: never learned
            return None
        if plan is None or not self._valid(plan, db):
            return None
        with _lock_of(self.backend):
            out = cp.ndarray(plan.shape, plan.dtype)
            plan.go(pa, pb, out.data.ptr, alpha, beta, st)
        del ca, cb       # the producers' deleters run here, the launch enqueued
        return out


def _cupy_key(A, B, O, config, db):
    da, dbb = A.data, B.data
    key = (config, db, A.shape, A.strides, A.dtype, da.ptr & 15, da.device_id,
           B.shape, B.strides, B.dtype, dbb.ptr & 15, dbb.device_id)
    if O is None:
        return key
    do = O.data
    return key + (O.shape, O.strides, O.dtype, do.ptr & 15, do.device_id)


def _torch_key(A, B, O, config, db):
    key = (config, db, A.shape, A.stride(), A.dtype, A.data_ptr() & 15, A.get_device(),
           B.shape, B.stride(), B.dtype, B.data_ptr() & 15, B.get_device())
    if O is None:
        return key
    return key + (O.shape, O.stride(), O.dtype, O.data_ptr() & 15, O.get_device())
