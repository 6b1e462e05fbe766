"""Store and load measured ceilings as JSON, next to the results they bound.

A measurement is a dict:
    {"schema": 1, "kind": "roofline", "created": ISO time,
     "device": {"backend", "vendor", "renderer", "driver", ...},
     "ceilings": {name: positive number, ...},   # named by the backend, ending in a unit
     "details": {benchmark: {how it was measured}}}
The measurements of several backends can be merged into one file (merge()), so a
report of any of them finds its ceilings in the same place; the merged device is
{"backends": {backend: device}}.

device["software_renderer"] (optional, false when absent): the numbers were
measured on a CPU rasteriser (a software renderer, as the backend reports it).  They are throughput
figures of one run, not a roofline: the shaders run on CPU threads, a kernel
can beat a microbenchmark that keeps fewer threads busy, and a --quick run
differs from a full one by up to 3x.  Reports hold no kernel against such
ceilings (software_reason()).
"""
from __future__ import annotations

import datetime
import math
import pathlib
from collections.abc import Mapping

SCHEMA = 1

# A ceiling's name ends in its unit (fetch_gtexels_quad: G texel fetches/s); the
# backends name what they measure, and every file, table and check reads the unit here.
UNITS = {
    "gflops": "GFLOP/s",
    "gbs": "GB/s",
    "gtexels": "G texel fetches/s",
    "gloads": "G vec4 loads/s",
}


def unit_of(name: str) -> str:
    """The unit of the ceiling `name` by the last of its words that names one ('' if none)."""
    for word in reversed(name.split("_")):
        if word in UNITS:
            return UNITS[word]
    return ""


class CeilingsError(ValueError):
    """A ceilings file is missing, unreadable or malformed; the message names file and field."""


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def new(device: Mapping, ceilings: Mapping, details: Mapping | None = None) -> dict:
    return {"schema": SCHEMA, "kind": "roofline", "created": now_iso(),
            "device": dict(device), "ceilings": dict(ceilings), "details": dict(details or {})}


def mark_software(measurement: Mapping) -> dict:
    """A copy of a one-device `measurement` flagged as taken on a software renderer."""
    return dict(measurement, device=dict(measurement["device"], software_renderer=True))


def _devices(measurement: Mapping) -> dict:
    dev = measurement.get("device")
    if not isinstance(dev, Mapping):
        return {}
    inner = dev.get("backends")
    if isinstance(inner, Mapping):
        return {k: v for k, v in inner.items() if isinstance(v, Mapping)}
    return {dev.get("backend", "?"): dev}


SOFTWARE_NOTE = "CPU throughput of one run, not a roofline (kernels can exceed it; runs differ by up to 3x)"


def software_reason(measurement: Mapping | None, backend: str | None = None) -> str | None:
    """Why `measurement` (a stored ceilings dict) is no roofline for `backend`'s kernels (any
    backend's, if None), or None if it is one."""
    if not isinstance(measurement, Mapping):
        return None
    devices = _devices(measurement)
    if backend is not None and backend in devices:
        devices = {backend: devices[backend]}
    for dev in devices.values():
        if dev.get("software_renderer") is True:
            where = dev.get("renderer")
            return f"measured on a software renderer{f' ({where})' if where else ''}: {SOFTWARE_NOTE}"
    return None


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
    for name, dev in _devices(d).items():
        if not isinstance(dev.get("software_renderer", False), bool):
            raise CeilingsError(f"{source}: device.software_renderer must be true or false, "
                                f"got {dev['software_renderer']!r:.40}")
    for k, v in d["ceilings"].items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
            raise CeilingsError(f"{source}: ceilings.{k} must be a positive finite number, got {v!r}")
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
    """Write a ceilings file through the one output writer (whole or not at all)."""
    from ..atomic import write_json
    validate(d, str(path))
    write_json(path, d, indent=2, sort_keys=True)
    return pathlib.Path(path)


def load(path) -> dict:
    from ..jsonio import read_json
    return validate(read_json(path, CeilingsError, "a ceilings file"), str(path))
