"""Load and validate a run report (schema 1, written by `python -m shadertune.search`).

The format is published as a JSON Schema (draft 2020-12), shipped in the package
as shadertune/report/report.schema.json (SCHEMA_FILE; schema_document() reads it),
and reports are validated against it with jsonschema.  Extra fields are tolerated;
a missing or mistyped required field is refused with a ReportError naming the
file and the field's path in the document, e.g.
    run.json: problems[1].best.gflops: missing required field
The file is read by the one bounded JSON reader (shadertune.core.jsonio: sizes,
integer digits, nesting).  Two rules are stricter than JSON Schema's own types
(the schema's description says so): a number must be finite (NaN and Infinity,
which that reader reads as floats, are refused) and an integer may not be
written as a float (64.0), as Python code downstream indexes and counts with it.
"""
from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from importlib import resources

SCHEMA = 1
SCHEMA_FILE = "report.schema.json"      # beside this module, in the wheel too


class ReportError(ValueError):
    """A file is not a valid report; str(e) is one line naming the file and the field."""


def schema_document() -> dict:
    """The published JSON Schema of a report (a fresh copy)."""
    return json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


_TYPE_NAMES = {"integer": "int", "number": "number", "string": "string", "boolean": "bool",
               "object": "object", "array": "array", "null": "null"}


def _tname(v) -> str:
    """The JSON type of a value read from JSON, as the messages name it."""
    for t, name in ((bool, "bool"), (int, "int"), (float, "number"), (str, "string"),
                    (Mapping, "object"), (list, "array"), (type(None), "null")):
        if isinstance(v, t):
            return name
    return type(v).__name__


@functools.cache
def _validator():
    """A draft 2020-12 validator of the published schema, with the two stricter types."""
    import jsonschema
    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine_many({
        # bool is an int in Python; a count given as true/false is still wrong
        "integer": lambda _, v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda _, v: (isinstance(v, (int, float)) and not isinstance(v, bool)
                                and math.isfinite(v)),
    })
    doc = schema_document()
    base.check_schema(doc)
    return jsonschema.validators.extend(base, type_checker=checker)(doc)


def _path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _message(e) -> str:
    """One jsonschema error as 'path: what is wrong' (the path names the field)."""
    path = _path(e.absolute_path)
    if e.validator == "required":
        missing = next(k for k in e.validator_value if k not in e.instance)
        return f"{_path([*e.absolute_path, missing])}: missing required field"
    where = path or "top level"
    if e.validator == "type":
        v = e.instance
        if isinstance(v, float) and not math.isfinite(v):
            return f"{where}: expected a finite number, got {v!r}"
        want = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        return (f"{where}: expected {' or '.join(_TYPE_NAMES.get(t, t) for t in want)}, "
                f"got {_tname(v)} ({v!r:.60})")
    if e.validator == "enum":
        return f"{where}: {e.instance!r:.60} is not one of {', '.join(map(str, e.validator_value))}"
    if e.validator == "const" and path == "schema":
        return f"schema: version {e.instance!r:.20} is not supported (expected {SCHEMA})"
    return f"{where}: {' '.join(e.message.split())[:200]}"


def validate(d, src: str = "<report>") -> dict:
    """Return `d` if it is a schema-1 report, else raise ReportError naming the field."""
    if not isinstance(d, Mapping):
        raise ReportError(f"{src}: not a report: expected a JSON object, got {_tname(d)}")
    if "schema" not in d:
        raise ReportError(f"{src}: not a report: missing required field 'schema'"
                          + (" (this looks like a ceilings file)" if d.get("kind") == "roofline" else ""))
    v = _validator()
    # the version first: a report of another version is refused as such, not field by field
    version = v.evolve(schema=v.schema["properties"]["schema"])
    err = next(version.iter_errors(d["schema"]), None)
    if err is not None:
        err.path.appendleft("schema")
        raise ReportError(f"{src}: {_message(err)}")
    if d.get("kind") == "roofline":
        raise ReportError(f"{src}: not a report: this is a ceilings file (kind 'roofline')")
    import jsonschema
    err = jsonschema.exceptions.best_match(v.iter_errors(d))
    if err is not None:
        raise ReportError(f"{src}: {_message(err)}")
    return d


def load(path) -> dict:
    """Read and validate a report file; every failure is a one-line ReportError."""
    from ..core.jsonio import read_json
    return validate(read_json(path, ReportError, "a report"), str(path))


def problem_key(p: Mapping) -> tuple:
    """What identifies a problem across reports: (M, N, K, dtype, trans_a, trans_b)."""
    return (p["M"], p["N"], p["K"], p["dtype"], p["trans_a"], p["trans_b"])


def problem_label(p: Mapping) -> str:
    """A report's problem as every table and message writes one (Problem.label)."""
    from ..core.problem import Problem
    return Problem.from_dict(p).label
