"""SHADERTUNE_PRINT_TUNING=1: which config each matmul runs, and why.

Like Triton's TRITON_PRINT_AUTOTUNING: with the variable set (to anything but 0,
false, no, off or nothing), the first matmul of each call key says what config
resolution chose, on one line:

    shadertune: matmul 64x48x32 float32 on gl (llvmpipe ... | 4.5 ...): config
    family=fragment np=32 ...: auto (exact): the fastest verified result stored ...

A call key is (backend, device, problem, config request, the config chosen): a
loop of calls says it once, and again only when the choice changes (a store that
was tuned meanwhile).  The variable is read once per process, at the first
resolution; resolutions happen once per problem per call and never on the CUDA
express lane's repeated calls, so the steady state pays nothing.

Where it goes: to the "shadertune.print_tuning" logger at INFO where logging is
set up to show it (a handler and the level), else to stderr, so the variable alone
is enough.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Any

from ..selection import chain as select
from ..backends import config_text
from ..core.problem import Problem

ENV = "SHADERTUNE_PRINT_TUNING"
log = logging.getLogger("shadertune.print_tuning")    # its documented name

_on: bool | None = None                 # the variable, read once
_said: set[tuple[Any, ...]] = set()
_lock = threading.Lock()


def enabled() -> bool:
    global _on
    if _on is None:
        _on = os.environ.get(ENV, "").strip().lower() not in ("", "0", "false", "no", "off")
    return _on


def reset() -> None:
    """Read the variable again at the next resolution, and say every key again."""
    global _on
    with _lock:
        _on = None
        _said.clear()


def announce(backend: Any, problem: Problem, request: Any, config: Any, db: Any = None) -> None:
    """Say what `request` (a configs.ConfigRequest) resolved to for `problem`, once per key."""
    if not (_on if _on is not None else enabled()):
        return
    key = (backend.name, backend.device().key, problem, request, config)
    with _lock:
        if key in _said:
            return
        if len(_said) > 65536:
            _said.clear()
        _said.add(key)
    line = (f"shadertune: matmul {problem.label} on {backend.name} ({backend.device().key}): "
            f"config {config_text(backend.name, config)}: {why(backend, problem, request, db)}")
    if log.isEnabledFor(logging.INFO) and log.hasHandlers():
        log.info("%s", line)
    else:
        print(line, file=sys.stderr, flush=True)


def why(backend: Any, problem: Problem, request: Any, db: Any = None) -> str:
    """The reason a resolution gives for its config, in words."""
    kind = request.kind
    if kind == "auto":
        s = select.checked(backend, select.select(backend, problem, db))
        text = f"auto ({s.how}): {s.reason}"
        if s.pretuned:
            text += f" [pre-tuned table, measured on {s.measured_on}]"
        elif s.measured_on:
            text += f" [measured on {s.measured_on}]"
        if s.rechecked:
            text += f" [verified: {s.rechecked}]"
        if request.tune is not None:
            text = "tuned on first use, then " + text
        return text
    if kind == "default":
        return "config='default': the backend's untuned default"
    if kind == "preset":
        what = backend.presets().get(request.name, "")
        return (f"preset {request.name!r}" + (f" ({what})" if what else "")
                + "; the knobs it leaves out from the default config")
    return f"the knobs given ({request.knobs.text()}); the others from the default config"


__all__ = ["ENV", "announce", "enabled", "reset", "why"]
