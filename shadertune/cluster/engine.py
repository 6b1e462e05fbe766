"""The Dask adapter: a local cluster of GPU workers, a connection to an existing
scheduler, and the GPU workers of one host for such a scheduler.

A worker is one process with one thread and one GPU.  Its GPU is the
environment variable SHADERTUNE_GPU, which the worker specs below set (a worker
started some other way, e.g. by `dask worker`, takes its name when that is an
integer, else GPU 0: see worker.gpu_index).  Dask distributed is imported only
inside these functions: a search without --workers/--cluster needs none of it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from .._optional import optional_import
from ..errors import ShadertuneError

GPU_ENV = "SHADERTUNE_GPU"

# Dask settings in the coordinator of a local cluster and in every worker process
# that this module starts.
DASK_CONFIG = {
    # CUDA's precompile runs NVRTC in a process pool inside the worker, and a daemonic
    # process may not have children.
    "distributed.worker.daemon": False,
    # A task whose worker died 3 times (allowed-failures + 1) fails with KilledWorker; the
    # coordinator records that config as run_failed instead of killing a fourth worker.
    "distributed.scheduler.allowed-failures": 2,
}

INSTALL_HINT = "pip install 'shadertune[cluster]' (Dask distributed)"


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
    from .worker import BackendPlugin
    return {"nthreads": 1, "name": name, "env": {**(env or {}), GPU_ENV: str(gpu)},
            "host": host, "silence_logs": silence,
            "plugins": tuple(BackendPlugin(spec) for spec in backends)}


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
    listening on `host` only; yields a Client.  `env`: more environment for the workers."""
    require_distributed()
    import dask
    from distributed import Client, Nanny, Scheduler, SpecCluster
    dask.config.set(DASK_CONFIG)         # read again whenever a nanny restarts its worker
    gpus = list(gpus)
    # the coordinator reports what matters (exclusions, failed evaluations) in its own
    # words: a local cluster's log lines would break the CLI's one-line errors
    specs = {name: {"cls": Nanny,
                    "options": worker_options(g, name, backends, host, env, logging.CRITICAL)}
             for g, name in zip(gpus, worker_names(gpus))}
    cluster = SpecCluster(workers=specs, silence_logs=logging.CRITICAL,
                          # the scheduler serves HTTP even without a dashboard: on a free
                          # port (its default, 8787, warns on stderr when another Dask has it)
                          scheduler={"cls": Scheduler,
                                     "options": {"host": host, "dashboard_address": f"{host}:0",
                                                 "dashboard": False}})
    try:
        client = Client(cluster)
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
    try:
        yield client
    finally:
        client.close()


def run_workers(address: str, gpus, backends, host: str | None = None,
                name_prefix: str | None = None) -> None:
    """Serve `address` with one worker per GPU of this host, each serving `backends`,
    until they are closed (python -m shadertune.cluster worker)."""
    require_distributed()
    import dask
    from distributed import Nanny
    dask.config.set(DASK_CONFIG)
    prefix = (name_prefix if name_prefix is not None else socket.gethostname()) + "-"
    gpus = list(gpus)

    async def serve():
        nannies = [Nanny(address, **worker_options(g, name, backends, host))
                   for g, name in zip(gpus, worker_names(gpus, prefix))]
        try:
            await asyncio.gather(*nannies)           # start them all
            await asyncio.gather(*(n.finished() for n in nannies))
        finally:
            await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)

    asyncio.run(serve())
