"""Children of the tests: the one way a test starts a Python process.

- The child keeps the caller's environment, and the checkout (and tests/, for the
  fake backends) is ADDED in front of the caller's PYTHONPATH, never put in its
  place: an install that lives on PYTHONPATH (the GPU machine's) keeps its
  packages in the child.
- In a child run from code (run_python / popen_python with code=...), a thread that
  raises ends the child at once with exit status THREAD_FAILED and the thread's
  traceback on stderr, so the test fails naming it instead of reading a wrong count
  ("0 contexts made") from a child whose threads died quietly.
- In the tests' own process, a thread that raises fails its test too: pyproject's
  pytest filterwarnings turns pytest's PytestUnhandledThreadExceptionWarning into an
  error.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
THREAD_FAILED = 70

# Prepended to a child's code: a thread's uncaught exception ends the process.
THREAD_GUARD = textwrap.dedent(f"""\
    import os as _os, sys as _sys, threading as _threading, traceback as _traceback
    def _thread_failed(args):
        _sys.stderr.write("a thread raised: " + "".join(_traceback.format_exception(
            args.exc_type, args.exc_value, args.exc_traceback)))
        _sys.stderr.flush()
        _os._exit({THREAD_FAILED})
    _threading.excepthook = _thread_failed
    """)


def child_env(*paths, checkout: bool = True, **extra) -> dict:
    """The caller's environment with `paths`, ROOT and tests/ added in front of its
    PYTHONPATH; `extra` variables set (a value None removes one).  checkout False: the
    checkout is not added, and taken out of the caller's entries (a test of an install)."""
    env = dict(os.environ)
    mine = {os.path.realpath(ROOT), os.path.realpath(TESTS)}
    old = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
           if p and (checkout or os.path.realpath(p) not in mine)]
    front = [str(p) for p in (*paths, *((ROOT, TESTS) if checkout else ()))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(front + old))
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def _argv(code: str | None, args) -> list[str]:
    if code is None:
        return [sys.executable, *map(str, args)]
    return [sys.executable, "-c", THREAD_GUARD + textwrap.dedent(code), *map(str, args)]


def run_python(code: str | None = None, *args, env: dict | None = None, paths=(),
               checkout: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run `code` (or, with code None, the arguments: ['-m', 'shadertune.search', ...] or
    a script and its arguments) in a child Python; text output captured.  `env`:
    variables to set on top of child_env; `paths`, `checkout`: as child_env's."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(_argv(code, args), env=child_env(*paths, checkout=checkout, **(env or {})),
                          timeout=timeout, **kw)


def popen_python(code: str | None = None, *args, env: dict | None = None, paths=(),
                 **kw) -> subprocess.Popen:
    """As run_python, started and not waited for."""
    kw.setdefault("text", True)
    return subprocess.Popen(_argv(code, args), env=child_env(*paths, **(env or {})), **kw)


def wait_ended(pids, seconds: float, what: str) -> None:
    """Return once every process of `pids` has ended (gone, or a zombie nobody reaped:
    an orphan's new parent may not reap); fail the test after `seconds`."""
    import time
    import psutil

    def ended(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
    deadline = time.monotonic() + seconds
    while not all(ended(p) for p in pids):
        assert time.monotonic() < deadline, f"{what} outlived their parent"
        time.sleep(0.05)


__all__ = ["ROOT", "TESTS", "THREAD_FAILED", "child_env", "popen_python", "run_python", "wait_ended"]
