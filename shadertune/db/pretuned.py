"""The pre-tuned table shipped with shadertune: the fallback below the user's store.

As CLBlast ships its database of tuned parameters per device, the wheel carries
`pretuned.jsonl` (package data beside this module): the best verified config of each
problem tuned on the devices the project measured (llvmpipe here; the GPU machine's
cards from the runs recorded under benchmarks/).  `auto` reads it only where the
user's store gives nothing for the device (selection/chain.py), and marks what it takes from
it (Selection.pretuned).

The format is `python -m shadertune.db export --best --format jsonl` (exchange.BEST_FIELDS
and one field per knob), with an optional `source` naming where a row came from; a
row whose template hash is null was recorded without one (a search report).
`scripts/pretuned` regenerates the table from stores and reports.

Trust: a row measured on this very device key and template hash is a measurement
of the kernel `auto` would run here; any other row (another driver, profile or
kernel version, or no template hash on record) is verified against float64 on
first use before matmul runs it (select.select_config).
"""
from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..core.config import Config
from ..core.problem import Problem
from .exchange import BEST_FIELDS

log = logging.getLogger(__name__)

TABLE = "pretuned.jsonl"
META = frozenset(BEST_FIELDS) | {"source"}      # every other field is a knob


@dataclass(frozen=True)
class Row:
    backend: str
    device: str                  # the device key it was measured on: 'renderer | driver'
    template_hash: str | None    # None: not on record
    problem: Problem
    config: Config
    gflops: float
    source: str = ""

    @property
    def renderer(self) -> str:
        return renderer_of(self.device)

    def trusted_on(self, device: str, template_hash: str) -> bool:
        """Measured on this device key with these kernels: no re-verification needed."""
        return self.device == device and self.template_hash == template_hash


def renderer_of(device_key: str) -> str:
    """The renderer part of a device key ('renderer | driver', DeviceInfo.key)."""
    return device_key.rsplit(" | ", 1)[0]


def parse(lines: Iterable[str], where: str = TABLE) -> list[Row]:
    """The rows of a table in the best-export format; ValueError naming the line."""
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(_row(json.loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{where}: line {i}: not a best row ({type(e).__name__}: {e})") from None
    return rows


def _row(d: dict[str, Any]) -> Row:
    p = Problem(int(d["M"]), int(d["N"]), int(d["K"]), d["dtype"], bool(d["trans_a"]),
                bool(d["trans_b"]), int(d.get("batch") or 1))
    knobs = {k: v for k, v in d.items() if k not in META and v is not None}
    if not knobs:
        raise ValueError("no knobs")
    gflops = float(d["gflops"])
    if not gflops > 0:
        raise ValueError(f"gflops {gflops!r} is not positive")
    th = d.get("template_hash")
    return Row(str(d["backend"]), str(d["device"]), None if th is None else str(th), p,
               Config(knobs), gflops, str(d.get("source") or ""))


@functools.lru_cache(maxsize=1)
def table() -> tuple[Row, ...]:
    """Every row of the shipped table, read once per process (none when the file is
    missing or damaged: a warning, and `auto` goes on without it)."""
    try:
        text = resources.files(__package__).joinpath(TABLE).read_text(encoding="utf-8")
        return tuple(parse(text.splitlines()))
    except (OSError, ValueError) as e:
        log.warning("the pre-tuned table is not used: %s", e)
        return ()


@functools.lru_cache(maxsize=64)
def rows_for(backend: str, renderer: str) -> tuple[Row, ...]:
    """The table's rows of one backend and renderer (any driver, profile or templates)."""
    return tuple(r for r in table() if r.backend == backend and r.renderer == renderer)


__all__ = ["META", "Row", "TABLE", "parse", "renderer_of", "rows_for", "table"]
