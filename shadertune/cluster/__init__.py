"""Tuning on several GPUs and hosts with Dask distributed as the engine.

    python -m shadertune.search --size 1024 --workers 2          # two GPUs of this host
    python -m shadertune.search --size 1024 --cluster tcp://head:8786
    python -m shadertune.cluster worker tcp://head:8786 --gpus 0,1   # on each GPU host

engine       the Dask adapter: local cluster, connection, a host's workers (rejoining a
             restarted scheduler), the nanny that says how a worker process died
scheduler_process  a local cluster's scheduler in a process of its own (ends with its
             coordinator)
worker       a worker's backend (one per process, on its GPU), its evaluations on its GPU
             thread and its host work (compiles, long rankings) on a second thread
coordinator  the workers grouped by device; flow control; faults reported (exclusions,
             deaths, a lost scheduler)
futures      waiting for a Dask future without result(timeout) (a distributed bug)
compiles     a batch compiled on the hosts' cores, chunk by chunk, while the GPUs time
remote       RemoteBackend: a group's backend as tune() sees it (hooks asked of a worker)
evaluator    ClusterEvaluator: the evaluator contract (evaluate, many) over a group
table        a table of problems over the device groups
cli          the search CLI's cluster options and the worker command

Dask distributed (pip install 'shadertune[cluster]') is imported when one of the
names below is first used, never by the rest of shadertune: without it the CLI's
cluster options fail with one line saying how to install it.  See docs/cluster.md.
"""
import importlib

_EXPORTS = {"ClusterEvaluator": "evaluator", "RemoteBackend": "remote",
            "Coordinator": "coordinator", "DeviceGroup": "coordinator",
            "connect": "engine", "local_cluster": "engine", "tune_table": "table"}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
