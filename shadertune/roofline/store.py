"""Store and load measured ceilings as JSON, next to the results they bound.

A measurement is a dict:
    {"schema": 1, "kind": "roofline", "created": ISO time,
     "device": {"backend", "vendor", "renderer", "driver", ...},
     "ceilings": {name: positive number, ...},   # e.g. fragment_fma_gflops
     "details": {benchmark: {how it was measured}}}
GL and CUDA measurements can be merged into one file (merge()), so a report
of either backend finds its ceilings in the same place.
"""
from __future__ import annotations

import datetime
import json
import pathlib
from collections.abc import Mapping

SCHEMA = 1

# Every ceiling key the models read, with its unit, for tables and checks.
UNITS = {
    "fragment_fma_gflops": "GFLOP/s",
    "fetch_gtexels": "G texel fetches/s",
    "fetch_gtexels_distinct": "G texel fetches/s",
    "fetch_gtexels_quad": "G texel fetches/s",
    "ssbo_gloads": "G storage-buffer vec4 loads/s",
    "compute_fma_gflops": "GFLOP/s",
    "cuda_fma_gflops": "GFLOP/s",
    "cuda_fma64_gflops": "GFLOP/s",
    "cuda_dram_gbs": "GB/s",
}


class CeilingsError(ValueError):
    """A ceilings file is missing, unreadable or malformed; the message names file and field."""


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def new(device: Mapping, ceilings: Mapping, details: Mapping | None = None) -> dict:
    return {"schema": SCHEMA, "kind": "roofline", "created": now_iso(),
            "device": dict(device), "ceilings": dict(ceilings), "details": dict(details or {})}


def validate(d, source: str = "<ceilings>") -> dict:
    if not isinstance(d, Mapping):
        raise CeilingsError(f"{source}: a ceilings file must hold a JSON object, got {type(d).__name__}")
    if "problems" in d:
        raise CeilingsError(f"{source}: this is a run report, not a ceilings file")
    for key, typ in (("schema", int), ("created", str), ("device", Mapping), ("ceilings", Mapping)):
        if key not in d:
            raise CeilingsError(f"{source}: missing required field {key!r}")
        if not isinstance(d[key], typ):
            raise CeilingsError(f"{source}: field {key!r} must be {typ.__name__}, got {type(d[key]).__name__}")
    if d["schema"] != SCHEMA:
        raise CeilingsError(f"{source}: schema {d['schema']} is not supported (expected {SCHEMA})")
    for k, v in d["ceilings"].items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise CeilingsError(f"{source}: ceilings.{k} must be a positive number, got {v!r}")
    return dict(d)


def merge(*measurements: Mapping) -> dict:
    """One dict holding the ceilings of several measurements (e.g. GL and CUDA of one machine)."""
    out = new({}, {}, {})
    devices = {}
    for m in measurements:
        validate(m)
        out["ceilings"].update(m["ceilings"])
        out["details"].update(m.get("details", {}))
        devices[m["device"].get("backend", "?")] = dict(m["device"])
    out["device"] = devices[next(iter(devices))] if len(devices) == 1 else {"backends": devices}
    return out


def save(path, d: Mapping) -> pathlib.Path:
    validate(d, str(path))
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")
    tmp.replace(p)                      # never leave a half-written file next to results
    return p


def load(path) -> dict:
    p = pathlib.Path(path)
    try:
        d = json.loads(p.read_text())
    except FileNotFoundError:
        raise CeilingsError(f"{p}: no such ceilings file") from None
    except json.JSONDecodeError as e:
        raise CeilingsError(f"{p}: not valid JSON ({e})") from None
    return validate(d, str(p))
