"""scripts/bench-cuda-call and scripts/bench-cuda-batch without a GPU: the launch
means the GPU run compares (each enqueues the config's launches and gives the
RawKernel call's bits; those this machine lacks are reported, not run), the
tables, and argument errors before anything runs. The stand-in for CuPy is
tests/fake_cupy.py; the GPU run is the lead's (notes/cuda.md)."""
import ctypes
import json
import sys

import pytest

import fake_cupy

from script_module import load_script
from test_cuda_steady import Backend
from test_host_overhead import cp  # noqa: F401  (fixture: the CuPy stand-in)


@pytest.fixture(scope="module")
def bc():
    return load_script("bench-cuda-call")


class FakeLibcuda:
    """libcuda as bench-cuda-call's ctypes means calls it (ctypes objects in),
    over the stand-in's launchKernel (which checks the parameter array is owned
    by a live _Params, fake_cupy.tracking_params)."""

    def __init__(self):
        def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            v = lambda x: x.value if isinstance(x, ctypes.c_void_p) else x   # noqa: E731
            fake_cupy.launchKernel(v(f), gx, gy, gz, bx, by, bz, smem, v(stream) or 0, v(params), extra)
            return 0
        self.cuLaunchKernel = cuLaunchKernel


class FakeCudaPython:
    """cuda.bindings.driver as the cuda_python means calls it."""

    class CUfunction:
        def __init__(self, v):
            self.v = v

    CUstream = CUfunction

    @staticmethod
    def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        fake_cupy.launchKernel(f.v, gx, gy, gz, bx, by, bz, smem, stream.v, params, extra)
        return (0,)


def graphs_KEEP():
    from shadertune.backends.cuda import graphs
    return graphs.KEEP


@pytest.fixture
def drivers(bc, cp, monkeypatch):
    """The driver entry points every means of the launch section calls, over the stand-in."""
    from shadertune.backends.cuda import graphs
    monkeypatch.setattr(bc, "libcuda", FakeLibcuda)
    monkeypatch.setattr(bc, "cuda_python_driver", FakeCudaPython)
    drv = fake_cupy.FakeDriver()
    monkeypatch.setattr(fake_cupy, "DRIVER", drv)      # (the one runtime.graphLaunch runs)
    monkeypatch.setattr(graphs, "_DRIVER", [drv])
    return drv


def test_the_launch_means_give_the_same_bits(bc, cp, drivers):
    """Every means enqueues the config's launches and gives the RawKernel call's
    bits, called (as the section calls them) after the function that made them
    returned and a collection ran: each holds the parameter arrays it hands the
    driver (the stand-in refuses an array no live _Params owns: the first GPU
    run's ctypes and cuda-python means read freed host memory)."""
    lines = []
    import gc
    real = bc._alternatives

    def collected(*a):
        alts = real(*a)
        gc.collect()
        return alts
    bc._alternatives = collected
    try:
        rows = bc.section_launch(cp, lines.append, be=Backend(), calls=2, rounds=1)
    finally:
        bc._alternatives = real
    assert [r["what"] for r in rows] == ["the default of 64^3", "K_G split + reduce kernel", "pre-split pack + GEMM"]
    assert drivers.instantiated >= 3 * graphs_KEEP() and drivers.updates > 0      # the graphs ran, updated
    for r in rows:
        assert list(r["equal"]) == bc.NAMES and "broken_after" not in r
        assert r["graphs_kept"] == {"steady_graphs": True, "graphs_update": True}
        for name in bc.NAMES:
            assert r["equal"][name] is True and r["us_per_call"][name] > 0, (r["what"], name, r["equal"][name])
    md = bc.markdown({"device": "stand-in", "date": "d", "command": "c", "launch": rows})
    assert "| K_G split + reduce kernel | 45x37x3001:float32:NT |" in md
    json.dumps(rows)


def test_a_means_that_fails_is_said_and_the_others_still_run(bc, cp, drivers, monkeypatch):
    """No libcuda, no graph driver: those means say why and are not run; a means
    whose launch fails says the driver's error."""
    from shadertune.backends.cuda import graphs

    def no_lib():
        raise OSError("libcuda.so.1: cannot open shared object file")
    monkeypatch.setattr(bc, "libcuda", no_lib)
    monkeypatch.setattr(graphs, "_DRIVER", [None])

    import enum
    CUresult = enum.IntEnum("CUresult", {"CUDA_ERROR_INVALID_VALUE": 1})

    class Refusing(FakeCudaPython):
        @staticmethod
        def cuLaunchKernel(*a):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
    monkeypatch.setattr(bc, "cuda_python_driver", Refusing)
    (row, *_) = bc.section_launch(cp, [].append, be=Backend(), calls=2, rounds=1)
    assert row["equal"]["ctypes"].startswith("not run: OSError")
    assert row["equal"]["steady_graphs"].startswith("not run") and row["us_per_call"]["graphs_update"] is None
    assert row["equal"]["cuda_python"].startswith("failed: RuntimeError: cuLaunchKernel: <CUresult.CUDA_ERROR_INVALID_VALUE: 1>")
    assert all(row["equal"][n] is True for n in ("rawkernel", "kernellaunch", "steady", "captured_graph"))
    md = bc.markdown({"device": "stand-in", "date": "d", "command": "c", "launch": [row]})
    assert "cuda_python: failed" in md


def test_arguments_are_checked_first(bc, tmp_path, capsys):
    for argv, msg in [(["--sizes", "0"], "--sizes"), (["--sizes", "a"], "--sizes"), (["--only", "x"], "--only")]:
        with pytest.raises(SystemExit) as e:
            bc.main(["--out", str(tmp_path / "o")] + argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_batch_runs_its_steps_in_order_within_its_limit(tmp_path, monkeypatch):
    batch = load_script("bench-cuda-batch")
    ran = []
    now = [0.0]
    monkeypatch.setattr(batch.time, "monotonic", lambda: now[0])

    def step(name, argv, out, timeout, log):
        assert out.is_absolute()          # the steps run in the checkout, not where --out was given
        ran.append((name, argv, timeout))
        # the files so far are on disk before each step starts
        if len(ran) > 1:
            assert [s["step"] for s in json.loads((out / "batch.json").read_text())["steps"]] == [r[0] for r in ran[:-1]]
        now[0] += timeout                 # the worst case: every step runs out its limit
        return {"step": name, "rc": "timeout" if name == "pytest-call" else 0, "seconds": 1.0, "limit_s": timeout}
    monkeypatch.setattr(batch, "step", step)
    assert batch.main(["--out", str(tmp_path / "b"), "--minutes", "6", "--seconds", "4", "--classes", "skinny"]) == 1
    names = [r[0] for r in ran]
    assert names == ["env", "call-launch", "call-steps", "pytest-call", "pytest-gpu", "shape-classes"]
    assert now[0] <= 6 * 60 and all(t > 0 for *_, t in ran)     # within --minutes, every step run
    sc = ran[-1][1]
    assert sc[sc.index("--seconds") + 1] == "4.0" and sc[sc.index("--classes") + 1] == "skinny"
    assert sc[sc.index("--host-sizes") + 1] == "64,256" and int(sc[sc.index("--max-seconds") + 1]) < ran[-1][2]
    launch = ran[1][1]
    assert launch[launch.index("--only") + 1] == "launch" and ran[2][1][ran[2][1].index("--only") + 1] == "steps"
    assert "-v" in ran[3][1] and "tests/test_cuda_gpu_call.py" in ran[3][1]
    doc = json.loads((tmp_path / "b" / "batch.json").read_text())
    assert [s["step"] for s in doc["steps"]] == names and doc["steps"][3]["rc"] == "timeout"
    # out of time: the rest are skipped, said
    ran.clear()
    now[0] = 0.0
    monkeypatch.setitem(batch.PLAN_S, "env", 10 ** 4)
    monkeypatch.chdir(tmp_path)
    batch.main(["--out", "c", "--minutes", "1"])          # a relative --out: here, not in the checkout
    doc = json.loads((tmp_path / "c" / "batch.json").read_text())
    assert [s["rc"] for s in doc["steps"]][1:] == ["skipped"] * 5
    # one real step: its log, its exit code, a limit that stops it
    monkeypatch.undo()
    r = batch.step("echo", [sys.executable, "-c", "print('hi')"], tmp_path, 30, ran.append)
    assert r["rc"] == 0 and (tmp_path / "echo.log").read_text() == "hi\n"
    r = batch.step("slow", [sys.executable, "-c", "import time; time.sleep(9)"], tmp_path, 1, ran.append)
    assert r["rc"] == "timeout"
    with pytest.raises(SystemExit):
        batch.main(["--out", str(tmp_path / "d"), "--minutes", "0"])


def test_the_batch_plan_with_every_test_file():
    batch = load_script("bench-cuda-batch")
    import argparse
    a = argparse.Namespace(all_tests=True, minutes=20, seconds=5, classes=None, host_sizes="64")
    names = [n for n, *_ in batch.plan(a, __import__("pathlib").Path("/o"), "py")]
    assert names == ["env", "call-launch", "call-steps", "pytest-gpu-call", "pytest-gpu-arrays", "pytest-gpu"]


def test_the_steps_section_runs_under_both_launch_means(bc, cp, drivers, monkeypatch, tmp_path):
    """section_steps on the stand-in (its timing replaced by two calls each): every
    step of a CuPy row and of a DLPack row (its second calls on the lane), the lane's keys learned again under the graph means (a
    graph made for them), the launch means set back after."""
    import os
    import types
    import numpy as np
    import shadertune
    import shadertune.front.matmul as front
    from shadertune.backends.base import DeviceInfo

    class RandomState:
        def __init__(self, seed):
            self.r = np.random.default_rng(seed)

        def uniform(self, lo, hi, shape):
            return cp.asarray(self.r.uniform(lo, hi, shape))
    monkeypatch.setattr(cp, "random", types.SimpleNamespace(RandomState=RandomState), raising=False)
    monkeypatch.setattr(cp, "matmul", lambda a, b: a @ b, raising=False)
    be = Backend()
    be._device_info = DeviceInfo(backend="cuda", vendor="NVIDIA", renderer="stand-in", driver="stand-in")
    monkeypatch.setattr(front, "backend", lambda name: be)
    real_door, real_mm = front.door, shadertune.matmul
    monkeypatch.setattr(front, "door", lambda name, *a: real_door(be))
    monkeypatch.setattr(shadertune, "matmul", lambda *a, **k: real_mm(*a, **{**k, "backend": be}))
    monkeypatch.setattr(bc, "host_us", lambda cp, fn, *a, **k: (fn(), fn(), 1.0)[2])
    monkeypatch.setattr(bc, "torch_mod", lambda: None)
    monkeypatch.delenv("SHADERTUNE_CUDA_LAUNCH", raising=False)
    checks = []
    real_check = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: checks.append(a[0]) or real_check(*a, **k))
    row, dl = bc.section_steps(cp, [16], tmp_path, [].append)
    for k in ("lane", "lane_graphs", "lane_out", "lane_knobs", "lane_auto", "regular", "alloc", "launches",
              "launches_graphs", "recheck", "cupy_matmul"):
        assert row[k] == 1.0, k
    assert row["graph_made"] is False and row["graph_made_graphs"] is True
    # the DLPack row (objects over the CuPy arrays: no PyTorch here), its lane taken
    for k in ("lane", "lane_graphs", "lane_knobs", "lane_auto", "regular", "export", "view", "from_dlpack",
              "alloc", "cupy_matmul"):
        assert dl[k] == 1.0, k
    assert dl["operands"] == "dlpack" and dl["producer"] == "cupy" and "lane_out" not in dl
    lane_calls = [a for a in checks if type(a) is bc.DLPackArray]
    assert len(lane_calls) == 4 + 2  # the first of two calls under kernels, graphs, knobs, auto; regular's two
    assert "SHADERTUNE_CUDA_LAUNCH" not in os.environ
    md = bc.markdown({"device": "d", "date": "d", "command": "c", "steps": [row, dl]})
    assert "| 16^3 | cupy | 1.00 | 1.00 |" in md and "| 16^3 | dlpack (cupy) | 1.00 | 1.00 |" in md
