"""The rules every argument that reaches a measurement or the store is held to: one
place for the library (the Evaluator, tune(), measure()) and the command lines
(shadertune.cli.args parses text and applies these same rules).

Each rule (check_*) returns the value (as an int or float) or raises ValueError in
numpy's style: "seed must be at least 0, got -1".  With `name` None the message has no
subject (the command lines put "argument --seed:" in front).

Why before anything runs: an argument error found during an evaluation (numpy's
default_rng refusing a negative seed while a kernel's inputs are made) would be
recorded as that config's verdict, stored, and replayed by every later search.
"""
from __future__ import annotations

import math
import numbers

SEED_MAX = (1 << 63) - 1        # the store keeps a seed as SQLite's 64-bit INTEGER


def _refuse(name: str | None, text: str):
    raise ValueError(f"{name} {text}" if name else text)


def check_integer(v, name: str | None = None, minimum: int | None = None,
            maximum: int | None = None) -> int:
    """An int (not a bool, not a float) within [minimum, maximum]."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        _refuse(name, f"must be an integer, got {v!r}")
    v = int(v)
    if minimum is not None and v < minimum:
        _refuse(name, f"must be at least {minimum}, got {v}")
    if maximum is not None and v > maximum:
        _refuse(name, f"must be at most {maximum}, got {v}")
    return v


def check_number(v, name: str | None = None, *, above: float | None = None,
           minimum: float | None = None) -> float:
    """A finite real number (NaN and infinities refused) > `above` or >= `minimum`."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        _refuse(name, f"must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        _refuse(name, f"must be a finite number, got {v!r}")
    if above is not None and not v > above:
        _refuse(name, f"must be greater than {above:g}, got {v:g}")
    if minimum is not None and not v >= minimum:
        _refuse(name, f"must be at least {minimum:g}, got {v:g}")
    return v


def check_seed(v, name: str | None = "seed") -> int:
    return check_integer(v, name, 0, SEED_MAX)


def check_tolerance(v, name: str | None = "tolerance") -> float | None:
    """None (the dtype's default) or a finite number > 0."""
    return None if v is None else check_number(v, name, above=0.0)


def check_seconds(v, name: str | None = "seconds") -> float | None:
    """None (no limit) or a finite number of seconds >= 0."""
    return None if v is None else check_number(v, name, minimum=0.0)


def check_measurement(*, seed=0, tolerance=None, repeats=1, warmup=0) -> None:
    """The settings of a measurement (Evaluator, tune, measure), all checked at once."""
    check_seed(seed)
    check_tolerance(tolerance)
    check_integer(repeats, "repeats", 1)
    check_integer(warmup, "warmup", 0)


__all__ = ["SEED_MAX", "check_integer", "check_measurement", "check_number", "check_seconds",
           "check_seed", "check_tolerance"]
