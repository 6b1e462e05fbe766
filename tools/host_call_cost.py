"""Host cost of a repeated, cached shadertune.matmul(A, B) (config="auto") on GL:
cProfile's function-call count per call and timeit's microseconds per call.

    PYTHONPATH=TREE python tools/host_call_cost.py [--calls 2000] [--repeat 7] [--top 25]

A 16x16 @ 16x16 product on a store holding one verified result for it (its
default config), so every call takes the kept selection and the cached kernel.
It imports only names that are the same before and after the package's rooms
moved (shadertune.matmul, shadertune.Problem/Result, shadertune.db.Store), so
the same file measures both trees (notes/layers.md).
"""
# rewrite_imports: leave this file (it imports the old and the new names, to measure both trees)
from __future__ import annotations

import argparse
import cProfile
import pathlib
import pstats
import statistics
import tempfile
import time
import timeit

import numpy as np

import shadertune
from shadertune.db import Store


def _door_backend():
    """matmul's own GL backend instance (the one whose kernel cache the calls use)."""
    try:
        from shadertune.front.matmul import backend
    except ImportError:
        from shadertune.api import backend
    return backend("gl")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed run (default 2000)")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs (default 7)")
    ap.add_argument("--top", type=int, default=0, help="print the N functions called most")
    a = ap.parse_args(argv)
    be = _door_backend()
    p = shadertune.Problem(16, 16, 16)
    db = pathlib.Path(tempfile.mkdtemp()) / "t.sqlite"
    with Store(db) as s:
        s.put(shadertune.Result("gl", be.device().key, p, be.default_config(p), "ok", times_ms=[1.0],
                                error=0.0), be.template_hash())
    rng = np.random.default_rng(0)
    A = rng.standard_normal((16, 16)).astype(np.float32)
    B = rng.standard_normal((16, 16)).astype(np.float32)
    assert np.allclose(shadertune.matmul(A, B, db=db), A.astype(np.float64) @ B, atol=1e-4)
    time.sleep(0.5)              # older than the store's freshness window: stats alone decide
    for _ in range(50):
        shadertune.matmul(A, B, db=db)

    prof = cProfile.Profile()
    n = 200
    prof.enable()
    for _ in range(n):
        shadertune.matmul(A, B, db=db)
    prof.disable()
    st = pstats.Stats(prof)
    calls = st.total_calls / n
    prim = st.prim_calls / n
    print(f"renderer: {be.device().renderer}")
    print(f"cProfile: {calls:.1f} function calls per matmul ({prim:.1f} primitive), over {n} calls")
    if a.top:
        rows = sorted(st.stats.items(), key=lambda kv: -kv[1][1])[:a.top]
        for (file, line, name), (cc, nc, tt, ct, _) in rows:
            print(f"  {nc / n:6.2f}  {pathlib.Path(file).name}:{line}({name})")

    t = timeit.Timer(lambda: shadertune.matmul(A, B, db=db))
    runs = [x / a.calls * 1e6 for x in t.repeat(repeat=a.repeat, number=a.calls)]
    print("timeit us a call:", " ".join(f"{x:.1f}" for x in runs),
          f"median {statistics.median(runs):.1f} fastest {min(runs):.1f}")


if __name__ == "__main__":
    main()
