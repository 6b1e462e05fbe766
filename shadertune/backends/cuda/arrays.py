"""How the CUDA kernels read an operand where it lies (device_arrays.ArrayInfo
says where that is): the layout of a matrix (row-major, or column-major through
the kernel's trans flag), the spacing of a batch's products, and which element
types they compute in.  Anything these cannot express is copied once on the
device (call.py)."""
from __future__ import annotations

import numpy as np

from ...call.device_arrays import ArrayInfo

# Element types the kernels compute in. Half precision on the device
# (float16) is refused: there is no half-precision kernel, and a silent float32
# result would hide that. Host arrays of other real types (integers, bools,
# float16) are cast as on the GL path, and so are device integers and bools
# (copied once on the device).
KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_device_dtype(info: ArrayInfo, name: str) -> None:
    """A TypeError for device half precision (see KERNEL_DTYPES)."""
    if info.on_device and info.dtype.kind == "f" and info.dtype not in KERNEL_DTYPES:
        raise TypeError(f"matmul: {name} has dtype {info.dtype.name}; the CUDA kernels compute in "
                        f"float32 and float64 only (no half-precision kernel): cast it first, "
                        f"e.g. {name}.astype('float32')")


# The kernels' operand layouts, for a matrix of `rows` x `cols` with element
# strides (sr, sc): 'N' row-major (the stored layout), 'T' column-major (the
# stored layout of its transpose: the kernel's trans flag reads it in place),
# None: neither (copied once to row-major). A dimension of length 1 has no
# meaningful stride.
def matrix_layout(rows: int, cols: int, sr: int, sc: int) -> str | None:
    if (cols == 1 or sc == 1) and (rows == 1 or sr == cols):
        return "N"
    if (rows == 1 or sr == 1) and (cols == 1 or sc == rows):
        return "T"
    return None


def batch_stride(batch: tuple, shape: tuple, strides: tuple) -> int | None:
    """One element stride between consecutive products of the flattened
    `batch` for an operand whose batch dims are `shape` (left-padded with 1s
    by broadcasting) with `strides`; 0 for a broadcast operand; None when the
    products are not evenly spaced (the operand is then copied)."""
    nd = len(batch)
    shape = (1,) * (nd - len(shape)) + tuple(shape)
    strides = (0,) * (nd - len(strides)) + tuple(strides)
    s, span = None, 1            # span: products per step of dimension i
    for i in reversed(range(nd)):
        if batch[i] > 1:
            st = 0 if shape[i] == 1 else strides[i]
            if s is None:
                if st % span:
                    return None
                s = st // span
            elif st != s * span:
                return None
        span *= batch[i]
    return 0 if s is None else s
