"""python -m shadertune.codegen, and the templates shipping inside the wheel."""
import json
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def codegen(*args):
    return subprocess.run([sys.executable, "-m", "shadertune.codegen", *args], capture_output=True,
                          text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)


@pytest.mark.parametrize("code,expr", [("1", "dot(a0, b0_0)"), ("2", "a0.x * b0_0.xy"),
                                       ("3", "a0.x * b0_0.xyz"), ("4", "c0_0 += a0.x * b0_0"),
                                       ("5", "a0.xxzz * b0_0.xyxy")])
def test_channel_codes(code, expr):
    r = codegen("--backend", "gl", "--size", "64,48,40", "-c", code, "-p", "8")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("#version 330 core") and expr in r.stdout


def test_jiang_options_mrt_and_unroll():
    r = codegen("--size", "64", "-m", "2", "-n", "4", "-p", "16", "-u", "-c", "4")
    assert r.returncode == 0, r.stderr
    src = r.stdout
    assert "mrt=2x4" in src and "layout(location = 7) out vec4 out7;" in src
    assert "for (int s" not in src and "fully unrolled: 4 steps" in src


def test_config_json_and_list_space():
    cfg = {"glsl": "450", "fetch": "texture", "unroll": 2, "np": 16, "mc": "2x2", "mrt_h": 2, "mrt_w": 1}
    r = codegen("--size", "32,32,32", "--config", json.dumps(cfg))
    assert r.returncode == 0 and "#version 450 core" in r.stdout and "texture(A," in r.stdout
    r = codegen("--size", "12,10,8", "--list-space")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    image_knobs = {"out", "block_h", "block_w", "a_src", "b_src"}
    assert len(lines) > 10 and all(set(c) == set(cfg) | image_knobs for c in lines)
    assert all(c["np"] <= 8 and c["mrt_h"] * c["mrt_w"] <= 8 for c in lines)
    assert "valid of" in r.stderr


@pytest.mark.parametrize("args,msg", [
    (["--size", "32", "-p", "6", "-c", "4"], "whole number of A texels"),
    (["--size", "32", "-m", "4", "-n", "4"], "max_draw_buffers"),
    (["--size", "3,x"], "size must be"),
    (["--size", "32", "--config", "{not json"], "not valid JSON"),
])
def test_errors_are_one_line(args, msg):
    r = codegen(*args)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr


def test_wheel_ships_templates(tmp_path):
    """A non-editable install finds the templates: they are inside the wheel."""
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path), ROOT], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "No module named" in r.stderr:
        pytest.skip(f"cannot build wheels here: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr
    (whl,) = tmp_path.glob("shadertune-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert "shadertune/_shaders/gl/matmul.frag.j2" in names
    assert "shadertune/_shaders/gl/fullscreen.vert" in names
