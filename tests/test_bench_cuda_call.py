"""scripts/bench-cuda-call and scripts/bench-cuda-batch without a GPU: the launch
means the GPU run compares (each enqueues the config's launches and gives the
RawKernel call's bits; those this machine lacks are reported, not run), the
tables, and argument errors before anything runs. The stand-in for CuPy is
tests/fake_cupy.py; the GPU run is the lead's (notes/cuda.md)."""
import json
import sys

import pytest

from script_module import load_script
from test_cuda_steady import Backend
from test_host_overhead import cp  # noqa: F401  (fixture: the CuPy stand-in)


@pytest.fixture(scope="module")
def bc():
    return load_script("bench-cuda-call")


def test_the_launch_means_give_the_same_bits(bc, cp):
    lines = []
    rows = bc.section_launch(cp, lines.append, be=Backend(), calls=2, rounds=1)
    assert [r["what"] for r in rows] == ["the default of 64^3", "K_G split + reduce kernel", "pre-split pack + GEMM"]
    for r in rows:
        for name in ("rawkernel", "kernellaunch", "steady", "graph"):
            assert r["equal"][name] is True and r["us_per_call"][name] > 0, (r["what"], name, r["equal"][name])
        for name in ("ctypes", "cuda_python"):    # no libcuda, no cuda-python here: said, not run
            assert r["us_per_call"][name] is None or r["equal"][name] is True
    md = bc.markdown({"device": "stand-in", "date": "d", "command": "c", "launch": rows})
    assert "| K_G split + reduce kernel | 45x37x3001:float32:NT |" in md
    json.dumps(rows)


def test_arguments_are_checked_first(bc, tmp_path, capsys):
    for argv, msg in [(["--sizes", "0"], "--sizes"), (["--sizes", "a"], "--sizes"), (["--only", "x"], "--only")]:
        with pytest.raises(SystemExit) as e:
            bc.main(["--out", str(tmp_path / "o")] + argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_batch_runs_its_steps_in_order_within_its_limit(tmp_path, monkeypatch):
    batch = load_script("bench-cuda-batch")
    ran = []

    def step(name, argv, out, timeout, log):
        ran.append((name, argv, timeout))
        return {"step": name, "rc": 0, "seconds": 1.0, "limit_s": timeout}
    monkeypatch.setattr(batch, "step", step)
    assert batch.main(["--out", str(tmp_path / "b"), "--minutes", "8", "--seconds", "4", "--classes", "skinny"]) == 0
    assert [r[0] for r in ran] == ["pytest", "call", "shape-classes"]
    assert all(t <= 8 * 60 for *_, t in ran) and sum(t for *_, t in ran[:2]) < 8 * 60
    sc = ran[2][1]
    assert sc[sc.index("--seconds") + 1] == "4.0" and sc[sc.index("--classes") + 1] == "skinny"
    assert "tests/test_cuda_gpu_arrays.py" in ran[0][1]
    doc = json.loads((tmp_path / "b" / "batch.json").read_text())
    assert [s["step"] for s in doc["steps"]] == ["pytest", "call", "shape-classes"]
    # one real step: its log, its exit code, a limit that stops it
    r = load_script("bench-cuda-batch").step("echo", [sys.executable, "-c", "print('hi')"], tmp_path, 30, ran.append)
    assert r["rc"] == 0 and (tmp_path / "echo.log").read_text() == "hi\n"
    r = load_script("bench-cuda-batch").step("slow", [sys.executable, "-c", "import time; time.sleep(9)"], tmp_path,
                                             1, ran.append)
    assert r["rc"] == "timeout"
    with pytest.raises(SystemExit):
        batch.main(["--out", str(tmp_path / "c"), "--minutes", "0"])
