"""matmul's express lane on the CUDA backend: a repeated call on device arrays
skips the front door's per-call analysis.

A call whose operands are two CuPy arrays or two PyTorch CUDA tensors (and
`out`, if given, one of the same kind), read and written in place (no copy,
no temporary), with no first-use tuning, is described completely by a key:
the arrays' type, shapes, strides, dtypes, base alignment and device, the
config (a name or JSON text, a Config, a dict's items: api._lane_config), the
store (`db`: None, a str, a pathlib path or a Store object) and the door.  A
tuned config passed as knobs or a store passed as an object costs a call no
more host time than config="default": the search times the kernels' device
time, and a call whose host time exceeds it runs slower than the search
measured (notes/cuda.md, session 12).  Once such a call has run the
regular way (check_call -> prepare -> execute: every check, every decision),
the lane keeps what it launched (Express.learn) under that key; a later call
with the same key allocates the result and launches the same kernel, on the
same stream the regular path would use, and nothing else.

What the regular path decides from values the key does not hold is decided
again each call, or the call takes the regular path:
- the current device must be the backend's (the regular path switches to it);
- the kernel must still be in matmul's kernel cache (it releases what it
  drops): KernelCache.touch also keeps it recently used;
- config='auto': the selection (the door's auto_config, kept while the store and model
  files are unchanged) must still name the kept config;
- the process must not be a child forked after CUDA was used (check_not_forked);
- `out` must share no memory with A or B this call (else the regular path
  computes through a temporary, as numpy does).
alpha and beta are launch constants (Python floats and ints; other types take
the regular path, which converts them; beta != 0 needs `out`).  Anything else
the key does not cover takes the regular path: a key never seen, another
array kind, a dict config with a value that cannot be hashed, a path-like db
other than pathlib's.
"""
from __future__ import annotations

import sys
import threading

from .api import _lock_of, check_not_forked
from .call import _external_stream, _overlaps, _torch_stream

KEEP = 256        # plans kept per door (the oldest dropped past it)


class _Plan:
    """One learned call: what the regular path launched for its key."""
    __slots__ = ("kkey", "kernel", "config", "problem", "auto", "sa", "sb", "batch", "shape",
                 "dtype", "device_id", "cp", "torch_dtype", "torch_device", "spans")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def _cupy_key(A, B, O, config, db):
    da, dbb = A.data, B.data
    key = (config, db, A.shape, A.strides, A.dtype, da.ptr & 15, da.device_id,
           B.shape, B.strides, B.dtype, dbb.ptr & 15, dbb.device_id)
    if O is None:
        return key
    do = O.data
    return key + (O.shape, O.strides, O.dtype, do.ptr & 15, do.device_id)


def _torch_key(A, B, O, config, db):
    key = (config, db, A.shape, A.stride(), A.dtype, A.data_ptr() & 15, A.device,
           B.shape, B.stride(), B.dtype, B.data_ptr() & 15, B.device)
    if O is None:
        return key
    return key + (O.shape, O.stride(), O.dtype, O.data_ptr() & 15, O.device)


class Express:
    """The lane of one door (api.Door): learn() after a regular call, run() before one."""

    def __init__(self, door):
        self.door = door
        self.backend = door.backend
        self._plans: dict = {}
        self._kinds: dict = {}          # operand type -> "cupy" | "torch" (learned)
        self._lock = threading.Lock()

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
        key = (_cupy_key if kind == "cupy" else _torch_key)(A, B, out, config, db)
        plan = _Plan(kkey=(lay.problem, cfg), kernel=kernel, config=cfg, problem=lay.problem, auto=auto,
                     sa=lay.a.stride, sb=lay.b.stride, batch=lay.problem.batch, shape=lay.shape,
                     dtype=lay.dtype, device_id=self.backend.device_id, cp=sys.modules["cupy"],
                     torch_dtype=None, torch_device=None, spans=lay.spans)
        if kind == "torch":
            torch = sys.modules["torch"]
            plan.torch_dtype = getattr(torch, lay.dtype.name)
            plan.torch_device = torch.device("cuda", plan.device_id)
        with self._lock:
            try:
                hash(key)
            except TypeError:            # a dict config with an unhashable value
                return
            self._kinds[type(A)] = kind
            if len(self._plans) >= KEEP:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan

    def forget(self) -> None:
        with self._lock:
            self._plans.clear()

    # --- a call ----------------------------------------------------------------
    def run(self, A, B, out, config, alpha: float, beta: float, db):
        """The result of a learned call, or None: take the regular path."""
        kind = self._kinds.get(type(A))
        if kind is None or type(B) is not type(A) or (out is not None and type(out) is not type(A)):
            return None
        key = (_cupy_key if kind == "cupy" else _torch_key)(A, B, out, config, db)
        try:
            plan = self._plans.get(key)
        except TypeError:                # a dict config with an unhashable value: never learned
            return None
        if plan is None:
            return None
        check_not_forked()
        cp = plan.cp
        if cp.cuda.runtime.getDevice() != plan.device_id:
            return None
        if not self.door.kernels.touch(plan.kkey, plan.kernel):
            return None
        if plan.auto and not self._still_selected(plan, db):
            return None
        if kind == "cupy":
            pa, pb = A.data.ptr, B.data.ptr
            po = None if out is None else out.data.ptr
        else:
            pa, pb = A.data_ptr(), B.data_ptr()
            po = None if out is None else out.data_ptr()
        if po is not None and _overlaps(plan.spans, pa, pb, po):
            return None
        with _lock_of(self.backend):
            if kind == "cupy":
                st = cp.cuda.get_current_stream()
                if out is None:
                    out = cp.empty(plan.shape, dtype=plan.dtype)
                    po = out.data.ptr
            else:
                st = _external_stream(cp, _torch_stream(plan.device_id), plan.device_id)
                if out is None:
                    out = sys.modules["torch"].empty(plan.shape, dtype=plan.torch_dtype, device=plan.torch_device)
                    po = out.data_ptr()
            plan.kernel.enqueue(pa, pb, po, plan.sa, plan.sb, plan.batch, alpha, beta, stream=st)
        return out

    def _still_selected(self, plan: _Plan, db) -> bool:
        """Whether config='auto' still picks the kept config: the door asks the selection
        (api.Door.auto_config; kept while the store and model are unchanged), which
        sits above the backends."""
        return self.door.auto_config(plan.problem, db) == plan.config
