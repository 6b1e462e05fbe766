"""The command lines' common ground: one parser class, the shared parent parsers, every
argument check, and one way to fail.  Used by python -m shadertune.search, .db,
.report, .perfmodel, .codegen and .cluster.

Conventions, the same in every tool:
- usage lines name the command to type: `usage: python -m shadertune.db ...`;
- an error is one line on stderr, `shadertune.TOOL: error: <reason>`, never a
  traceback; exit status 2 for bad arguments (and bad environment variables),
  1 when the work itself fails (a tool's --help says where it differs);
- common options (the store's --db; --backend where every subcommand takes one)
  are accepted before or after the subcommand: they come from one parent parser,
  given to the tool's parser and, with its defaults suppressed, to each subcommand
  (a subcommand's unused default would otherwise overwrite the value given before
  it);
- sizes are written one way: N (N x N x N), MxNxK, or BxMxNxK (a batch of B
  products); M,N,K is read too where one size is asked for; a list of sizes is
  comma-separated (256,512,1024 or 64x32x16,128);
- every option has help text (tests/test_cli_conventions.py walks every parser);
- every argument is checked here, by the parser (the `type=` functions below, which
  apply the rules of shadertune.core.arguments that the library applies too) or by
  check_output before the tool touches the store (and backends.check_environment,
  cli/search.py), so that
  an error the arguments cause stops the tool with one line and is never measured,
  stored or replayed as a config's verdict.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

from ..core import arguments as A
from ..core.problem import Problem
from ..core.result import STATUSES
DB_HELP = ("the SQLite tuning store (default: $SHADERTUNE_DB, else "
           "$XDG_CACHE_HOME/shadertune/tune.sqlite, else ~/.cache/shadertune/tune.sqlite)")
SIZE_HELP = "N (N x N x N), MxNxK, or BxMxNxK (a batch of B products)"


def prog(tool: str) -> str:
    """The program name in usage lines: the command a user types."""
    return f"python -m shadertune.{tool}"


def _tool_of(prog_name: str) -> str:
    words = prog_name.split()
    return words[2] if words[:2] == ["python", "-m"] and len(words) > 2 else words[0]


def error_line(tool: str, reason) -> str:
    """`shadertune.TOOL: error: reason` on one line (whitespace folded)."""
    name = tool if tool.startswith("shadertune") else f"shadertune.{tool}"
    return f"{name}: error: {' '.join(str(reason).split()) or 'failed'}"


def fail(tool: str, reason, code: int = 1) -> int:
    """Print the one error line; return the exit status."""
    print(error_line(tool, reason), file=sys.stderr)
    return code


def os_error_text(e: OSError) -> str:
    """An OSError as 'PATH: what went wrong' (no errno, no Python repr)."""
    what = e.strerror or str(e) or type(e).__name__
    return f"{e.filename}: {what}" if e.filename else what


class Parser(argparse.ArgumentParser):
    """argparse with the conventions above: one error line, exit 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)   # --mrt is never an abbreviation of --mrt-height
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, error_line(_tool_of(self.prog), message) + "\n")


def tool_parser(tool: str, description: str, epilog: str | None = None, *,
                parents=(), raw: bool = True) -> Parser:
    p = Parser(prog=prog(tool), description=description, epilog=epilog, parents=list(parents),
               formatter_class=argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter)
    from ..core.version import __version__
    p.add_argument("--version", action="version", version=f"%(prog)s (shadertune) {__version__}",
                   help="print the version and exit")
    return p


# --- shared parent parsers ---------------------------------------------------------

def common_parents(*adders) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """(parent for the tool's parser, parent for each subcommand) holding the options
    the `adders` add (each a function(parser, default_of) -> None).  The subcommand's
    copy suppresses its defaults, so a value given before the subcommand stands."""
    top = argparse.ArgumentParser(add_help=False)
    sub = argparse.ArgumentParser(add_help=False)
    for add in adders:
        add(top, lambda v: v)
        add(sub, lambda v: argparse.SUPPRESS)
    return top, sub


def add_db(p, default_of=lambda v: v) -> None:
    p.add_argument("--db", metavar="PATH", default=default_of(None), help=DB_HELP)


def add_backend(p, default_of=lambda v: v, *, default="gl") -> None:
    p.add_argument("--backend", type=backend_name, default=default_of(default),
                   help=f"'gl', 'cuda', or module:Class of another backend (default {default})")


def add_full_config(p) -> None:
    """--full-config: print every knob of each config, not only the knobs that act on
    it (shadertune.backends.acting)."""
    p.add_argument("--full-config", action="store_true",
                   help="print every knob of each config (default: the knobs that act on it; "
                        "the others are held at the one value its family or path allows)")


# --- argument types: each raises ArgumentTypeError with the reason ----------------------

def _bad(message: str):
    raise argparse.ArgumentTypeError(message)


def _ruled(rule, v):
    """Apply a rule of shadertune.core.arguments; its ValueError becomes argparse's error."""
    try:
        return rule(v)
    except ValueError as e:
        _bad(str(e))


def integer(minimum: int | None = None, maximum: int | None = None, what: str = "an integer"):
    """An argparse type: an int within [minimum, maximum] (arguments.check_integer)."""
    def parse(text: str) -> int:
        try:
            v = int(str(text).strip())
        except ValueError:
            _bad(f"expected {what}, got {text!r}")
        return _ruled(lambda x: A.check_integer(x, None, minimum, maximum), v)
    parse.__name__ = what
    return parse


def number(*, above: float | None = None, minimum: float | None = None, what: str = "a number"):
    """An argparse type: a finite float > `above` (or >= `minimum`); nan and inf refused
    (arguments.check_number)."""
    def parse(text: str) -> float:
        try:
            v = float(str(text).strip())
        except ValueError:
            _bad(f"expected {what}, got {text!r}")
        return _ruled(lambda x: A.check_number(x, None, above=above, minimum=minimum), v)
    parse.__name__ = what
    return parse


positive = integer(1, what="a positive integer")
non_negative = integer(0, what="a non-negative integer")
seed = integer(0, A.SEED_MAX, what="a seed (an integer >= 0)")
tolerance = number(above=0.0, what="a tolerance (a number > 0)")
seconds = number(minimum=0.0, what="a number of seconds >= 0")
days = number(minimum=0.0, what="a number of days >= 0")


def size(text: str) -> Problem:
    """An argparse type: one problem size (see SIZE_HELP; M,N,K too); float32, no transposes."""
    numbers = re.split(r"[,x]", str(text).strip())
    if all(re.fullmatch(r"\s*[+-]?\d+\s*", n) for n in numbers) and min(map(int, numbers)) < 1:
        _bad(f"sizes must be positive, got {text!r}")      # -4 as 0 is: not Problem's wording
    try:
        p = Problem.parse(text)
    except (TypeError, ValueError) as e:
        _bad(str(e))
    if min(p.M, p.N, p.K, p.batch) < 1:
        _bad(f"sizes must be positive, got {text!r}")
    return p


def sizes(text: str) -> list[Problem]:
    """An argparse type: comma-separated sizes, each N, MxNxK or BxMxNxK."""
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        _bad("needs at least one size")
    return [size(t) for t in items]


def backend_name(text: str) -> str:
    """An argparse type: --backend, a registered backend's name or module:Class (that one
    is checked when it loads: an import can fail for reasons no argument check sees)."""
    from ..backends import available
    name = str(text).strip()
    if ":" in name:
        module, _, cls = name.partition(":")
        if not module or not cls:
            _bad(f"expected a backend name or module:Class, got {text!r}")
        return name
    if name not in available():
        _bad(f"unknown backend {name!r}; expected one of {', '.join(available())}, or "
             f"module:Class of another backend")
    return name


def check_dtype(backend: str, dtype: str) -> None:
    """ValueError when the registered backend `backend` computes no `dtype` (its class's
    `dtypes`, read without a device): an argument error, said before the store is opened
    rather than found by the search.  A module:Class backend says so itself."""
    from ..backends import backend_class
    if ":" in backend:
        return
    try:
        dtypes = backend_class(backend).dtypes
    except (ImportError, ValueError):
        return                           # left to load_backend, which names the reason
    if dtype not in dtypes:
        raise ValueError(f"--dtype {dtype}: the {backend} backend computes in "
                         f"{' and '.join(dtypes)} only")


def status(text: str) -> str:
    if text not in STATUSES:
        _bad(f"unknown status {text!r}; expected one of {', '.join(STATUSES)}")
    return text


# --- checks after parsing --------------------------------------------------------------

def check_output(path, *, protect=(), stream_ok: bool = True,
                 protected: str = "the store's file") -> None:
    """Refuse an output path before the work starts (atomic.check: a device node, a
    folder, the store itself); raises atomic.OutputError."""
    if path is None:
        return
    from ..core.atomic import check
    check(path, protect=protect, stream_ok=stream_ok, protected=protected)


def path_exists(path) -> bool:
    """Whether `path` exists; OSError (a folder on the way that cannot be entered, a
    file where a folder should be) propagates instead of reading as 'missing'."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    return True


__all__ = ["DB_HELP", "Parser", "SIZE_HELP", "add_backend", "add_db", "backend_name",
           "check_dtype", "check_output", "common_parents", "days", "error_line", "fail",
           "integer", "non_negative", "number", "os_error_text", "path_exists", "positive", "prog", "seconds", "seed",
           "size", "sizes", "status", "tolerance", "tool_parser"]
