"""Reading measured ceilings for a bound: what every backend's roofline model shares.

A backend's model (backends/*/roofline.py) reads the ceilings it needs by name
from a stored measurement ({'ceilings': {...}, ...}) or the flat map itself, and
draws device-wide lines (a peak) across sizes.
"""
from __future__ import annotations

from collections.abc import Mapping


def flat(ceilings: Mapping) -> Mapping:
    """Accept a stored measurement ({'ceilings': {...}, ...}) or the flat ceilings map."""
    inner = ceilings.get("ceilings")
    return inner if isinstance(inner, Mapping) else ceilings


def need(c: Mapping, key: str) -> float:
    """The positive ceiling `key` of the flat map `c`; KeyError (naming what there is)
    when it is absent or not a positive number."""
    v = c.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
        raise KeyError(f"ceilings lack a positive {key!r} (have {sorted(c)})")
    return float(v)


def peak_line(c: Mapping, key: str, label: str) -> list[tuple[str, float]]:
    """[(label and value, value)] for the ceiling `key` where it was measured, else []."""
    v = c.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return [(f"{label} {v:,.0f}", float(v))]
    return []
