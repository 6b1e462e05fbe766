"""The rules every backend's express lane (matmul's steady state of a call key) keeps alike:
how many keys a door keeps, how often `auto`'s selection is asked again, and the check a
learned call passes before it is repeated.  The lanes themselves (what a key holds, how a
call launches) are their backend's: backends/cuda/express.py, backends/gl/express.py."""
from __future__ import annotations

import os
import threading
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


class Plan:
    """A learned call (a lane's subclass names its fields in __slots__)."""
    __slots__ = ()

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class Lane:
    """What every lane keeps alike: its door, the plans it learned by call key (at most
    KEEP, the oldest dropped), and the validity check of a plan before it is repeated."""

    def __init__(self, door):
        self.door = door
        self.backend = door.backend
        self._changes = door.changes    # db/changes.py (a layer above: the door hands it over)
        self._plans: dict = {}
        self._lock = threading.Lock()

    def _keep(self, key, plan, db) -> bool:
        """Keep `plan` under `key`, stamped as selected by the regular call that just ran;
        False (nothing kept) where the key cannot be hashed (a dict config with an
        unhashable value)."""
        selected_now(plan, self._changes, db)
        with self._lock:
            try:
                hash(key)
            except TypeError:
                return False
            if len(self._plans) >= KEEP:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        return True

    def forget(self) -> None:
        with self._lock:
            self._plans.clear()

    def _valid(self, plan, db) -> bool:
        return still_valid(plan, self.door, self._changes, db)


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
