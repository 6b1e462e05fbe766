"""Reading JSON a user hands a tool (reports, ceilings, bench files): bounded, and every
failure one line naming the file.

    doc = jsonio.read_json(path, ReportError, "a report")

Bounds and policies, the same for every reader:
- size: at most MAX_BYTES of text (a report of 100,000 results is about 40 MB);
- integers: at most MAX_INT_DIGITS digits.  Every integer a report or ceilings
  file holds (sizes, counts, seeds, timestamps) has fewer than 20; Python itself
  refuses more than 4,300 with an error that names no file, and a 4,000-digit
  size would overflow every float computed from it;
- numbers with a fraction or exponent that overflow a float (1e999) are refused:
  the text says a finite number, the value would be infinite;
- NaN, Infinity and -Infinity literals are read as floats: Python's json writes
  them (a report holding a NaN stays readable), and the readers' own checks say
  where a finite number is needed (shadertune.report.schema, roofline.store);
- nesting: as deep as the parser's own recursion limit (about 1,000 levels;
  real reports nest 6 deep); deeper is refused, never a RecursionError.
"""
from __future__ import annotations

import json
import math
import pathlib

MAX_BYTES = 512 << 20
MAX_INT_DIGITS = 40


class _Refused(ValueError):
    """A value the bounds above refuse (raised inside the parser's hooks)."""


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {digits} digits (at most {MAX_INT_DIGITS} are read)")
    return int(text)


def _float(text: str) -> float:
    v = float(text)
    if math.isinf(v):
        raise _Refused(f"the number {text[:20]}{'...' if len(text) > 20 else ''} is too "
                       f"large for a float")
    return v


def loads(text: str):
    """json.loads under the bounds above; ValueError (one line) when refused."""
    if len(text) > MAX_BYTES:
        raise _Refused(f"{len(text)} characters of JSON (at most {MAX_BYTES} are read)")
    try:
        return json.loads(text, parse_int=_int, parse_float=_float)
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON at line {e.lineno} column {e.colno} ({e.msg})") from None
    except RecursionError:
        raise _Refused("JSON nested too deeply to read") from None
    except _Refused:
        raise
    except ValueError as e:          # Python's own limits on number conversion
        raise _Refused(" ".join(str(e).split()[:12])) from None


def read_json(path, error: type[Exception], what: str):
    """Parse the JSON file `path`; every failure is one line of `error` naming the file:
    a missing file, a folder, a binary file, a file too large, invalid JSON, and the
    bounds above."""
    p = pathlib.Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise error(f"{p}: no such file") from None
    except OSError as e:
        raise error(f"{p}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_BYTES:
        raise error(f"{p}: not {what}: larger than {MAX_BYTES >> 20} MB") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{p}: not {what}: not UTF-8 text (a binary file?)") from None
    try:
        return loads(text)
    except ValueError as e:
        raise error(f"{p}: not {what}: {e}") from None


__all__ = ["MAX_BYTES", "MAX_INT_DIGITS", "loads", "read_json"]
