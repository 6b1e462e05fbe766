"""Waiting for a Dask future without Future.result(timeout=...).

A blocking client's result(timeout) runs distributed.utils.sync with a time-out:
when the time-out and the answer meet, the waiting coroutine can end cancelled,
a BaseException that sync() does not catch, and it then fails with
"UnboundLocalError: cannot access local variable 'result'" (seen with
distributed 2025.11 on Python 3.12, a CUDA search on two H100s, where the
coordinator polled a long precompile call once a second).  So the coordinator
never puts a time-out on result(): it waits for the future's done-callback on
a threading.Event, and asks for the result once the future is done.

Fetching a done future's value can block for good too: a finished task's value
lives on the worker that ran it, and when that worker dies before the value is
fetched, Dask computes the task again, which it never does for a task pinned to
the dead worker (allow_other_workers=False).  So outcome() can fetch on a helper
thread, and the caller's give_up() (asked every `poll` seconds) cancels the
future, which ends the fetch.
"""
from __future__ import annotations

import threading
from typing import Callable

FETCH_POLL_SECONDS = 0.5      # how often a fetch looks whether the worker holding its value died


def wait_done(fut, poll: float, on_poll: Callable[[], None]) -> None:
    """Return once `fut` is done (finished, erred or cancelled); on_poll() every
    `poll` seconds meanwhile (it may raise to give up waiting)."""
    done = threading.Event()
    fut.add_done_callback(lambda _f: done.set())
    while not done.wait(poll):
        on_poll()


def outcome(fut, poll: float | None = None,
            give_up: Callable[[], bool] | None = None) -> tuple[str, object]:
    """('finished', value), ('error', exception) or ('cancelled', reason) of a
    done future, without raising.  With give_up: the value is fetched on a helper
    thread, and once give_up() says so (asked every `poll` seconds) the future is
    cancelled and ('cancelled', reason) returned."""
    if give_up is None:
        return _fetch(fut)
    got: list = []
    fetching = threading.Thread(target=lambda: got.append(_fetch(fut)), daemon=True,
                                name="shadertune-fetch")
    fetching.start()
    fetching.join(poll)
    while fetching.is_alive():
        if give_up():
            fut.cancel()                 # result() raises CancelledError: the fetch ends
            fetching.join(poll)          # (a daemon: one that still hangs is left behind)
            return "cancelled", "its value was lost with the worker that held it"
        fetching.join(poll)
    return got[0]


def _fetch(fut) -> tuple[str, object]:
    status = fut.status
    if status == "finished":
        try:
            return "finished", fut.result()
        except BaseException as e:   # noqa: B036 (lost between done and fetch: see the caller)
            return "cancelled", _reason(e)
    if status == "error":
        try:
            return "error", fut.exception()
        except BaseException as e:   # noqa: B036
            return "cancelled", _reason(e)
    return "cancelled", _reason(None)


def _reason(e) -> str:
    if e is None:
        return "cancelled"
    return " ".join(str(e).split()) or type(e).__name__
