"""Does a CUDA call cost more right after a tune? (a device probe, not a benchmark)

    python3 tools/probe_cuda_after_tune.py [--shapes 48x6144x3072,1500x1500x1500:float64] [--seconds 5]

bench-shape-classes measured the same config slower as a single call after the row's tune
than before it (48x6144x3072: 0.0796 ms untuned, 0.0954 ms tuned, the same knobs).  Per
shape: single calls (events around each call, a sync after each; medians of 50) of
config="default" and of the same knobs as a dict, in turn, before the tune, right after it,
after gc.collect() + gc.freeze(), and after 5 s idle; with the process's threads and
children at each step."""
import argparse
import gc
import json
import os
import statistics
import threading
import time

import torch

import shadertune
from shadertune.backends.cuda import CUDABackend
from shadertune.backends.cuda.timing import call_times
from shadertune.search import Budget, tune
from shadertune.db import Store
from shadertune.core.problem import Problem


def parse(text):
    dims, _, dtype = text.partition(":")
    n = [int(x) for x in dims.split("x")]
    return Problem(*n[-3:], dtype=dtype or "float32", batch=n[0] if len(n) == 4 else 1)


def children():
    try:
        return len(os.listdir(f"/proc/{os.getpid()}/task")), sum(
            1 for p in os.listdir("/proc") if p.isdigit() and
            open(f"/proc/{p}/stat").read().split()[3] == str(os.getpid()))
    except OSError:
        return None


def medians(fns, rounds=3, repeats=50):
    got = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            for _ in range(5):
                fn()
            got[k] += call_times(fn, repeats, warmup=1)
    return {k: round(statistics.median(v), 4) for k, v in got.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="48x6144x3072,1500x1500x1500:float64")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--db", default="/tmp/probe_after_tune.sqlite")
    args = ap.parse_args()
    be = CUDABackend()
    store = Store(args.db)
    for text in args.shapes.split(","):
        p = parse(text)
        dt = getattr(torch, p.dtype)
        shape = lambda r, c: (p.batch, r, c) if p.batch > 1 else (r, c)   # noqa: E731
        A = torch.rand(*shape(p.M, p.K), device="cuda", dtype=dt)
        B = torch.rand(*shape(p.K, p.N), device="cuda", dtype=dt)
        knobs = be.default_config(p).to_dict()
        fns = {"default": lambda: shadertune.matmul(A, B, backend=be, config="default"),
               "knobs": lambda: shadertune.matmul(A, B, backend=be, config=knobs),
               "torch": lambda: torch.matmul(A, B)}
        row = {"shape": text, "before": medians(fns), "threads, children before": children()}
        t0 = time.monotonic()
        tune(be, p, budget=Budget(seconds=args.seconds, spend_all=True), store=store)
        row["tune_s"] = round(time.monotonic() - t0, 1)
        row["threads, children after"] = children()
        row["thread names"] = sorted(t.name for t in threading.enumerate())
        row["after"] = medians(fns)
        gc.collect()
        gc.freeze()
        row["after gc.freeze"] = medians(fns)
        time.sleep(5)
        row["threads, children 5 s later"] = children()
        row["5 s later"] = medians(fns)
        gc.unfreeze()
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
