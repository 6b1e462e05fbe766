#!/usr/bin/env python3
"""Host time of a repeated, cached shadertune.matmul(config="auto") call on GL (llvmpipe
where there is no GPU): CALLS calls of a 16x16 @ 16x16 product on a store holding a
verified result for it, the median of RUNS runs (us a call); then configs.resolve alone
(what config="auto" adds to a call once its selection is kept), 10 x CALLS resolves.

    scripts/bench-auto-call [CALLS] [RUNS]          (default 2000 7; notes/layers.md)
"""
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from project_venv import use_project_venv  # noqa: E402

use_project_venv("moderngl", "numpy")

import numpy as np  # noqa: E402

import shadertune  # noqa: E402
from shadertune.front.matmul import backend as matmul_backend  # noqa: E402
from shadertune.front.requests import parse_request, resolve  # noqa: E402
from shadertune.db import Store  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.core.result import Result  # noqa: E402


def main(calls: int = 2000, runs: int = 7) -> None:
    be = matmul_backend("gl")
    p = Problem(16, 16, 16)
    db = pathlib.Path(tempfile.mkdtemp()) / "t.sqlite"
    with Store(db) as s:
        s.put(Result("gl", be.device().key, p, be.default_config(p), "ok", times_ms=[1.0], error=0.0),
              be.template_hash())
    rng = np.random.default_rng(0)
    A = rng.standard_normal((16, 16)).astype(np.float32)
    B = rng.standard_normal((16, 16)).astype(np.float32)
    assert np.allclose(shadertune.matmul(A, B, db=db), A.astype(np.float64) @ B, atol=1e-4)
    time.sleep(0.5)              # older than the store's freshness window: stats alone decide
    per = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(calls):
            shadertune.matmul(A, B, db=db)
        per.append((time.perf_counter() - t0) / calls * 1e6)
    print(f"{be.device().renderer}: matmul(config='auto') us a call:",
          " ".join(f"{x:.1f}" for x in per), "median", f"{statistics.median(per):.1f}")
    req = parse_request("auto", be)
    sel = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(calls * 10):
            resolve(be, p, req, db=db)
        sel.append((time.perf_counter() - t0) / (calls * 10) * 1e6)
    print("configs.resolve('auto') us:", " ".join(f"{x:.2f}" for x in sel),
          "median", f"{statistics.median(sel):.2f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
