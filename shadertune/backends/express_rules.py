"""The rules every backend's express lane (matmul's steady state of a call key) keeps alike:
how many keys a door keeps, how often `auto`'s selection is asked again, and the check a
learned call passes before it is repeated.  The lanes themselves (what a key holds, how a
call launches) are their backend's: backends/cuda/express.py, backends/gl/express.py."""
from __future__ import annotations

import os
import time

KEEP = 256         # plans kept per door (the oldest dropped past it)
RECHECK_S = 0.1    # auto's selection is asked again at most this long after the last time


def default_store_env() -> tuple:
    """What the default store's path is read from (db/location.py): compared, not
    resolved, each auto call on the default store."""
    data = getattr(os.environ, "_data", None)     # the mapping os.environ keeps (no decoding)
    if type(data) is dict:
        g = data.get
        if os.name == "nt":
            return g("SHADERTUNE_DB"), g("XDG_CACHE_HOME"), g("HOME")
        return g(b"SHADERTUNE_DB"), g(b"XDG_CACHE_HOME"), g(b"HOME")
    g = os.environ.get
    return g("SHADERTUNE_DB"), g("XDG_CACHE_HOME"), g("HOME")


def selected_now(plan, changes, db) -> None:
    """Stamp `plan` (a lane's learned call: its auto, generation, env and due) as selected
    by the regular call that just ran."""
    plan.generation, plan.env = changes.generation, default_store_env() if db is None else None
    plan.due = time.monotonic() + RECHECK_S


def still_valid(plan, door, changes, db) -> bool:
    """What a call key does not prove about a learned call's kernel and config: the
    kernel not released, and on the clock (RECHECK_S, at once after a commit of this
    process to any store, or a change of the default store's variables) the door's
    kernel cache still holding it and `auto` still naming its config."""
    if getattr(plan.kernel, "released", False):
        return False
    if (plan.due > time.monotonic() and plan.generation == changes.generation
            and (db is not None or not plan.auto or plan.env == default_store_env())):
        return True
    if not door.kernels.touch(plan.kkey, plan.kernel):
        return False
    gen, env = changes.generation, default_store_env() if db is None else None   # before the selection:
    if plan.auto and door.auto_config(plan.problem, db) != plan.config:          # a commit meanwhile is
        return False                                                             # seen next call
    plan.generation, plan.env, plan.due = gen, env, time.monotonic() + RECHECK_S
    return True
