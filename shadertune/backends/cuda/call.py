"""One checked matmul call (inputs.MatmulCall) on the CUDA backend: operands
of any kind read where they lie, the result in the caller's kind.

    launch = prepare(call)                 # no GPU needed (but for DLPack-only operands)
    kernel = ...the plan's kernel for launch.problem...
    result = execute(launch, kernel, device_id)

prepare() decides, per operand, whether the kernel reads it in place: a device
matrix whose rows or columns are contiguous is read where it lies, the
kernel's trans flag saying which (the Problem carries the flags); stacked
operands whose products are evenly spaced (or broadcast: stride 0) run as one
strided-batched launch.  Anything else (host memory, other strides, another
dtype, a misaligned base) is copied once, on the device where it already is.
`out` is written in place when the kernel can (C-contiguous, aligned, the
compute dtype, sharing no memory with A or B), else through a temporary.
These decisions depend only on the operands' layouts (shapes, strides, dtypes,
alignment, kinds), so they are made once per layout (a Layout) and reused.

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

from ...call.device_arrays import ArrayInfo, describe_device, describe_host
from ...call.inputs import MatmulCall, Operand
from ...core.problem import Problem
from .arrays import batch_stride, check_device_dtype, matrix_layout

ALIGN = 16   # bytes: the kernels' vector loads need 16-byte aligned matrix bases
_PROBLEMS: dict = {}     # Problem fields -> Problem: one validation per shape, not per call
_LAYOUTS: dict = {}      # layout key -> Layout (see prepare)
_CACHE_MAX = 4096


def _problem(*fields) -> Problem:
    p = _PROBLEMS.get(fields)
    if p is None:
        if len(_PROBLEMS) > _CACHE_MAX:
            _PROBLEMS.clear()
        p = _PROBLEMS[fields] = Problem(*fields[:6], batch=fields[6])
    return p


@dataclass(frozen=True)
class Matrix:
    """How the kernel reads one input (of a given layout)."""
    shape: tuple             # (batch..., rows, cols) after numpy's 1-D promotion
    strides: tuple           # in elements, same length
    trans: bool              # stored transposed: column-major, read in place by the trans flag
    stride: int              # elements between consecutive products (0: broadcast)
    copy: bool               # copied first into a contiguous row-major stack (or one matrix)


@dataclass(frozen=True)
class Layout:
    """What a call of one operand layout runs: the same for every call whose
    operands have these shapes, strides, dtypes, kinds and alignments."""
    problem: Problem | None  # None: nothing to compute (an empty result or K = 0)
    a: Matrix
    b: Matrix
    shape: tuple             # the result's shape (numpy.matmul's)
    batch: tuple             # the broadcast batch shape
    dtype: np.dtype          # the compute dtype
    kind: str                # the result's kind: numpy | cupy | torch
    out_fits: bool           # out can be the kernel's C (its overlap with A, B is per call)
    spans: tuple             # [first, last) bytes of A, B, out from element 0
    waits: bool = True       # an operand may come from another stream (see _producer_streams)


@dataclass
class Launch:
    """One call: its Layout and the arrays of this call."""
    layout: Layout
    a: ArrayInfo
    b: ArrayInfo
    out: ArrayInfo | None
    out_in_place: bool       # the kernel writes `out` directly
    alpha: float
    beta: float

    @property
    def problem(self) -> Problem | None:
        return self.layout.problem

    @property
    def c(self) -> ArrayInfo | None:
        """The C read when beta != 0: out (numpy's rule: out is also the C added)."""
        return self.out if self.beta != 0.0 else None


# --- planning (no GPU) -----------------------------------------------------------

def _info(op: Operand, name: str) -> ArrayInfo:
    info = op.info if op.device else describe_host(op.value)
    if info.kind == "dlpack":
        info = _consume_dlpack(info)
    check_device_dtype(info, name)
    return info


def _consume_dlpack(info: ArrayInfo) -> ArrayInfo:
    """A CUDA DLPack object as a zero-copy CuPy array (its producer makes
    CuPy's current stream wait for it, the DLPack stream protocol)."""
    from .device import import_cupy
    return describe_device(import_cupy().from_dlpack(info.obj))


def _key(info: ArrayInfo | None):
    if info is None:
        return None
    return (info.kind, info.shape, info.strides, info.dtype, info.ptr % ALIGN == 0)


def prepare(call: MatmulCall) -> Launch:
    """The Launch of a checked call (see the module docstring)."""
    ia, ib = _info(call.a, "A"), _info(call.b, "B")
    io = None
    if call.out is not None:
        io = describe_device(call.out)
        io = describe_host(call.out) if io is None else (_consume_dlpack(io) if io.kind == "dlpack" else io)
    key = (_key(ia), _key(ib), _key(io), call.batch, call.dtype, call.squeeze_a, call.squeeze_b)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _layout(call, ia, ib, io)
        if len(_LAYOUTS) > _CACHE_MAX:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    in_place = layout.out_fits and not _overlaps(layout.spans, ia.ptr, ib.ptr, io.ptr)
    return Launch(layout, ia, ib, io, in_place, call.alpha, call.beta)


def _layout(call: MatmulCall, ia: ArrayInfo, ib: ArrayInfo, io: ArrayInfo | None) -> Layout:
    dtype = np.dtype(call.dtype)
    a = _matrix(ia, "A", call.batch, dtype)
    b = _matrix(ib, "B", call.batch, dtype)
    if io is not None:
        kind = "cupy" if io.kind == "cai" else io.kind
    else:
        kind = next((i.kind for i in (ia, ib) if i.on_device), "numpy")
        kind = "cupy" if kind == "cai" else kind
    out_fits = (io is not None and io.on_device and io.dtype == dtype and _contiguous(io, call.shape)
                and io.ptr % ALIGN == 0)
    nb = math.prod(call.batch)
    empty = call.M == 0 or call.N == 0 or nb == 0 or call.K == 0
    problem = None if empty else _problem(call.M, call.N, call.K, call.dtype, a.trans, b.trans, nb)
    spans = tuple(span(i.shape, i.strides, 0, i.dtype.itemsize) if i is not None and i.on_device else None
                  for i in (ia, ib, io))
    waits = any(i is not None and (i.kind == "cai" or (i.kind == "torch") != (kind == "torch"))
                and i.on_device for i in (ia, ib, io))
    return Layout(problem, a, b, call.shape, call.batch, dtype, kind, out_fits, spans, waits)


def _promote(info: ArrayInfo, which: str) -> tuple[tuple, tuple]:
    """numpy.matmul's 1-D promotion: A (K,) is a row (1, K), B (K,) a column (K, 1)."""
    shape, strides = tuple(info.shape), tuple(info.strides)
    if len(shape) == 1:
        (n,), (s,) = shape, strides
        return ((1, n), (n * s, s)) if which == "A" else ((n, 1), (s, 1))
    return shape, strides


def _matrix(info: ArrayInfo, which: str, batch: tuple, dtype: np.dtype) -> Matrix:
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
    return Matrix(shape, strides, layout == "T", stride, copy)


def span(shape, strides, ptr: int, itemsize: int) -> tuple[int, int]:
    """[first, last) byte addresses an array's elements cover."""
    if 0 in shape:
        return ptr, ptr
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return ptr + lo * itemsize, ptr + (hi + 1) * itemsize


def _overlaps(spans, pa: int, pb: int, po: int) -> bool:
    """Whether out (at po) shares memory with a device A or B (at pa, pb) this
    call: a layout's spans are relative to element 0, the addresses per call.
    out shares memory with A or B as numpy's in-place `a @= b` does: the
    kernel would read what it already wrote, so (as numpy buffers such calls)
    the product goes through a temporary."""
    sa, sb, so = spans
    if so is None:
        return False
    o0, o1 = po + so[0], po + so[1]
    return any(s is not None and o0 < p + s[1] and p + s[0] < o1 for s, p in ((sa, pa), (sb, pb)))


def _contiguous(info: ArrayInfo, shape: tuple) -> bool:
    expect, acc = [], 1
    for n in reversed(shape):
        expect.append(acc)
        acc *= n
    return all(s == e for s, e, n in zip(info.strides, reversed(expect), shape) if n > 1)


# --- execution (needs a GPU) -------------------------------------------------

_STREAMS: dict = {}


class _StreamHandle:
    """A raw cudaStream_t presented through the CUDA stream protocol (version 0)."""
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __cuda_stream__(self):
        return 0, self.ptr


def stream_from_handle(cp, ptr: int, device_id: int = -1):
    """CuPy's stream object for a stream CuPy did not create (a cudaStream_t
    handle; its owner keeps it alive).  Stream.from_external (CuPy 14 and
    later: it takes a CUDA-stream-protocol object and records no device)
    where this CuPy has it, else ExternalStream(ptr, device_id), which CuPy
    14 deprecates.  Either way the caller enters it on its device."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_StreamHandle(ptr))
    return cp.cuda.ExternalStream(ptr, device_id)


def _external_stream(cp, ptr: int, device_id: int):
    s = _STREAMS.get((ptr, device_id))
    if s is None:
        s = _STREAMS[(ptr, device_id)] = stream_from_handle(cp, ptr, device_id)
    return s


_TORCH_ALLOCS: dict = {}


def torch_alloc(device_id: int):
    """The kernel's buffers (a workspace made for one call, a captured call's
    workspace and counters: driver.CUDAKernel.enqueue) from PyTorch's caching
    allocator, for calls on PyTorch tensors: on its graph-private pool while
    torch.cuda.graph captures, where CuPy's pool could not allocate.
    alloc(n, dtype, zero) -> (address, tensor)."""
    f = _TORCH_ALLOCS.get(device_id)
    if f is None:
        torch = sys.modules["torch"]
        dev = torch.device("cuda", device_id)

        def f(n: int, dtype: str, zero: bool):
            t = (torch.zeros if zero else torch.empty)((n,), dtype=getattr(torch, dtype), device=dev)
            return t.data_ptr(), t
        _TORCH_ALLOCS[device_id] = f
    return f


def _torch_stream(device_id: int) -> int:
    """PyTorch's current stream on `device_id` as a cudaStream_t: the raw query where
    this PyTorch has it (no torch.cuda.Stream object built per call), else the
    current stream's handle."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device_id) if raw is not None else torch.cuda.current_stream(device_id).cuda_stream


def _producer_streams(launch: Launch, device_id: int) -> set:
    """Streams (handles) the inputs were produced on, where known: CAI v3's
    'stream', or the current stream of the framework that owns them."""
    out = set()
    kind = launch.layout.kind
    for info in (launch.a, launch.b, launch.out):
        if info is None:
            continue
        if info.kind == "cai" and info.stream is not None:
            out.add(info.stream)
        elif info.kind == "torch" and kind != "torch":
            out.add(_torch_stream(device_id))
        elif info.kind == "cupy" and kind == "torch":
            out.add(sys.modules["cupy"].cuda.get_current_stream().ptr)
    return out


def check_devices(launch: Launch, device_id: int, pointer_device=None) -> None:
    """A clear ValueError for a device array on another GPU than the backend's.
    `pointer_device(ptr)` finds a CAI array's device (the interface does not say)."""
    for name, info in (("A", launch.a), ("B", launch.b), ("out", launch.out)):
        if info is None or not info.on_device:
            continue
        dev = info.device
        if dev is None and pointer_device is not None:
            dev = pointer_device(info.ptr)
        if dev is not None and dev != device_id:
            raise ValueError(f"matmul: {name} is on CUDA device {dev}, but this CUDA backend runs on "
                             f"device {device_id} (matmul(..., device_index={dev}) runs there)")


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


def _materialize(cp, m: Matrix, info: ArrayInfo, batch: tuple, dtype, device_id: int):
    """(device address, keep-alive) of an operand as the kernel reads it."""
    if not m.copy:
        return info.ptr, None
    rows, cols = m.shape[-2:]
    if info.on_device:
        x = _view(cp, info, device_id).reshape(m.shape)
    else:
        x = info.obj.reshape(m.shape)
    if m.stride == 0:        # every product reads the same matrix
        x = x.reshape((-1, rows, cols))[0]
    else:
        x = (cp if info.on_device else np).broadcast_to(x, tuple(batch) + (rows, cols))
    if info.on_device:
        d = cp.ascontiguousarray(x.astype(dtype, copy=False))
    else:                    # one upload of a contiguous host copy
        d = cp.asarray(np.ascontiguousarray(x, dtype=dtype))
    if d.data.ptr % ALIGN:
        d = d.copy()
    return d.data.ptr, d


def _empty(cp, layout: Layout, device_id: int):
    """(the result array in the caller's kind, its CuPy view or None, its
    address): a fresh contiguous array of the result's shape."""
    if layout.kind == "torch":
        torch = sys.modules["torch"]
        t = torch.empty(layout.shape, dtype=getattr(torch, layout.dtype.name), device=f"cuda:{device_id}")
        return t, None, t.data_ptr()
    r = cp.empty(layout.shape, dtype=layout.dtype)
    return r, r, r.data.ptr


def execute(launch: Launch, kernel, device_id: int):
    """Run a prepared call with `kernel` (built for launch.problem; unused when
    launch.problem is None) and return the result in the caller's kind."""
    cp = sys.modules.get("cupy")
    if cp is None:
        from .device import import_cupy
        cp = import_cupy()
    if launch.layout.kind == "torch":      # torch's stream, made CuPy's for the copies
        st = _external_stream(cp, _torch_stream(device_id), device_id)
        with st:
            return _execute(cp, launch, kernel, device_id, st)
    # CuPy's current stream is already current: nothing to enter
    return _execute(cp, launch, kernel, device_id, cp.cuda.get_current_stream())


def _execute(cp, launch: Launch, kernel, device_id: int, st):
    lay = launch.layout
    check_devices(launch, device_id, lambda p: cp.cuda.runtime.pointerGetAttributes(p).device)
    if lay.waits:
        for handle in _producer_streams(launch, device_id):
            if handle != st.ptr:
                ev = cp.cuda.Event(disable_timing=True)
                ev.record(_external_stream(cp, handle, device_id))
                st.wait_event(ev)
    if launch.out_in_place:
        result, res_view, c_ptr = launch.out.obj, None, launch.out.ptr
    else:
        result, res_view, c_ptr = _empty(cp, lay, device_id)
    beta = launch.beta
    if beta != 0.0 and not launch.out_in_place:
        _fill(cp, launch, c_ptr, device_id)
    if lay.problem is None:
        if 0 not in lay.shape and beta == 0.0:
            _view_of(cp, c_ptr, lay, device_id)[...] = 0
        elif 0 not in lay.shape:   # K = 0: an empty sum, C = beta * C
            v = _view_of(cp, c_ptr, lay, device_id)
            v *= lay.dtype.type(beta)
    else:
        a_ptr, keep_a = _materialize(cp, lay.a, launch.a, lay.batch, lay.dtype, device_id)
        b_ptr, keep_b = _materialize(cp, lay.b, launch.b, lay.batch, lay.dtype, device_id)
        alloc = torch_alloc(device_id) if lay.kind == "torch" else None
        kernel.enqueue(a_ptr, b_ptr, c_ptr, lay.a.stride, lay.b.stride, lay.problem.batch,
                       launch.alpha, beta, stream=st, alloc=alloc)
    return _deliver(cp, launch, result, res_view, c_ptr, device_id)


def _view_of(cp, ptr: int, layout: Layout, device_id: int):
    """A CuPy view of a contiguous result buffer at `ptr`."""
    info = ArrayInfo("cai", None, layout.shape, _c_strides(layout.shape), layout.dtype, ptr=ptr)
    return _view(cp, info, device_id)


def _c_strides(shape: tuple) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def _fill(cp, launch: Launch, c_ptr: int, device_id: int) -> None:
    """Copy C (out's values) into the kernel's C buffer."""
    dst = _view_of(cp, c_ptr, launch.layout, device_id)
    c = launch.c
    src = _view(cp, c, device_id) if c.on_device else c.obj
    dst[...] = cp.asarray(src, dtype=launch.layout.dtype)


def _deliver(cp, launch: Launch, result, res_view, c_ptr: int, device_id: int):
    o = launch.out
    if o is not None and not launch.out_in_place:
        res = _view_of(cp, c_ptr, launch.layout, device_id)
        if o.on_device:
            _view(cp, o, device_id)[...] = res
        else:
            o.obj[...] = cp.asnumpy(res)
        return o.obj
    if o is not None:
        return o.obj
    if launch.layout.kind == "numpy":
        return cp.asnumpy(res_view)
    return result
