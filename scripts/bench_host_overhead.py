#!/usr/bin/env python3
"""Host cost per call of shadertune.matmul(dA, dB, backend="cuda") on a cached
problem, step by step, with no GPU needed (issue 16 item 4, issue 38 items 1-2):

    python scripts/bench-host-overhead [--n 256] [--calls 200] [--rounds 60] [--stand-in light|fake]
                                       [--profile [STEP]] [--json FILE]

CuPy is a stand-in: `light` (tests/light_cupy.py, the default: arrays with
plain attributes, allocation and launch that cost nothing) shows shadertune's
own Python; `fake` (tests/fake_cupy.py: host memory, kernels computed) adds the
stand-in's own costs, as before.  The kernel is the driver's CUDAKernel of the
problem's default config over stub functions (its launches through
launchKernel do nothing), so every line of our launch path runs.  What CuPy,
PyTorch and the driver add in C is measured on the GPU (scripts/bench-cuda-call).

Steps (microseconds per call, the best of `--rounds` rounds):
  lane_default       matmul(dA, dB, config="default"): the express lane (the steady path)
  lane_out           ... out= a preallocated array
  lane_ab            ... out=C, alpha=2, beta=0.5
  lane_knobs         ... config= the default config as a dict of knobs
  lane_auto_path     ... config="auto", db= a store path
  lane_auto_store    ... config="auto", db= a Store object
  lane_auto_default  ... config="auto", the default store (SHADERTUNE_DB)
  lane_dlpack        ... on CUDA DLPack objects (each producer's __dlpack__ every call, its
                     capsule read: backends/cuda/dlpack_view.py; light: the producer hands
                     a capsule made once, so its own cost is not in the number)
  lane_graphs        lane_default with SHADERTUNE_CUDA_LAUNCH=graphs (light: a driver stand-in
                     whose graph calls cost nothing; the same result each call: no update)
  regular_default    the same call on the regular path (the lane off): the first call of a key
  check_call         inputs.check_call(dA, dB)            (regular path pieces)
  prepare            backends.cuda.call.prepare(checked)
  enqueue            kernel.enqueue(...) of the default config (per-thread parameter arrays)
  steady_launch      kernel.launcher(...)(...): the lane's launches (parameter arrays of its own)
--profile [STEP]: cProfile of calls x rounds calls of STEP (lane_auto_path), top 25 by own time.
"""
import argparse
import cProfile
import io
import json
import pathlib
import pstats
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def per_call_us(fn, calls: int, rounds: int = 7) -> float:
    """The best of `rounds` rounds of `calls` calls (a loaded machine's preemptions
    fall in some rounds, not all: many short rounds find a quiet one)."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def stand_in(name: str):
    sys.path.insert(0, str(ROOT / "tests"))
    mod = __import__("light_cupy" if name == "light" else "fake_cupy")
    sys.modules["cupy"] = mod
    from shadertune.backends.cuda import api as cuda_api
    cuda_api._visible[0] = True
    return mod


def stub_functions(cp, config):
    """(main, reduce, pack) stand-ins of a config's compiled functions."""
    if hasattr(cp, "Function"):         # light_cupy
        f = cp.Function
    else:
        class f:                         # fake_cupy: a RawKernel call and a loaded handle
            kernel = type("Function", (), {"ptr": 1})()

            def __call__(self, grid, block, args, shared_mem=0, stream=None):
                pass
        cp.cuda.driver.launchKernel = lambda *a: None
    return (f(), f() if config["KG"] > 1 and not config["KR"] else None, f() if config.get("PS", 0) else None)


def stub_kernel(cp, problem, config):
    from shadertune.backends.cuda.driver import CUDAKernel
    main, reduce, pack = stub_functions(cp, config)
    return CUDAKernel.from_functions(cp, problem, config, main, reduce=reduce, pack=pack)


class DLPackArray:
    """A CUDA DLPack object that is not a CuPy array (a JAX array's interface) over
    a stand-in's array: the light stand-in's arrays have no memory, so the producer
    hands one capsule describing it (tests/dlpack_capsules.py) each call, read and
    never taken over (light_cupy.from_dlpack); the fake stand-in's array exports a
    fresh capsule each call, as CuPy's does."""

    def __init__(self, a, light: bool):
        self._a, self.shape, self.dtype = a, a.shape, a.dtype
        self._capsule = None
        if light:
            import dlpack_capsules
            self._capsule = dlpack_capsules.capsule(a.data.ptr, a.shape, a.dtype)

    def __dlpack__(self, stream=None, **kw):
        return self._capsule if self._capsule is not None else self._a.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return 2, 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--calls", type=int, default=200, help="calls per round (default 200)")
    ap.add_argument("--rounds", type=int, default=60, help="rounds; the best counts (default 60)")
    ap.add_argument("--stand-in", choices=("light", "fake"), default="light")
    ap.add_argument("--profile", nargs="?", const="lane_auto_path", default=None, metavar="STEP",
                    help="cProfile STEP's calls (default lane_auto_path)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    cp = stand_in(args.stand_in)

    import os
    import numpy as np
    import shadertune
    from shadertune.front import matmul as api
    from shadertune.selection import chain as select
    from shadertune.backends.base import DeviceInfo
    from shadertune.backends.cuda import call
    from shadertune.db import Store
    from shadertune.call.inputs import check_call
    from shadertune.core.problem import Problem

    be = api.backend("cuda")
    be.build = lambda p, c: stub_kernel(cp, p, c)
    be._device_info = DeviceInfo(backend="cuda", vendor="NVIDIA", renderer="stand-in", driver="stand-in")
    n = args.n
    if args.stand_in == "light":
        dA, dB, out, C = (cp.ndarray((n, n), np.float32) for _ in range(4))
    else:
        rng = np.random.default_rng(0)
        dA, dB = (cp.asarray(rng.uniform(-1, 1, (n, n)).astype(np.float32)) for _ in range(2))
        out, C = cp.empty((n, n), np.float32), cp.empty((n, n), np.float32)
    p = Problem(n, n, n)
    cfg = be.default_config(p)
    knobs = cfg.to_dict()
    tmp = tempfile.TemporaryDirectory()
    db = str(pathlib.Path(tmp.name) / "t.sqlite")
    store = Store(db)
    os.environ["SHADERTUNE_DB"] = db
    lA, lB = DLPackArray(dA, args.stand_in == "light"), DLPackArray(dB, args.stand_in == "light")

    mm = shadertune.matmul
    steps = {
        "lane_default": lambda: mm(dA, dB, backend="cuda", config="default"),
        "lane_out": lambda: mm(dA, dB, out, backend="cuda", config="default"),
        "lane_ab": lambda: mm(dA, dB, C, backend="cuda", config="default", alpha=2.0, beta=0.5),
        "lane_knobs": lambda: mm(dA, dB, backend="cuda", config=knobs),
        "lane_auto_path": lambda: mm(dA, dB, backend="cuda", config="auto", db=db),
        "lane_auto_store": lambda: mm(dA, dB, backend="cuda", config="auto", db=store),
        "lane_auto_default": lambda: mm(dA, dB, backend="cuda", config="auto"),
        "lane_dlpack": lambda: mm(lA, lB, backend="cuda", config="default"),
    }
    d = api.door("cuda")
    lane = d.express
    if args.stand_in == "light":
        from shadertune.backends.cuda import graphs

        def lane_graphs(_state={}):
            if not _state:              # the keys learned again under the graph means (set back below)
                graphs._DRIVER[:] = [cp.Driver()]
                os.environ["SHADERTUNE_CUDA_LAUNCH"] = "graphs"
                lane.forget()
                _state["on"] = True
            return mm(dA, dB, backend="cuda", config="default")
        steps["lane_graphs"] = lane_graphs

    def regular():
        d.express = None
        try:
            return mm(dA, dB, backend="cuda", config="default")
        finally:
            d.express = lane
    steps["regular_default"] = regular
    steps["check_call"] = lambda: check_call(dA, dB, dtypes=be.dtypes)
    checked = check_call(dA, dB, dtypes=be.dtypes)
    steps["prepare"] = lambda: call.prepare(checked)
    k = api.kernel(be, p, cfg)
    pa, pb, po = dA.data.ptr, dB.data.ptr, out.data.ptr
    st = cp.cuda.get_current_stream()
    steps["enqueue"] = lambda: k.enqueue(pa, pb, po, 0, 0, 1, 1.0, 0.0)
    go = k.launcher(0, 0, 1)
    steps["steady_launch"] = lambda: go(pa, pb, po, 1.0, 0.0, st)
    print(f"stand-in {args.stand_in}; default config of {p.key}: {cfg}", flush=True)
    res = {"stand_in": args.stand_in, "n": n, "config": knobs, "us_per_call": {}}
    for name, fn in steps.items():
        if name == "regular_default":    # after lane_graphs: the kernels' means again
            os.environ.pop("SHADERTUNE_CUDA_LAUNCH", None)
            lane.forget()
        us = per_call_us(fn, args.calls, args.rounds)
        res["us_per_call"][name] = round(us, 3)
        print(f"{name:18s} {us:8.2f} us", flush=True)
    lanes = {k: v for k, v in res["us_per_call"].items() if k.startswith("lane_")}
    misses = [k for k in lanes if res["us_per_call"][k] > 0.8 * res["us_per_call"]["regular_default"]]
    if misses:
        print(f"(slower than 0.8x the regular path, so probably not on the lane: {', '.join(misses)})")
    if args.profile:
        pr = cProfile.Profile()
        f = steps[args.profile]
        pr.enable()
        for _ in range(args.calls * args.rounds):
            f()
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
        print(s.getvalue())
        res["profile"] = s.getvalue()
    select.forget()
    store.close()
    if args.json:
        from shadertune.core.atomic import write_text
        write_text(args.json, json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
