"""One config's three timings (held, single call, loop; bench-shape-classes' Gpu)
under each launch means of the express lane, beside cuBLAS: where a call's time over
its device time goes (host launch cost or the idle GPU's start).

    python3 tools/probe_call_means.py --shape 900x700x1300 [--config JSON] [--repeats 400]

Each means runs in a child process (SHADERTUNE_CUDA_LAUNCH is read when a call key
is learned).  --config: knobs as JSON (default: the backend's untuned default).
Prints one JSON line per means.  Needs a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(shape: str, config: str | None, repeats: int) -> dict:
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench_shape_classes as bsc
    import shadertune
    from shadertune.backends.cuda import CUDABackend
    from shadertune.backends.cuda.timing import call_times
    p = bsc.parse_shape(shape)
    gpu = bsc.Gpu()
    be = CUDABackend()
    A, B = gpu.operands(p, 1)
    ref = gpu.reference(A, B)
    out = gpu.empty_like_result(A, B)
    knobs = json.loads(config) if config else be.default_config(p).to_dict()
    ours = lambda: shadertune.matmul(A, B, backend=be, config=knobs)     # noqa: E731
    cub = lambda: gpu.baseline(A, B, out)                                # noqa: E731
    row = {"shape": shape, "means": os.environ.get("SHADERTUNE_CUDA_LAUNCH", "graphs"),
           "config": knobs, "error": gpu.rel_err(ours(), ref)}
    for name, fn in (("ours", ours), ("cublas", cub)):
        calls = call_times(fn, repeats, warmup=20)
        row[name] = {"held_ms": gpu.held_ms(fn, 200), "call_ms": statistics.median(calls),
                     "call_p10_ms": sorted(calls)[len(calls) // 10],
                     "call_p90_ms": sorted(calls)[9 * len(calls) // 10],
                     "loop_ms": gpu.loop_ms(fn, 2000)}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True)
    ap.add_argument("--config")
    ap.add_argument("--repeats", type=int, default=400)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.shape, a.config, a.repeats)), flush=True)
        return 0
    rc = 0
    for means in ("graphs", "kernels"):
        env = dict(os.environ, SHADERTUNE_CUDA_LAUNCH=means)
        cmd = [sys.executable, __file__, "--child", "--shape", a.shape, "--repeats", str(a.repeats)]
        if a.config:
            cmd += ["--config", a.config]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        sys.stdout.write(r.stdout)
        if r.returncode:
            sys.stderr.write(r.stderr[-3000:])
            rc = r.returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
