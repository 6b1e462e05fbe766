"""The points of one problem arranged by knob: what a landscape is drawn from.

A Cell is what one config, or the best of a group of configs, tells about a
place in the knob space:
- "ok": verified and timed; its value is GFLOP/s;
- "slow": abandoned part-way (far slower than the best so far), never verified;
- "wrong": ran, but its result failed the float64 check;
- "failed": did not compile, did not run, or the space rejected it;
- "missing": never evaluated.
Only ok cells have a value (NaN otherwise): a landscape never shows a speed
that was not verified, and never fills a place that was not measured.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..core.result import COMPILE_FAILED, INVALID, OK, RUN_FAILED, SLOW, WRONG
from .sources import Point

NAN = float("nan")
_STATE = {OK: "ok", SLOW: "slow", WRONG: "wrong", COMPILE_FAILED: "failed", RUN_FAILED: "failed",
          INVALID: "failed"}
# Of several unverified configs in one cell, the state shown: a wrong result matters
# most, then a failure, then an abandoned run.
_PRIORITY = ("wrong", "failed", "slow")


@dataclass(frozen=True)
class Cell:
    state: str                      # ok | slow | wrong | failed | missing
    value: float = NAN              # GFLOP/s, only when ok
    config: Mapping | None = None   # the config measured (the best one, where several)


MISSING = Cell("missing")


def cell_of(points: Iterable[Point]) -> Cell:
    """The best verified point of `points`, else the state of the unverified ones."""
    points = list(points)
    ok = [p for p in points if p.gflops is not None]
    if ok:
        best = max(ok, key=lambda p: p.gflops)
        return Cell("ok", best.gflops, best.config)
    if not points:
        return MISSING
    # an ok point without a time was verified but never timed: as good as abandoned
    states = {_STATE.get(p.status, "failed") for p in points} - {"ok"} or {"slow"}
    return Cell(next(s for s in _PRIORITY if s in states), NAN, points[0].config)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def ordered(values: Iterable) -> list:
    """Distinct values as a reader expects them: numbers ascending, then text (unroll's
    'full' after its numbers), then None."""
    vals = list(dict.fromkeys(values))
    nums = sorted(v for v in vals if _is_number(v))
    text = sorted((v for v in vals if not _is_number(v) and v is not None), key=str)
    return nums + text + ([None] if None in vals else [])


class Knobs:
    """Points by config (a config measured twice counts once: its last measurement,
    as a store keeps it), with each knob's values in reading order."""

    def __init__(self, points: Sequence[Point]):
        names: dict[str, None] = {}
        for p in points:
            names.update(dict.fromkeys(p.config))
        self.names = list(names)
        self.points: dict[tuple, Point] = {}
        for p in points:
            self.points[self.key(p.config)] = p
        self.values = {n: ordered(p.config.get(n) for p in self.points.values()) for n in self.names}

    def key(self, config: Mapping) -> tuple:
        return tuple(config.get(n) for n in self.names)

    def varying(self) -> list[str]:
        return [n for n in self.names if len(self.values[n]) > 1]

    def fixed(self) -> dict:
        return {n: self.values[n][0] for n in self.names if len(self.values[n]) == 1}

    def where(self, **fixed) -> list[Point]:
        return [p for p in self.points.values() if all(p.config.get(k) == v for k, v in fixed.items())]

    def best(self, **fixed) -> Point | None:
        ok = [p for p in self.where(**fixed) if p.gflops is not None]
        return max(ok, key=lambda p: p.gflops) if ok else None

    def at(self, config: Mapping) -> Cell:
        p = self.points.get(self.key(config))
        return cell_of([p]) if p is not None else MISSING

    # --- the two ways of holding the knobs a view does not show ------------------

    def slice(self, base: Mapping, knobs: Sequence[str], values: Sequence[Sequence]) -> dict:
        """{value tuple: Cell of `base` with `knobs` set to it}: every other knob held."""
        return {v: self.at({**base, **dict(zip(knobs, v))}) for v in itertools.product(*values)}

    def best_over(self, fixed: Mapping, knobs: Sequence[str], values: Sequence[Sequence]) -> dict:
        """{value tuple: Cell of the best point with `fixed` and `knobs` set to it}:
        every other knob at whatever value did best."""
        groups: dict[tuple, list[Point]] = {}
        for p in self.where(**fixed):
            groups.setdefault(tuple(p.config.get(k) for k in knobs), []).append(p)
        return {v: cell_of(groups.get(v, ())) for v in itertools.product(*values)}


def finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
