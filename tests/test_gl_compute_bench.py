"""scripts/bench-gl-compute's stages of issue 39 (sweep, knobs, skinny, sass, coopmat,
tune) run to completion at a small size on llvmpipe, within --budget, a stage stopped
at its own limit and the outputs written after every stage.  The timings mean nothing
here; what the rows hold is checked."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_bench_stages_run_within_the_budget(tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "bench-gl-compute"), str(out),
           "sweep", "knobs", "skinny", "sass", "coopmat", "tune",
           "--knob-sizes", "32", "--sass-size", "32", "--skinny", "32x40x16", "--seconds", "2",
           "--sizes", "32", "--phased-size", "32", "--phased-seconds", "2", "--model-seconds", "2",
           "--stage-seconds", "sweep=2", "--budget", "150"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads((out / "bench-gl-compute.json").read_text())
    assert [s["stage"] for s in doc["stages"]] == ["sweep", "knobs", "skinny", "sass", "coopmat", "tune"]
    rows = doc["rows"]
    assert any(r["stage"] == "sweep" and "timed_out" in r for r in rows)        # stopped at 2 s
    base = next(r for r in rows if r["stage"] == "knobs" and r["move"] == "base" and r["base"] == "default")
    assert base["verified"] and base["gflops"] > 0
    moved = {r["move"]: r for r in rows if r["stage"] == "knobs" and r["base"] == "default"}
    assert moved["clamp"]["verified"] and "subgroup" in moved["shuffle"]["invalid"]
    skinny = next(r for r in rows if r["stage"] == "skinny")
    assert skinny["verified"] and skinny["bound_ms"] > 0 and skinny["write_c_fresh_gbs"] > 0
    assert next(r for r in rows if r["stage"] == "coopmat")["verdict"]
    tune = [r for r in rows if r["stage"] == "tune"]
    assert len(tune) == 2 and tune[0]["phases"][0]["label"].endswith("ks")
    for name in ("bench-gl-compute.md", "reports.tgz", "sass.txt", "coopmat.txt"):
        assert (out / name).stat().st_size > 0


def test_driver_cache_frames_decode_without_the_zstandard_module(monkeypatch):
    """The GPU machine has no zstandard wheel: the probes read NVIDIA's disk cache through
    the system's libzstd, a frame that does not say its size and bytes after it included."""
    import ctypes
    import ctypes.util
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import gl_probes
    name = ctypes.util.find_library("zstd")
    if name is None:
        pytest.skip("no libzstd on this machine")
    lib = ctypes.CDLL(name)
    lib.ZSTD_compress.restype = ctypes.c_size_t
    lib.ZSTD_compress.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
    data = b"NVuc" + bytes(range(256)) * 40
    room = ctypes.create_string_buffer(len(data) + 1024)
    size = lib.ZSTD_compress(room, len(room), data, len(data), 3)
    frame = room.raw[:size]
    monkeypatch.setitem(sys.modules, "zstandard", None)        # import zstandard raises
    decode = gl_probes.zstd_frame_decoder()
    assert decode.__name__ == "with_libzstd"
    assert decode(frame + b"the next record") == data
    unsized = bytearray(frame)
    unsized[4] &= 0x3F          # frame header descriptor: no content size field ...
    assert decode(bytes(unsized)) in (data, None)               # ... decodes or is refused, never wrong
    assert decode(gl_probes.ZSTD_MAGIC + b"not a frame") is None


def test_the_tables_say_a_stage_that_measured_nothing_and_keep_the_rest():
    """A stage skipped for want of budget, stopped at its limit or failed is a row without
    a shape: the tables leave it out and name it under them (markdown raised KeyError on
    it, after every stage, and the run's Markdown and reports were lost)."""
    from script_module import load_script
    bench = load_script("bench-gl-compute")
    measured = {"stage": "knobs", "shape": "64x64x64:float32:NN", "base": "default", "move": "base",
                "gflops": 12.0, "verified": True}
    status = [{"stage": name, key: f"{key} here"} for name, key in
              (("tune", "skipped"), ("retime", "timed_out"), ("compare", "failed"), ("client", "skipped"),
               ("knobs", "timed_out"), ("skinny", "failed"), ("sweep", "skipped"))]
    text = bench.markdown([measured, *status])
    assert "| 64x64x64 | default | base | 12 |" in text
    for row in status:
        assert f"stage {row['stage']}: {next(v for k, v in row.items() if k != 'stage')}" in text
