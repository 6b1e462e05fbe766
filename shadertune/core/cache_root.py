"""Where compiled kernels are cached for this user: $SHADERTUNE_CACHE, else
$XDG_CACHE_HOME/shadertune, else ~/.cache/shadertune.  A backend keeps a folder of its
own there (cuda/: cubins)."""
from __future__ import annotations

import os
import pathlib


def cache_root() -> pathlib.Path:
    root = os.environ.get("SHADERTUNE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shadertune")
    return pathlib.Path(root)
