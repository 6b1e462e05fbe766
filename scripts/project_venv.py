"""The scripts' one preamble: run under the project's virtual environment when the
python3 that started a script lacks what it needs (`scripts/bootstrap.sh` makes .venv).

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from project_venv import use_project_venv
    ROOT = use_project_venv("moderngl", "numpy")     # the repository root, on sys.path
"""
from __future__ import annotations

import importlib
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def use_project_venv(*modules: str) -> pathlib.Path:
    """Import `modules`; when one is missing and .venv's python is not the one running,
    run the script again with it (os.execv: same arguments), else raise the ImportError.
    Returns the repository root, put first on sys.path (the checkout's shadertune)."""
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError:
        venv = ROOT / ".venv" / "bin" / "python"
        if venv.exists() and pathlib.Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
            os.execv(str(venv), [str(venv), sys.argv[0], *sys.argv[1:]])
        raise
    sys.path.insert(0, str(ROOT))
    return ROOT
