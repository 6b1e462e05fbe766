"""The Dask adapter: a local cluster of GPU workers, a connection to an existing
scheduler, and the GPU workers of one host for such a scheduler.

A worker is one process with one GPU: its GPU thread times, a second task
thread does host work beside it (compiling ahead, ranking: worker.py).  Its GPU is the environment variable
SHADERTUNE_GPU, which the worker specs below set (a worker started some other
way, e.g. by `dask worker`, takes its name when that is an integer, else GPU 0:
see worker.gpu_index).  Its nanny (ReportingNanny) restarts the process when it
dies and says so on the scheduler's event topic WORKER_EXIT_TOPIC, with the
exit status, which the coordinator reports.  The workers of
`python -m shadertune.cluster worker` join a restarted scheduler again
(run_workers).  Dask distributed is imported only inside these functions: a
search without --workers/--cluster needs none of it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time

from ..core.optional import optional_import
from ..errors import ShadertuneError

GPU_ENV = "SHADERTUNE_GPU"
WORKER_EXIT_TOPIC = "shadertune-worker-exit"
# a worker's task threads: its GPU thread's tasks (one unit of the device resource) and
# host tasks (one unit of the host resource) side by side
WORKER_THREADS = 2
# how long the workers of `python -m shadertune.cluster worker` wait for a scheduler
# that went away to come back before they give up
REJOIN_SECONDS = 300.0

# Dask settings in the coordinator of a local cluster and in every worker process
# that this module starts.
DASK_CONFIG = {
    # CUDA's precompile runs NVRTC in a process pool inside the worker, and a daemonic
    # process may not have children.
    "distributed.worker.daemon": False,
    # A task whose worker died 3 times (allowed-failures + 1) fails with KilledWorker; the
    # coordinator records that config as run_failed instead of killing a fourth worker
    # (its pinned evaluations count their workers' deaths themselves, to the same number:
    # evaluator.KILLS_TO_FAIL).
    "distributed.scheduler.allowed-failures": 2,
    # Dask's system monitor asks NVML for every GPU's memory twice a second on the event
    # loop of each worker and of the scheduler; on a machine whose NVML answers in 0.2-0.4 s
    # that blocks the loops most of the time, and every evaluation's dispatch and return
    # waits behind it.  The tuner reads nothing of those diagnostics.
    "distributed.diagnostics.nvml": False,
    # Every Dask server (a local cluster's scheduler and its nannies live in the
    # coordinator's process, one nanny a GPU) keeps timers on its event loop whether or not
    # anything happens; the loop that runs them is the one every evaluation's dispatch and
    # return go through, so their CPU is the coordinator's.  At Dask's defaults they cost
    # the coordinator 35-70 ms of CPU a second with two workers (more with more), what a
    # whole evaluation's dispatch costs, and nothing of the tuner reads them:
    # - the loop-health tick (a warning when the loop stalls for tick.limit, 3 s): 20 ms
    #   apart by default, 500 ms as in Dask's own test settings still sees such a stall;
    "distributed.admin.tick.interval": "500ms",
    # - the system monitor (process and host metrics for dashboards and heartbeats, none
    #   read here); host-wide disk counters walk every block device in /sys each time;
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.disk": False,
    # - a nanny's check of its worker's memory (it restarts a worker past 95% of its
    #   memory limit) and a worker's own (spilling, pausing: no data of ours to spill):
    #   100 ms apart by default, a psutil read of the process each time.
    "distributed.worker.memory.monitor-interval": "500ms",
}

INSTALL_HINT = "pip install 'shadertune[cluster]' (Dask distributed)"

# Dask batches the messages of each stream: once a batch went out, the next waits until
# this long after it (client to scheduler 10 ms, scheduler to worker 5 ms, worker to
# scheduler and scheduler to client 2 ms, fixed in distributed's code).  A stream that
# carries a message every few ms (an evaluation's way out and back, with several in
# flight) then waits up to the interval at each hop: up to 19 ms a round trip, against
# CUDA evaluations of 15-40 ms.  1 ms keeps a batch per burst and drops most of the wait.
STREAM_INTERVAL = 0.001


def quick_stream(stream) -> None:
    """A Dask BatchedSend (or None, not connected yet) sent at most STREAM_INTERVAL apart."""
    if stream is not None and getattr(stream, "interval", 0) > STREAM_INTERVAL:
        stream.interval = STREAM_INTERVAL


# The BLAS thread counts a Dask nanny puts in its worker's environment before starting
# it (distributed.nanny.pre-spawn-environ: 1 by Dask's default, for workers that run many
# numpy tasks at once).  A tuning worker runs one numpy task at a time, the float64
# reference of each problem it evaluates (58 GFLOP at 3072^3: seconds on one core, while
# its GPU waits), so each worker gets its share of the host's cores instead.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def share_host_cores(workers_on_host: int) -> None:
    """Each of this host's `workers_on_host` workers, started after this, runs its BLAS on
    its share of the host's cores (a variable set in this process's environment wins), and
    sizes its compile pools by that share (core.cpus.compile_share)."""
    import dask
    from ..core.cpus import HOST_WORKERS, usable_cpus
    threads = str(max(1, usable_cpus() // max(1, workers_on_host)))
    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    environ.update({v: os.environ.get(v, threads) for v in BLAS_THREAD_VARIABLES})
    environ[HOST_WORKERS] = str(max(1, workers_on_host))   # their compile pools' share too
    dask.config.set({"distributed.nanny.pre-spawn-environ": environ})



def require_distributed():
    """The distributed module, or one clear error saying how to get it."""
    return optional_import("distributed", f"--workers and --cluster need Dask distributed: {INSTALL_HINT}",
                           error=ShadertuneError)


def worker_names(gpus, prefix: str = "") -> list[str]:
    """One name per worker: gpu<index>, with -<rank> where one GPU has several workers."""
    gpus = list(gpus)
    repeated = {g for g in gpus if gpus.count(g) > 1}
    return [f"{prefix}gpu{g}" + (f"-{rank}" if g in repeated else "") for rank, g in enumerate(gpus)]


def worker_options(gpu: int, name: str, backends, host: str | None, env: dict | None = None,
                   silence: int = logging.ERROR) -> dict:
    """A Nanny's options for the worker of `gpu`: one thread, its GPU in its environment
    (with `env`: set again whenever the nanny restarts the worker), and a BackendPlugin
    for each of `backends` ('gl', 'cuda', module:Class), set up before it registers."""
    from ..backends.gl.platform.shader_cache import private_shader_cache_env
    from .worker import BackendPlugin
    # each worker its own Mesa shader cache: workers on one software renderer compile
    # the same shaders at once (shader_cache.py)
    env = {**private_shader_cache_env(f"worker-{name}"), **(env or {}), GPU_ENV: str(gpu)}
    return {"nthreads": WORKER_THREADS, "name": name, "env": env,
            "host": host, "silence_logs": silence,
            "plugins": tuple(BackendPlugin(spec) for spec in backends)}


def exit_reason(exitcode: int | None) -> str:
    """How a worker process ended, in words (a nanny's exit status)."""
    if exitcode is None:
        return "its process ended"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"its process was killed by signal {-exitcode} ({name})"
    return f"its process exited with status {exitcode}"


def reporting_nanny():
    """Nanny that, when its worker process dies unasked (killed, crashed), says so on the
    scheduler's WORKER_EXIT_TOPIC before restarting it: {name, gpu, pid, exitcode}."""
    from distributed import Nanny
    from distributed.core import Status

    class ReportingNanny(Nanny):
        worker_pid = None

        async def instantiate(self):
            status = await super().instantiate()
            self.worker_pid = self.pid        # gone from the nanny once the process ended
            return status

        async def _on_worker_exit(self, exitcode):
            # (Nanny's hook for its process's end; gone from a later Dask, the coordinator
            # still reports the worker as gone, without the exit status)
            # (as Nanny restarts it: unless the nanny itself is closing)
            if self.status not in (Status.closing, Status.closed, Status.closing_gracefully,
                                   Status.failed):
                try:
                    self.log_event(WORKER_EXIT_TOPIC, {
                        "name": str(self.name), "pid": self.pid or self.worker_pid,
                        "exitcode": exitcode,
                        "gpu": (self.env or {}).get(GPU_ENV)})
                except Exception:        # the report is a courtesy: the restart matters
                    pass
            await super()._on_worker_exit(exitcode)
    return ReportingNanny


def parse_gpus(text: str) -> list[int]:
    """'0,1' -> [0, 1]; numpy-style one-line errors."""
    try:
        gpus = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"GPU list must be comma-separated integers, got {text!r}") from None
    if not gpus or min(gpus) < 0:
        raise ValueError(f"GPU list must name at least one GPU index >= 0, got {text!r}")
    return gpus


@contextlib.contextmanager
def local_cluster(gpus, backends, host: str = "127.0.0.1", env: dict | None = None):
    """A scheduler and one worker per entry of `gpus` serving `backends` on this machine,
    listening on `host` only; yields a Client.  `env`: more environment for the workers
    (and the scheduler's process)."""
    require_distributed()
    import dask
    from distributed import Client, SpecCluster
    from .scheduler_process import scheduler_process
    dask.config.set(DASK_CONFIG)         # read again whenever a nanny restarts its worker
    gpus = list(gpus)
    share_host_cores(len(gpus))
    nanny = reporting_nanny()
    # the coordinator reports what matters (exclusions, failed evaluations) in its own
    # words: a local cluster's log lines would break the CLI's one-line errors
    specs = {name: {"cls": nanny,
                    "options": worker_options(g, name, backends, host, env, logging.CRITICAL)}
             for g, name in zip(gpus, worker_names(gpus))}
    # the scheduler in a process of its own (scheduler_process.py: the coordinator's
    # event loop then carries the client's half of each evaluation's messages only)
    cluster = SpecCluster(workers=specs, silence_logs=logging.CRITICAL,
                          scheduler={"cls": scheduler_process(),
                                     "options": {"host": host, "env": env}})
    try:
        client = Client(cluster)
        quick_stream(client.scheduler_comm)
        try:
            client.wait_for_workers(len(gpus), timeout=120)
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


DEFAULT_PORT = 8786                  # a Dask scheduler's
REACH_SECONDS = 5.0


def check_reachable(address: str, timeout: float = REACH_SECONDS) -> None:
    """ShadertuneError at once when the scheduler at a tcp:// or tls:// `address` does not
    take a connection (refused, no such host, no answer within `timeout`): Dask itself
    retries until its time-out, 30 s, and a worker then says only "Nanny failed to
    start".  Other protocols are left to Dask."""
    require_distributed()
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port
    try:
        scheme, location = parse_address(address)
        if scheme not in ("tcp", "tls"):
            return
        host, port = parse_host_port(location, default_port=DEFAULT_PORT)
    except (ValueError, TypeError) as e:
        raise ShadertuneError(f"bad scheduler address {address!r}: {e}") from None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.timeout:
        raise ShadertuneError(f"cannot reach the Dask scheduler at {address}: no answer within "
                              f"{timeout:g} s") from None
    except OSError as e:
        raise ShadertuneError(f"cannot reach the Dask scheduler at {address}: "
                              f"{e.strerror or e}") from None


@contextlib.contextmanager
def connect(address: str, timeout: float = 30.0):
    """A Client of the scheduler at `address` (e.g. tcp://host:8786)."""
    require_distributed()
    from distributed import Client
    check_reachable(address)
    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise ShadertuneError(f"cannot reach the Dask scheduler at {address}: "
                              f"{' '.join(str(e).split()) or type(e).__name__}") from None
    quick_stream(client.scheduler_comm)
    try:
        yield client
    finally:
        client.close()


def run_workers(address: str, gpus, backends, host: str | None = None,
                name_prefix: str | None = None, rejoin: float = REJOIN_SECONDS,
                on_event=None) -> None:
    """Serve `address` with one worker per GPU of this host, each serving `backends`,
    until they are closed (python -m shadertune.cluster worker).

    Workers closed by the scheduler they serve (retired) end this.  Workers that lost
    their scheduler (it was stopped or restarted) wait up to `rejoin` seconds for a
    scheduler at `address` and join it again; none by then is a ShadertuneError.
    on_event(message) hears those rejoins."""
    require_distributed()
    import dask
    dask.config.set(DASK_CONFIG)
    prefix = (name_prefix if name_prefix is not None else socket.gethostname()) + "-"
    gpus = list(gpus)
    share_host_cores(len(gpus))
    nanny = reporting_nanny()
    say = on_event or (lambda message: None)

    async def serve() -> None:
        while True:
            nannies = [nanny(address, **worker_options(g, name, backends, host))
                       for g, name in zip(gpus, worker_names(gpus, prefix))]
            try:
                await asyncio.gather(*nannies)           # start them all
                served = await _scheduler_id(address)
                await asyncio.gather(*(n.finished() for n in nannies))
            finally:
                await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)
            # they all ended: closed by the scheduler they joined (it is still there), or
            # that scheduler went away
            now = await _wait_for_scheduler(address, rejoin)
            if now is None:
                raise ShadertuneError(f"the scheduler at {address} went away and did not come "
                                      f"back within {rejoin:g} s")
            if now == served:
                return
            say(f"the scheduler at {address} was restarted: its workers join it again")

    asyncio.run(serve())


async def _scheduler_id(address: str) -> str | None:
    """The id of the scheduler at `address` (a restarted one has a new one), or None."""
    from distributed.core import rpc
    try:
        async with rpc(address) as r:
            return (await asyncio.wait_for(r.identity(), REACH_SECONDS))["id"]
    except (OSError, asyncio.TimeoutError, KeyError):
        return None


async def _wait_for_scheduler(address: str, seconds: float) -> str | None:
    """The id of the scheduler at `address` once one answers, or None after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        found = await _scheduler_id(address)
        if found is not None or time.monotonic() >= deadline:
            return found
        await asyncio.sleep(0.5)
