"""A search's checked run compared on the device (CUDAKernel.checked_compare).

A search verifies every config on the same inputs against one float64 reference.
Copying A and B to the device for every config, C back, and comparing on the
host's cores cost a 2048^3 search about 27 ms a config, more than building and
timing most kernels; so the inputs and the reference go to the device once a
search (kept in the evaluator's OperandCache, whose bytes bound them), and each
checked run's C is compared there: two reductions in one pass each over C, no
temporary of C's size, two numbers back.  The comparison is the evaluator's own
(search.evaluate.check_output): NaN/Inf elements counted, the squared
differences of the finite ones summed in float64.
"""
from __future__ import annotations

_KEY = "cuda device inputs"


class DeviceInputs:
    """The device copies of one search's A, B and float64 reference, and which host
    arrays they copy (compared by identity: the evaluator's never change)."""

    def __init__(self, host: tuple, device: tuple | None):
        self.host = host
        self.device = device            # None: they did not fit on the device
        self.nbytes = 0 if device is None else sum(int(x.nbytes) for x in device)


def device_inputs(cp, cache, A, B, ref):
    """(A, B, ref) on the current device, copied once per search and kept in `cache`;
    None where `cache` is None or they do not fit in device memory (the evaluator
    then compares on the host, as without this)."""
    if cache is None:
        return None
    key = (_KEY, cp.cuda.Device().id)
    got = cache.get(key)
    if got is not None and got.host[0] is A and got.host[1] is B and got.host[2] is ref:
        return got.device
    try:
        device = (cp.asarray(A), cp.asarray(B), cp.asarray(ref))
    except cp.cuda.memory.OutOfMemoryError:
        device = None
    # kept, or (larger than the cache may hold) copied again for the next config;
    # a None (no room on the device) is kept too: the next config compares on the host
    cache[key] = DeviceInputs((A, B, ref), device)
    return device


_KERNELS: dict = {}


def _reductions(cp):
    """The two reductions, made once a process (CuPy compiles them per dtype at first use)."""
    got = _KERNELS.get(id(cp))
    if got is None:
        finite = "isfinite((double)c)"
        sq = cp.ReductionKernel(
            "T c, float64 r", "float64 s",
            f"{finite} ? ((double)c - r) * ((double)c - r) : 0.0", "a + b", "s = a", "0",
            "shadertune_sq_diff")
        bad = cp.ReductionKernel(
            "T c", "int64 n", f"{finite} ? 0 : 1", "a + b", "n = a", "0",
            "shadertune_nonfinite")
        got = _KERNELS[id(cp)] = (sq, bad)
    return got


def compare(cp, C, ref) -> tuple[int, float]:
    """(NaN/Inf elements of C, the sum of (C - ref)^2 over its finite elements) on the
    device; C and ref of one shape, ref float64."""
    sq, bad = _reductions(cp)
    return int(bad(C)), float(sq(C, ref))
