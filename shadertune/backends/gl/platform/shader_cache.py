"""A shader cache of its own for a process that compiles beside others of the same user.

Mesa keeps compiled shaders in one on-disk cache per user (~/.cache/mesa_shader_cache).
llvmpipe 22.3.6 crashed in its compiler (SIGSEGV inside ctx.program / compute_shader)
when two processes compiled the same shaders at once through that cache: 2 of 4 runs of
four test files side by side, 0 of 5 with the cache off (notes/gl.md).  Turning it off
costs every new process its compiles (the test suite: 4.5 -> 6.8 minutes); a cache per
long-lived process role (a test process, a cluster worker) keeps the reuse across runs
without two processes writing one cache at once.  NVIDIA's driver ignores these variables.
"""
from __future__ import annotations

import os
import re

MESA_DIR = "MESA_SHADER_CACHE_DIR"
MESA_OFF = "MESA_SHADER_CACHE_DISABLE"


def private_shader_cache_env(role: str) -> dict[str, str]:
    """{MESA_SHADER_CACHE_DIR: a directory for `role`} for a process's environment (set
    before its first GL display opens); {} where the user chose a cache setting."""
    if MESA_DIR in os.environ or MESA_OFF in os.environ:
        return {}
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(root):              # no home ("~" unexpanded): Mesa's own default
        return {}
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", role) or "default"
    path = os.path.join(root, "shadertune", "mesa", safe)
    try:
        os.makedirs(path, exist_ok=True)     # Mesa makes the last level only
    except OSError:                          # no home, a read-only one: Mesa's own default
        return {}
    return {MESA_DIR: path}
