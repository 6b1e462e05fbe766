#!/usr/bin/env python3
"""Issue 38's GPU measurements and tests in one bounded run (about 6 minutes on
an H100), everything under OUT:

    python scripts/bench-cuda-batch --out OUT [--minutes 6] [--seconds 5] [--classes LIST]
                                    [--host-sizes 64,256] [--all-tests]

Steps, in this order, each a process of its own under its own time limit (cut to
what --minutes leaves; a step that fails, breaks the CUDA context or runs out of
time is recorded and the next one runs), OUT/batch.json and OUT/batch.md written
again after every step:
  env            OUT/env.txt: the GPU (nvidia-smi), the CPU, Python and the versions of
                 CuPy, PyTorch and cuda-python (what launch costs depend on)
  call-launch    OUT/call-launch/: scripts/bench-cuda-call --only launch (the launch
                 means against each other, each checked for the RawKernel call's bits;
                 a sticky CUDA error ends that process only)
  call-steps     OUT/call-steps/: scripts/bench-cuda-call --only steps (a call's host
                 cost step by step, both launch means, torch.matmul and cupy.matmul)
  pytest-call    OUT/pytest-call.log (+ .xml): tests/test_cuda_gpu_call.py (the call path:
                 launch means, the lane's bits under both, captures, DLPack, the 'call'
                 timing), verbose (each test's result is in the log as it ends, so a cut
                 run still says which passed), pytest's 15 slowest, a traceback dump of
                 any test still running after 60 s (faulthandler_timeout)
  pytest-gpu     OUT/pytest-gpu.log: the call-path tests of tests/test_cuda_gpu.py (the
                 timing modes, stream-K through matmul on two streams)
  shape-classes  OUT/sc/: scripts/bench-shape-classes --seconds S --host-sizes 64,256 (the
                 host table under both launch means, then the default shapes in order
                 for what is left: 900x700x1300 tuned, 4096^3 untuned, 48x6144x3072, ...)
--all-tests runs every GPU test file (test_cuda_gpu_call.py, _arrays.py, test_cuda_gpu.py),
one step each, instead of the two pytest steps and shape-classes.
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

CALL_PATH_GPU_TESTS = [f"tests/test_cuda_gpu.py::{t}" for t in (
    "test_held_timing", "test_timing_and_cublas_baseline", "test_stream_k_through_matmul_on_two_streams")]
ALL_GPU_TEST_FILES = ["tests/test_cuda_gpu_call.py", "tests/test_cuda_gpu_arrays.py", "tests/test_cuda_gpu.py"]
# seconds each step is planned at, in order (a step gets at most this, and at most
# what is left of --minutes less RESERVE_S); shape-classes takes what is left
PLAN_S = {"env": 15, "call-launch": 45, "call-steps": 50, "pytest-call": 90, "pytest-gpu": 35}
RESERVE_S = 5
PYTEST = ["-m", "pytest", "-v", "-p", "no:cacheprovider", "--durations=15", "-o", "faulthandler_timeout=60"]
ENV_SCRIPT = r"""
import platform, subprocess, sys
print("python", sys.version.replace("\n", " "))
print("platform", platform.platform())
for cmd in (["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit", "--format=csv"],
            ["lscpu"]):
    try:
        print(subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout)
    except Exception as e:
        print(cmd[0], "failed:", e)
for mod in ("cupy", "torch", "cuda.bindings", "numpy"):
    try:
        m = __import__(mod, fromlist=["__version__"])
        print(mod, getattr(m, "__version__", "?"))
    except Exception as e:
        print(mod, "not importable:", type(e).__name__, e)
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    from shadertune.backends.cuda import graphs
    print("graph entry points:", graphs.driver() is not None)
except Exception as e:
    print("libcuda:", type(e).__name__, e)
"""


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


def plan(a, out: pathlib.Path, py: str) -> list:
    """[(name, argv, planned seconds or None: what is left)] in order."""
    steps = [("env", [py, "-c", ENV_SCRIPT], PLAN_S["env"]),
             ("call-launch", [py, "scripts/bench-cuda-call", "--out", str(out / "call-launch"), "--only", "launch"],
              PLAN_S["call-launch"]),
             ("call-steps", [py, "scripts/bench-cuda-call", "--out", str(out / "call-steps"), "--only", "steps"],
              PLAN_S["call-steps"])]
    if a.all_tests:
        for f in ALL_GPU_TEST_FILES:
            name = "pytest-" + pathlib.Path(f).stem.removeprefix("test_cuda_").replace("_", "-")
            steps.append((name, [py, *PYTEST, f"--junitxml={out / (name + '.xml')}", f], None if f == ALL_GPU_TEST_FILES[-1]
                          else 0.5 * 60 * a.minutes))
    else:
        for name, tests in (("pytest-call", ["tests/test_cuda_gpu_call.py"]), ("pytest-gpu", CALL_PATH_GPU_TESTS)):
            steps.append((name, [py, *PYTEST, f"--junitxml={out / (name + '.xml')}", *tests], PLAN_S[name]))
    sc = [py, "scripts/bench-shape-classes", "--out", str(out / "sc"), "--seconds", str(a.seconds),
          "--host-sizes", a.host_sizes]
    if a.classes:
        sc += ["--classes", a.classes]
    if not a.all_tests:
        steps.append(("shape-classes", sc, None))
    return steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench-cuda-batch", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=6.0, help="the whole run's limit (default 6)")
    ap.add_argument("--seconds", type=float, default=5.0, help="tune seconds per shape (default 5)")
    ap.add_argument("--classes", help="bench-shape-classes --classes (default: every class)")
    ap.add_argument("--host-sizes", default="64,256", help="bench-shape-classes --host-sizes (default 64,256)")
    ap.add_argument("--all-tests", action="store_true",
                    help="every GPU test file, one step each, instead of the call path's tests and shape-classes")
    a = ap.parse_args(argv)
    if not a.minutes > 0 or not a.seconds > 0:
        ap.error("--minutes and --seconds must be > 0")
    out = pathlib.Path(a.out).resolve()      # the steps run in the checkout, not here
    out.mkdir(parents=True, exist_ok=True)
    from shadertune.core.atomic import write_text
    t_end = time.monotonic() + 60 * a.minutes
    lines, done = [], []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    def save():
        write_text(out / "batch.json", json.dumps({"steps": done, "minutes": a.minutes, "seconds": a.seconds},
                                                  indent=1))
        write_text(out / "batch.md", "\n".join(lines) + "\n")
    for name, argv_, planned in plan(a, out, sys.executable):
        left = t_end - time.monotonic() - RESERVE_S
        if left < 5:
            done.append({"step": name, "rc": "skipped", "seconds": 0, "limit_s": 0})
            log(f"{name}: skipped ({left:.0f} s left)")
            save()
            continue
        limit = left if planned is None else min(planned, left)
        if name == "shape-classes":      # its rows stop starting in time; the process limit is the backstop
            argv_ = argv_ + ["--max-seconds", str(max(10, int(limit - 15)))]
        done.append(step(name, argv_, out, limit, log))
        save()
    return 0 if all(s["rc"] == 0 for s in done) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
