"""optional_import: the one way shadertune imports an optional extra.

The rule: an optional dependency (scikit-learn for the `model` extra, Dask
distributed for `cluster`, CuPy for `cuda`) is imported on first use, inside
the function that needs it, never at module import, so that everything else
works without it.  A missing one raises one clear error whose message says
what needs it and which extra to install (`hint`), followed by the import's
own reason in parentheses.  The error is ImportError unless the caller names
its own type (each subsystem raises the error its callers already handle),
and it is raised without the ImportError chained to it.
"""
from __future__ import annotations

import importlib


def optional_import(module_name: str, hint: str, *, error: type[Exception] = ImportError,
                    catch: type[BaseException] | tuple[type[BaseException], ...] = ImportError):
    """The module `module_name`, or `error(f"{hint} ({reason})")` when importing
    it raises `catch`.  A dotted name imports its top package first, as the
    `import a.b` statement does, so a package marked missing (None in
    sys.modules) is missing even where a submodule of it was imported before."""
    try:
        importlib.import_module(module_name.partition(".")[0])
        return importlib.import_module(module_name)
    except catch as e:
        raise error(f"{hint} ({e})") from None
