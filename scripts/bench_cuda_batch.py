#!/usr/bin/env python3
"""Issue 38's GPU measurements and tests in one bounded run, everything under OUT:

    python scripts/bench-cuda-batch --out OUT [--minutes 8] [--seconds 5] [--classes LIST]
                                    [--all-tests]

1. OUT/pytest.log: the GPU tests of the call path (tests/test_cuda_gpu_arrays.py:
   device arrays, the express lane's launches, DLPack, torch.cuda.graph and CuPy
   stream capture replaying bit-equal, the 'call' timing; tests/test_cuda_gpu.py's
   stream-K, timing and tuning tests), with pytest's 25 slowest durations;
   --all-tests: every GPU test instead (test_cuda_gpu*.py).
2. OUT/call/: scripts/bench-cuda-call (a call's host cost step by step, the
   launch means against each other).
3. OUT/sc/: scripts/bench-shape-classes --seconds S (the host table first, then
   the default shape list, or --classes, for what the time left allows).
Each step runs under its own time limit, cut to what --minutes leaves; a step
that fails or runs out of time is recorded and the next one runs.
OUT/batch.json and OUT/batch.md say what ran, its exit code and seconds.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CALL_PATH_TESTS = ["tests/test_cuda_gpu_arrays.py"] + [
    f"tests/test_cuda_gpu.py::{t}" for t in (
        "test_stream_k_every_family", "test_stream_k_through_matmul_on_two_streams", "test_held_timing",
        "test_timing_and_cublas_baseline", "test_default_strategy_tunes_into_the_store_that_auto_reads")]
# seconds each step is planned at (the last one takes what is left)
PYTEST_S, CALL_S, END_S = 200, 70, 10


def step(name, argv, out: pathlib.Path, timeout: float, log) -> dict:
    t0 = time.monotonic()
    path = out / f"{name}.log"
    with open(path, "w") as f:
        try:
            rc = subprocess.run(argv, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                timeout=max(1.0, timeout)).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    r = {"step": name, "argv": argv[1:], "rc": rc, "seconds": round(time.monotonic() - t0, 1),
         "limit_s": round(timeout), "log": path.name}
    tail = path.read_text(errors="replace").strip().splitlines()[-3:]
    log(f"{name}: rc {rc} in {r['seconds']} s (limit {r['limit_s']} s): " + " | ".join(tail))
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench-cuda-batch", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=8.0, help="the whole run's limit (default 8)")
    ap.add_argument("--seconds", type=float, default=5.0, help="tune seconds per shape (default 5)")
    ap.add_argument("--classes", help="bench-shape-classes --classes (default: every class)")
    ap.add_argument("--all-tests", action="store_true", help="every GPU test, not only the call path's")
    a = ap.parse_args(argv)
    if not a.minutes > 0 or not a.seconds > 0:
        ap.error("--minutes and --seconds must be > 0")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    t_end = time.monotonic() + 60 * a.minutes
    left = lambda: t_end - time.monotonic()     # noqa: E731
    lines, steps = [], []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)
    tests = ["tests/test_cuda_gpu.py", "tests/test_cuda_gpu_arrays.py"] if a.all_tests else CALL_PATH_TESTS
    steps.append(step("pytest", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=25", *tests],
                      out, min(PYTEST_S if not a.all_tests else 0.6 * left(), left() - 60), log))
    steps.append(step("call", [py, "scripts/bench-cuda-call", "--out", str(out / "call")], out,
                      min(CALL_S, left() - 30), log))
    sc = [py, "scripts/bench-shape-classes", "--out", str(out / "sc"), "--seconds", str(a.seconds),
          "--max-seconds", str(max(10, int(left() - END_S - 20)))]
    if a.classes:
        sc += ["--classes", a.classes]
    steps.append(step("shape-classes", sc, out, left() - END_S, log))
    from shadertune.core.atomic import write_text
    write_text(out / "batch.json", json.dumps({"steps": steps, "minutes": a.minutes, "seconds": a.seconds}, indent=1))
    write_text(out / "batch.md", "\n".join(lines) + "\n")
    return 0 if all(s["rc"] == 0 for s in steps) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
