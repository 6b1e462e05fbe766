"""Which CUDA calls take the express lane (a device-session probe, not a benchmark).

    python3 tools/probe_cuda_lane.py

Per shape and config form (a name, the same knobs as a full dict, a Config, a partial
dict): microseconds a call in a loop of calls (one sync at the end) and how many of the
loop's calls went the regular path (check_call ran)."""
import time

import cupy as cp
import torch

import shadertune
from shadertune.backends.cuda import CUDABackend
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.front import matmul as api

regular = 0
_check = api.check_call


def counted(*a, **k):
    global regular
    regular += 1
    return _check(*a, **k)


api.check_call = counted


def loop_us(fn, calls=400):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    global regular
    be = CUDABackend()
    for M, N, K in ((64, 64, 64), (900, 700, 1300), (512, 512, 512)):
        p = Problem(M, N, K)
        default = be.default_config(p)
        forms = {"'default'": "default", "full dict": default.to_dict(), "Config": Config(default.to_dict()),
                 "partial dict": {"BM": default["BM"]}}
        A = torch.rand(M, K, device="cuda")
        B = torch.rand(K, N, device="cuda")
        for backend_arg in ("cuda", be):
            for label, cfg in forms.items():
                regular = 0
                us = loop_us(lambda: shadertune.matmul(A, B, backend=backend_arg, config=cfg))
                print(f"{M}x{N}x{K} backend={'name' if backend_arg == 'cuda' else 'instance'} {label:13s}: "
                      f"{us:7.1f} us/call, regular path {regular} of 401", flush=True)


def after_tune():
    """The same loops after a 5 s tune of the shape in this process (bench-shape-classes'
    order), again 3 s later, with the threads alive."""
    global regular
    import os
    import tempfile
    import threading
    from shadertune.db.store import Store
    from shadertune.search import Budget, tune
    be = CUDABackend()
    p = Problem(900, 700, 1300)
    A = torch.rand(900, 1300, device="cuda")
    B = torch.rand(1300, 700, device="cuda")
    store = Store(os.path.join(tempfile.mkdtemp(), "t.sqlite"))
    tune(be, p, budget=Budget(seconds=5, spend_all=True), store=store, seed=0)
    print("threads after tune:", [t.name for t in threading.enumerate()], flush=True)
    knobs = be.default_config(p).to_dict()
    for when in ("at once", "3 s later"):
        if when != "at once":
            time.sleep(3)
        for label, cfg in (("'default'", "default"), ("full dict", knobs)):
            regular = 0
            us = loop_us(lambda: shadertune.matmul(A, B, backend=be, config=cfg))
            print(f"after tune, {when}: 900x700x1300 {label}: {us:7.1f} us/call, regular path {regular} of 401",
                  flush=True)


if __name__ == "__main__":
    main()
    after_tune()
