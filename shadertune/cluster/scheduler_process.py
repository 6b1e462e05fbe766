"""A local cluster's Dask scheduler in a process of its own.

In the coordinator's process the scheduler shares one event loop and one GIL with the
client, the nannies and the search's threads, and every evaluation's messages (submit,
dispatch, finished, gather, release) are handled at both ends of the client-scheduler
connection by that one process: about 40% of the coordinator's CPU an evaluation
(notes/cluster.md).  In a process of its own it gets a core of its own.

The rules this process keeps, which the in-process scheduler kept by living there:
- it has the coordinator's Dask settings (DASK_CONFIG: allowed failures, which the
  evaluator's KILLS_TO_FAIL mirrors; the slower timers): they travel in
  DASK_INTERNAL_INHERIT_CONFIG, which dask.config reads at import;
- it ends with its coordinator, however that ends (SIGKILL included): it watches its
  stdin, a pipe whose only write end the coordinator holds, and closes at its end; and a
  terminal's Ctrl-C, sent to the whole process group, is the coordinator's to answer;
- its log goes to an anonymous temporary file (no pipe that nobody reads fills up and
  blocks it), whose last line says why it failed to start;
- it says its address on stdout, one JSON line, once it listens;
- its streams to the workers and the client batch for 1 ms, not Dask's 5 and 2
  (engine.STREAM_INTERVAL).

    python -m shadertune.cluster.scheduler_process HOST     (started by local_cluster)
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import threading
import traceback

START_SECONDS = 60.0        # a cold start imports distributed (1-3 s; more on a loaded host)
CLOSE_SECONDS = 10.0        # after its stdin closes, before it is killed
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scheduler_process():
    """The ProcessInterface that SpecCluster starts as its scheduler (Dask imported here)."""
    import dask
    from distributed.deploy.spec import ProcessInterface

    class SchedulerProcess(ProcessInterface):
        def __init__(self, host: str = "127.0.0.1", env: dict | None = None):
            self.host = host
            self.env = dict(env or {})
            self.process = None
            self.log = None
            super().__init__()

        async def start(self):
            self.log = tempfile.TemporaryFile()
            env = {**os.environ, **self.env,
                   "DASK_INTERNAL_INHERIT_CONFIG": dask.config.serialize(dask.config.config)}
            # shadertune importable there as here (an uninstalled checkout included)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", __name__, self.host,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=self.log, env=env)
            try:
                line = await asyncio.wait_for(self.process.stdout.readline(), START_SECONDS)
                self.address = json.loads(line)["address"]
            except (asyncio.TimeoutError, ValueError, KeyError) as e:
                timed_out = isinstance(e, asyncio.TimeoutError)
                if not timed_out:                   # its output ended: it is exiting
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self.process.wait(), CLOSE_SECONDS)
                why = (f"it exited with status {self.process.returncode}"
                       if self.process.returncode is not None
                       else f"no address within {START_SECONDS:g} s" if timed_out
                       else f"it said {line[:200]!r}")
                tail = self._log_tail()
                await self._stop()
                raise RuntimeError(f"the Dask scheduler's process failed to start ({why}): "
                                   f"{tail}") from None
            await super().start()

        def _log_tail(self) -> str:
            """Its log's last line: the error it ended with (_serve writes it last)."""
            self.log.seek(0)
            lines = self.log.read().decode(errors="replace").strip().splitlines()
            return lines[-1].strip() if lines else "(nothing in its log)"

        async def _stop(self):
            if self.process is not None and self.process.returncode is None:
                self.process.stdin.close()              # it closes itself at its stdin's end
                try:
                    await asyncio.wait_for(self.process.wait(), CLOSE_SECONDS)
                except asyncio.TimeoutError:
                    self.process.kill()
                    await self.process.wait()
            if self.log is not None:
                self.log.close()
                self.log = None

        async def close(self):
            await self._stop()
            await super().close()

    return SchedulerProcess


def _quick_streams():
    """A scheduler plugin: the streams to each worker and client sent at most
    engine.STREAM_INTERVAL apart (Dask's 5 ms and 2 ms batching waits, fixed in its code)."""
    from distributed.diagnostics.plugin import SchedulerPlugin
    from .engine import quick_stream

    class QuickStreams(SchedulerPlugin):
        name = "shadertune-quick-streams"

        def add_worker(self, scheduler=None, worker=None, **kwargs):
            quick_stream(scheduler.stream_comms.get(worker))

        def add_client(self, scheduler=None, client=None, **kwargs):
            # its stream is made right after this hook, before the scheduler next awaits
            asyncio.get_running_loop().call_soon(
                lambda: quick_stream(scheduler.client_comms.get(client)))
    return QuickStreams()


def _serve(host: str) -> None:
    import logging
    from distributed import Scheduler

    async def run() -> None:
        ended = asyncio.Event()
        loop = asyncio.get_running_loop()

        def watch_stdin() -> None:               # EOF: the coordinator closed it, or died
            try:
                while sys.stdin.buffer.read(65536):
                    pass
            finally:
                with contextlib.suppress(RuntimeError):      # the loop already closed
                    loop.call_soon_threadsafe(ended.set)
        threading.Thread(target=watch_stdin, daemon=True, name="coordinator-watch").start()

        async with Scheduler(host=host, port=0, dashboard=False,
                             dashboard_address=f"{host}:0") as scheduler:
            scheduler.add_plugin(_quick_streams())
            sys.stdout.write(json.dumps({"address": scheduler.address}) + "\n")
            sys.stdout.flush()
            # nobody reads the pipe after that line: anything printed later goes nowhere
            # rather than filling it and blocking this process
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            # the cluster's close terminates it over its comm; the coordinator's end, here
            done = asyncio.ensure_future(scheduler.finished())
            stop = asyncio.ensure_future(ended.wait())
            await asyncio.wait([done, stop], return_when=asyncio.FIRST_COMPLETED)

    # it ends with os._exit: the stdin watch is a thread blocked in a read, which the
    # interpreter's own teardown cannot stop (a fatal error at shutdown), and that
    # teardown (distributed's) would take 0.2-1 s that the coordinator's close waits for
    try:
        asyncio.run(run())
        status = 0
    except BaseException as e:
        traceback.print_exc()
        print(f"{type(e).__name__}: {e}", file=sys.stderr)     # the reason, last
        status = 1
    logging.shutdown()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python -m {__spec__.name if __spec__ else 'scheduler_process'} HOST")
    import logging
    from shadertune.core.children import leave_ctrl_c_to_the_parent
    logging.getLogger("distributed").setLevel(logging.ERROR)
    # the coordinator answers Ctrl-C (it stops its search, records what it has and closes
    # the cluster, this process too)
    leave_ctrl_c_to_the_parent()
    _serve(sys.argv[1])
