"""The command lines, one wing above every layer:

    python -m shadertune TOOL [ARGUMENTS]        (or the console script shadertune-TOOL)

TOOL is one of TOOLS: search, report, db, codegen, perfmodel, cluster, demo.  Each
tool's module here holds its parser (build_parser) and main(argv); `python -m
shadertune.TOOL` runs the same main (the packages' __main__ forwarders, kept for the
documented commands).  What several tools share lives here too: args (the parser
class, parent parsers, argument types, the one error line), search_runs (a search
table's runs, shared by the search and its cluster step), search_cluster (the
search's --workers/--gpus/--cluster step).

Conventions (args.py): usage names `python -m shadertune.TOOL`; an error is one line
`shadertune.TOOL: error: <reason>`, exit 2 for bad arguments, checked before the
store, the device or any file is touched; 1 when the work fails.
"""
from __future__ import annotations

import difflib
import importlib
import sys

# tool -> what it does (its module is shadertune.cli.<tool>)
TOOLS = {
    "search": "tune matmul for shapes on a backend: every config verified and stored",
    "report": "tables and plots of search reports, rooflines, knob landscapes, trajectories",
    "db": "look into a tuning store, export it, import others, prune and check it",
    "codegen": "print the kernel generated for a config; list the knobs and the space",
    "perfmodel": "the learned performance model: sample, train, explain",
    "cluster": "serve a Dask scheduler with one worker per GPU of this host",
    "demo": "tune a few sizes here, then multiply with the tuned kernel",
}

USAGE = "usage: python -m shadertune [-h] [--version] TOOL [ARGUMENTS]"


def module(tool: str):
    """The module of `tool` (imported now: each tool imports what it needs)."""
    return importlib.import_module(f"{__name__}.{tool}")


def help_text() -> str:
    width = max(map(len, TOOLS))
    rows = "\n".join(f"  {name:{width}}  {what}" for name, what in TOOLS.items())
    return (f"{USAGE}\n\nshadertune's command lines (python -m shadertune TOOL --help for one):\n\n"
            f"{rows}\n\nThe same as python -m shadertune.TOOL and the console script "
            f"shadertune-TOOL.\n")


def main(argv=None) -> int:
    """python -m shadertune TOOL [ARGUMENTS]: TOOL's main(ARGUMENTS), its exit status."""
    from .args import fail
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(help_text(), end="")
        return 0
    if argv[:1] == ["--version"]:
        from ..core.version import __version__
        print(f"python -m shadertune (shadertune) {__version__}")
        return 0
    if not argv or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        what = f"unknown option {argv[0]!r} before the tool" if argv else "name a tool"
        return fail("shadertune", f"{what}: {', '.join(TOOLS)} (--help says what each does)", 2)
    tool, rest = argv[0], argv[1:]
    if tool not in TOOLS:
        close = difflib.get_close_matches(tool, list(TOOLS), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        print(USAGE, file=sys.stderr)
        return fail("shadertune", f"no tool {tool!r}: the tools are {', '.join(TOOLS)}{hint}", 2)
    return module(tool).main(rest)
