"""Verdicts judged against the tolerance in force, not the one a result was measured under.

The store keeps each result's relative error next to the status its run gave it, and
every reader judges again:

- an 'ok' result whose error is over the tolerance in force is 'wrong' here (an 'ok'
  without an error cannot be judged: it is measured again);
- a 'wrong' result with an error (wrong on the error alone) whose error is within the
  tolerance in force was never timed: it is measured again;
- every other verdict stands whatever the tolerance: NaN/Inf or misshapen output
  ('wrong' without an error), failures to compile or run, 'slow', 'invalid'.

The seed is not part of a result's key.  It picks the uniform [-1, 1) inputs a config
is verified on; a kernel's relative error on such inputs is a property of its
arithmetic (its summation order and rounding), which differs between seeds by a few
per cent, not by the orders of magnitude between a correct kernel (about 1e-7 in
float32) and the default tolerance (1e-5).  So a result verified under one seed is
replayed under another; `--retune` verifies afresh.  The store records the seed for
provenance.
"""
from __future__ import annotations

import dataclasses

from .result import OK, WRONG, Result

DEFAULT_TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def tolerance_for(dtype: str, tolerance: float | None = None) -> float:
    """`tolerance`, or the default for `dtype` when it is None."""
    return DEFAULT_TOLERANCE[dtype] if tolerance is None else float(tolerance)


def over_tolerance(error: float, tolerance: float) -> str:
    """The message of a result wrong on its error alone."""
    return f"relative error {error:.3g} > tolerance {tolerance:g}"


def rejudge(result: Result, tolerance: float | None = None) -> Result | None:
    """`result` as judged under `tolerance` (None: the dtype's default), or None when
    that judgement needs a new measurement (see the module docstring)."""
    tol = tolerance_for(result.problem.dtype, tolerance)
    err = result.error
    if result.status == OK:
        if err is None:
            return None
        if err <= tol:
            return result
        return dataclasses.replace(result, status=WRONG, message=over_tolerance(err, tol)
                                   + " (measured ok under a looser tolerance)")
    if result.status == WRONG and err is not None:
        if err <= tol:
            return None
        return dataclasses.replace(result, message=over_tolerance(err, tol))
    return result
