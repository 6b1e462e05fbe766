"""One matmul call on the CUDA backend: operands of any kind in (arrays.py),
the result in the caller's kind out.

    call = prepare(A, B, out=..., C=..., alpha=..., beta=...)   # no GPU needed
    kernel = ...build or look up a kernel for call.problem...
    result = execute(call, kernel, device_id)

prepare() checks the arguments (numpy.matmul's shapes and errors, dtypes,
`out`) and decides, per operand, whether it is used in place: a device matrix
whose rows or columns are contiguous is read where it lies, the kernel's
trans flag saying which (the Problem carries the flags); stacked operands
whose products are evenly spaced (or broadcast: stride 0) run as one
strided-batched launch. Anything else (host memory, other strides, another
dtype, a misaligned base) is copied once, on the device where it already is.

execute() runs on the caller's framework's current stream (torch: its
current stream on the tensor's device; else CuPy's current stream): every
copy, allocation and launch is queued there, inputs produced on another
stream are waited for with an event (CAI v3 'stream', or another framework's
current stream), and nothing synchronises the host except a host (numpy)
result, which must be copied back.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from ...inputs import _scalar, core_shapes
from ...problem import Problem
from .arrays import ArrayInfo, batch_stride, check_dtype, describe, matrix_layout, result_dtype

ALIGN = 16   # bytes: the kernels' vector loads need 16-byte aligned matrix bases
_DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
_PROBLEMS: dict = {}     # Problem fields -> Problem: one validation per shape, not per call


def _problem(*fields) -> Problem:
    p = _PROBLEMS.get(fields)
    if p is None:
        if len(_PROBLEMS) > 4096:
            _PROBLEMS.clear()
        p = _PROBLEMS[fields] = Problem(*fields[:6], batch=fields[6])
    return p


@dataclass
class Operand:
    """One input as the kernel will read it."""
    info: ArrayInfo
    shape: tuple             # (batch..., rows, cols) after numpy's 1-D promotion
    strides: tuple           # in elements, same length
    trans: bool              # stored transposed: column-major, read in place by the trans flag
    stride: int              # elements between consecutive products (0: broadcast)
    copy: bool               # copied first into a contiguous row-major stack (or one matrix)


@dataclass
class Call:
    problem: Problem | None  # None: nothing to compute (an empty result or K = 0)
    a: Operand
    b: Operand
    shape: tuple             # the result's shape (numpy.matmul's)
    batch: tuple             # the broadcast batch shape
    dtype: np.dtype
    kind: str                # the result's kind: numpy | cupy | torch (see arrays.py)
    out: ArrayInfo | None
    out_in_place: bool       # the kernel writes `out` directly
    c: ArrayInfo | None      # the C read when beta != 0
    alpha: float
    beta: float

    @property
    def products(self) -> int:
        return math.prod(self.batch)


def _promote(info: ArrayInfo, which: str) -> tuple[tuple, tuple]:
    """numpy.matmul's 1-D promotion: A (K,) is a row (1, K), B (K,) a column (K, 1)."""
    shape, strides = tuple(info.shape), tuple(info.strides)
    if len(shape) == 1:
        (n,), (s,) = shape, strides
        return ((1, n), (n * s, s)) if which == "A" else ((n, 1), (s, 1))
    return shape, strides


def _operand(info: ArrayInfo, which: str, batch: tuple, dtype: np.dtype) -> Operand:
    shape, strides = _promote(info, which)
    rows, cols = shape[-2:]
    layout = matrix_layout(rows, cols, strides[-2], strides[-1])
    stride = batch_stride(batch, shape[:-2], strides[:-2]) if math.prod(batch) > 1 else 0
    # Every product's base must be as aligned as the first: a stride of whole
    # 16-byte units, or the products packed (rows * cols apart: the space
    # already makes the vector width divide a row, so every base is aligned
    # for the widths it allows).
    aligned = (info.ptr % ALIGN == 0 and stride is not None
               and ((stride * dtype.itemsize) % ALIGN == 0 or stride == rows * cols))
    copy = not info.on_device or layout is None or not aligned or info.dtype != dtype
    if copy:   # a contiguous stack, or one matrix where every product reads the same
        layout = "N"
        stride = 0 if stride == 0 else rows * cols
    return Operand(info, shape, strides, layout == "T", stride, copy)


def _consume_dlpack(info: ArrayInfo) -> ArrayInfo:
    """A CUDA DLPack object as a zero-copy CuPy array (its producer makes
    CuPy's current stream wait for it, the DLPack stream protocol)."""
    from .device import import_cupy
    return describe(import_cupy().from_dlpack(info.obj), "dlpack")


def prepare(A, B, *, out=None, C=None, alpha=1.0, beta=0.0) -> Call:
    """Check the arguments and plan the call (see the module docstring)."""
    ia, ib = describe(A, "A"), describe(B, "B")
    check_dtype(ia, "A")
    check_dtype(ib, "B")
    alpha, beta = _scalar(alpha, "alpha"), _scalar(beta, "beta")
    ia = _consume_dlpack(ia) if ia.kind == "dlpack" else ia
    ib = _consume_dlpack(ib) if ib.kind == "dlpack" else ib
    sh = core_shapes(ia.shape, ib.shape)
    dtype = result_dtype(ia, ib)
    a, b = _operand(ia, "A", sh.batch, dtype), _operand(ib, "B", sh.batch, dtype)
    io = _check_out(out, sh.shape, dtype) if out is not None else None
    ic = None
    if beta != 0.0:
        src = C if C is not None else out
        if src is None:
            raise ValueError("matmul: beta != 0 needs C (pass it as `out=` or `C=`)")
        ic = io if src is out and io is not None else describe(src, "C")
        check_dtype(ic, "C")
        try:
            fits = np.broadcast_shapes(tuple(ic.shape), sh.shape) == sh.shape
        except ValueError:
            fits = False
        if not fits and ic.shape != sh.shape:
            raise ValueError(f"matmul: C has shape {tuple(ic.shape)}, expected {sh.shape} "
                             f"for A{tuple(ia.shape)} @ B{tuple(ib.shape)}")
    if io is not None:
        kind = io.kind if io.kind != "cai" else "cupy"
    else:
        kind = next((i.kind for i in (ia, ib) if i.on_device), "numpy")
        kind = "cupy" if kind in ("cai", "dlpack") else kind
    # out is written in place unless the kernel cannot (other strides, a
    # misaligned base) or it shares memory with A or B (the kernel would read
    # what it already wrote; numpy.matmul buffers such calls, so do we)
    in_place = (io is not None and io.on_device and _contiguous(io, sh.shape) and io.ptr % ALIGN == 0
                and not _overlap(io, ia) and not _overlap(io, ib))
    nb = math.prod(sh.batch)
    empty = sh.M == 0 or sh.N == 0 or nb == 0 or sh.K == 0
    problem = None if empty else _problem(sh.M, sh.N, sh.K, _DTYPE_NAMES[dtype], a.trans, b.trans, nb)
    return Call(problem, a, b, sh.shape, sh.batch, dtype, kind, io, in_place, ic, alpha, beta)


def span(shape, strides, ptr: int, itemsize: int) -> tuple[int, int]:
    """[first, last) byte addresses an array's elements cover."""
    if 0 in shape:
        return ptr, ptr
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return ptr + lo * itemsize, ptr + (hi + 1) * itemsize


def _overlap(x: ArrayInfo, y: ArrayInfo) -> bool:
    if not (x.on_device and y.on_device) or y.strides is None:
        return False
    a0, a1 = span(x.shape, x.strides, x.ptr, x.dtype.itemsize)
    b0, b1 = span(y.shape, y.strides, y.ptr, y.dtype.itemsize)
    return a0 < b1 and b0 < a1


def _contiguous(info: ArrayInfo, shape: tuple) -> bool:
    expect, acc = [], 1
    for n in reversed(shape):
        expect.append(acc)
        acc *= n
    return all(s == e for s, e, n in zip(info.strides, reversed(expect), shape) if n > 1)


def _check_out(out, shape: tuple, dtype: np.dtype) -> ArrayInfo:
    """numpy-style errors for `out=` (host: a numpy array; or a device array)."""
    if not isinstance(out, np.ndarray) and not _is_device(out):
        raise TypeError(f"matmul: out must be a numpy.ndarray or a CUDA device array, got {type(out).__name__}")
    io = describe(out, "out")
    if io.kind == "dlpack":
        io = _consume_dlpack(io)
    if tuple(io.shape) != shape:
        raise ValueError(f"matmul: out has shape {tuple(io.shape)}, expected {shape}")
    if io.dtype != dtype:
        raise TypeError(f"matmul: out must have dtype {dtype}, got {io.dtype}")
    if io.readonly:
        raise ValueError("matmul: out is read-only")
    return io


def _is_device(x) -> bool:
    return (hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack_device__")
            or (type(x).__module__.split(".", 1)[0] in ("cupy", "torch")))


# --- the common call, planned once per layout -----------------------------------

_PLANS: dict = {}    # operand layouts -> (problem, result shape, dtype, sa, sb, products) or None


def fast(A, B, alpha, device_id: int, kernel_for, out=None):
    """The common call in few microseconds: A and B (and out, if given) all
    CuPy arrays or all PyTorch CUDA tensors on `device_id` (the current
    device), A and B read and out written in place, no C. The plan (problem,
    strides, spans) is made once per layout by prepare(). None when the call
    is not of that kind (the caller takes prepare/execute, which also gives
    the errors)."""
    if type(alpha) not in (float, int):
        return None
    cp = sys.modules.get("cupy")
    if cp is not None and type(A) is cp.ndarray and type(B) is cp.ndarray and (out is None or type(out) is cp.ndarray):
        da, db = A.data, B.data
        pa, pb = da.ptr, db.ptr
        po = out.data.ptr if out is not None else 0
        if da.device_id != device_id or db.device_id != device_id or \
                (out is not None and out.data.device_id != device_id):
            return None
        key = (A.shape, A.strides, A.dtype, B.shape, B.strides, B.dtype, pa % ALIGN == 0, pb % ALIGN == 0,
               None if out is None else (out.shape, out.strides, out.dtype, po % ALIGN == 0))
        plan = _plan(key, A, B, alpha, out)
        if plan is None or cp.cuda.runtime.getDevice() != device_id or (out is not None and _overlaps(plan, pa, pb, po)):
            return None
        r = cp.empty(plan[1], plan[2]) if out is None else out
        kernel_for(plan[0]).enqueue(pa, pb, r.data.ptr, plan[3], plan[4], plan[5], alpha, 0.0)
        return r
    torch = sys.modules.get("torch")
    if torch is not None and type(A) is torch.Tensor and type(B) is torch.Tensor and A.is_cuda and B.is_cuda \
            and (out is None or (type(out) is torch.Tensor and out.is_cuda)):
        pa, pb = A.data_ptr(), B.data_ptr()
        po = out.data_ptr() if out is not None else 0
        if A.device.index != device_id or B.device.index != device_id or \
                (out is not None and out.device.index != device_id):
            return None
        key = ("torch", A.shape, A.stride(), A.dtype, B.shape, B.stride(), B.dtype, pa % ALIGN == 0, pb % ALIGN == 0,
               None if out is None else (out.shape, out.stride(), out.dtype, po % ALIGN == 0))
        plan = _plan(key, A, B, alpha, out)
        if plan is None or cp is None or cp.cuda.runtime.getDevice() != device_id or \
                (out is not None and _overlaps(plan, pa, pb, po)):
            return None
        r = torch.empty(plan[1], dtype=A.dtype, device=A.device) if out is None else out
        st = _external_stream(cp, torch.cuda.current_stream(device_id).cuda_stream, device_id)
        kernel_for(plan[0]).enqueue(pa, pb, r.data_ptr(), plan[3], plan[4], plan[5], alpha, 0.0, stream=st)
        return r
    return None


def _plan(key, A, B, alpha, out):
    """(problem, result shape, dtype, sa, sb, products, byte extents of A, B,
    out from their first elements), or None: not a call for fast()."""
    plan = _PLANS.get(key, 0)
    if plan == 0:
        c = prepare(A, B, alpha=alpha, out=out)
        ok = (c.problem is not None and not c.a.copy and not c.b.copy
              and (out is None or (c.out_in_place and c.kind == c.out.kind)))
        plan = None
        if ok:
            ext = [span(i.shape, i.strides, 0, i.dtype.itemsize) for i in (c.a.info, c.b.info, c.out) if i is not None]
            plan = (c.problem, c.shape, c.dtype, c.a.stride, c.b.stride, c.problem.batch, ext)
        if len(_PLANS) > 4096:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _overlaps(plan, pa: int, pb: int, po: int) -> bool:
    """Whether out (at po) shares memory with A or B this call (a plan is per
    layout, the addresses are per call)."""
    (a0, a1), (b0, b1), (o0, o1) = plan[6]
    return (po + o0 < pa + a1 and pa + a0 < po + o1) or (po + o0 < pb + b1 and pb + b0 < po + o1)


# --- execution (needs a GPU) -------------------------------------------------

_STREAMS: dict = {}


def _external_stream(cp, ptr: int, device_id: int):
    s = _STREAMS.get((ptr, device_id))
    if s is None:
        s = _STREAMS[(ptr, device_id)] = cp.cuda.ExternalStream(ptr, device_id)
    return s


def _torch_stream(device_id: int) -> int:
    return sys.modules["torch"].cuda.current_stream(device_id).cuda_stream


def _launch_stream(cp, call: Call, device_id: int):
    """The caller's current stream: torch's when the result is a tensor, else CuPy's."""
    if call.kind == "torch":
        return _external_stream(cp, _torch_stream(device_id), device_id)
    return cp.cuda.get_current_stream()


def _producer_streams(call: Call, device_id: int) -> set:
    """Streams (handles) the inputs were produced on, where known: CAI v3's
    'stream', or the current stream of the framework that owns them."""
    out = set()
    for info in (call.a.info, call.b.info, call.c, call.out):
        if info is None:
            continue
        if info.kind == "cai" and info.stream is not None:
            out.add(info.stream)
        elif info.kind == "torch" and call.kind != "torch":
            out.add(_torch_stream(device_id))
        elif info.kind == "cupy" and call.kind == "torch":
            out.add(sys.modules["cupy"].cuda.get_current_stream().ptr)
    return out


def check_devices(call: Call, device_id: int, pointer_device=None) -> None:
    """A clear ValueError for a device array on another GPU than the backend's.
    `pointer_device(ptr)` finds a CAI array's device (the interface does not say)."""
    for name, info in (("A", call.a.info), ("B", call.b.info), ("C", call.c), ("out", call.out)):
        if info is None or not info.on_device:
            continue
        dev = info.device
        if dev is None and pointer_device is not None:
            dev = pointer_device(info.ptr)
        if dev is not None and dev != device_id:
            raise ValueError(f"matmul: {name} is on CUDA device {dev}, but this CUDA backend runs on "
                             f"device {device_id} (CUDABackend(device_id={dev}) runs there)")


def _view(cp, info: ArrayInfo, device_id: int):
    """A CuPy array over a device operand's memory (no copy)."""
    if info.kind == "cupy":
        return info.obj
    it = info.dtype.itemsize
    lo = sum((n - 1) * s for n, s in zip(info.shape, info.strides) if s < 0 and n > 0)
    hi = sum((n - 1) * s for n, s in zip(info.shape, info.strides) if s > 0 and n > 0)
    size = 0 if 0 in info.shape else (hi - lo + 1) * it
    mem = cp.cuda.UnownedMemory(info.ptr + lo * it, size, info.obj, device_id)
    return cp.ndarray(tuple(info.shape), info.dtype, cp.cuda.MemoryPointer(mem, -lo * it),
                      strides=tuple(s * it for s in info.strides))


def _materialize(cp, op: Operand, batch: tuple, dtype, device_id: int):
    """(device address, keep-alive) of an operand as the kernel reads it."""
    if not op.copy:
        return op.info.ptr, None
    rows, cols = op.shape[-2:]
    if op.info.on_device:
        x = _view(cp, op.info, device_id).reshape(op.shape)
    else:
        x = op.info.obj.reshape(op.shape)
    if op.stride == 0:       # every product reads the same matrix
        x = x.reshape((-1, rows, cols))[0]
    else:
        x = (cp if op.info.on_device else np).broadcast_to(x, tuple(batch) + (rows, cols))
    if op.info.on_device:
        d = cp.ascontiguousarray(x.astype(dtype, copy=False))
    else:                    # one upload of a contiguous host copy
        d = cp.asarray(np.ascontiguousarray(x, dtype=dtype))
    if d.data.ptr % ALIGN:
        d = d.copy()
    return d.data.ptr, d


def _empty(cp, call: Call, device_id: int):
    """(the result array in the caller's kind, its CuPy view): a fresh
    contiguous array of the result's shape."""
    if call.kind == "torch":
        torch = sys.modules["torch"]
        t = torch.empty(call.shape, dtype=getattr(torch, call.dtype.name), device=f"cuda:{device_id}")
        info = describe(t, "out")
        return t, None, info.ptr
    r = cp.empty(call.shape, dtype=call.dtype)
    return r, r, r.data.ptr


def execute(call: Call, kernel, device_id: int):
    """Run a prepared call with `kernel` (built for call.problem; unused when
    call.problem is None) and return the result in the caller's kind."""
    from .device import import_cupy
    cp = import_cupy()
    with cp.cuda.Device(device_id):
        st = _launch_stream(cp, call, device_id)
        with st:
            check_devices(call, device_id, lambda p: cp.cuda.runtime.pointerGetAttributes(p).device)
            for handle in _producer_streams(call, device_id):
                if handle != st.ptr:
                    ev = cp.cuda.Event(disable_timing=True)
                    ev.record(_external_stream(cp, handle, device_id))
                    st.wait_event(ev)
            if call.out_in_place:
                result, res_view, c_ptr = call.out.obj, None, call.out.ptr
            else:
                result, res_view, c_ptr = _empty(cp, call, device_id)
            beta = call.beta
            if beta != 0.0 and not (call.out_in_place and call.c is call.out):
                _fill(cp, call, c_ptr, device_id)
            if call.problem is None:
                if 0 not in call.shape and (beta == 0.0):
                    _view_of(cp, c_ptr, call, device_id)[...] = 0
                elif 0 not in call.shape:   # K = 0: an empty sum, C = beta * C
                    v = _view_of(cp, c_ptr, call, device_id)
                    v *= call.dtype.type(beta)
            else:
                a_ptr, keep_a = _materialize(cp, call.a, call.batch, call.dtype, device_id)
                b_ptr, keep_b = _materialize(cp, call.b, call.batch, call.dtype, device_id)
                kernel.enqueue(a_ptr, b_ptr, c_ptr, call.a.stride, call.b.stride, call.problem.batch,
                               call.alpha, beta, stream=st)
            return _deliver(cp, call, result, res_view, c_ptr, device_id)


def _view_of(cp, ptr: int, call: Call, device_id: int):
    """A CuPy view of a contiguous result buffer at `ptr`."""
    info = ArrayInfo("cai", None, call.shape, _c_strides(call.shape), call.dtype, ptr=ptr)
    return _view(cp, info, device_id)


def _c_strides(shape: tuple) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _fill(cp, call: Call, c_ptr: int, device_id: int) -> None:
    """Copy C (broadcast to the result's shape) into the kernel's C buffer."""
    dst = _view_of(cp, c_ptr, call, device_id)
    c = call.c
    src = _view(cp, c, device_id) if c.on_device else c.obj
    dst[...] = cp.asarray(src, dtype=call.dtype).reshape(c.shape)


def _deliver(cp, call: Call, result, res_view, c_ptr: int, device_id: int):
    if call.out is not None and not call.out_in_place:
        o = call.out
        if o.on_device:
            _view(cp, o, device_id)[...] = _view_of(cp, c_ptr, call, device_id)
        else:
            o.obj[...] = cp.asnumpy(_view_of(cp, c_ptr, call, device_id))
        return o.obj
    if call.out is not None:
        return call.out.obj
    if call.kind == "numpy":
        return cp.asnumpy(res_view)
    return result
