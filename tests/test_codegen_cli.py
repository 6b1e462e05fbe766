"""python -m shadertune.codegen: knobs by name, Jiang's short flags as aliases, partial
configs filled from the problem's default, one-line errors."""
import json
import os
import re

import pytest
from subproc import run_python

from shadertune.cli.codegen import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def codegen(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def header(src: str) -> dict:
    """The knobs a GL source states in its third line: '// mc=1x4 mrt=2x2 np=32 ...'."""
    line = src.splitlines()[2]
    return dict(kv.split("=", 1) for kv in line.lstrip("/ ").split())


def test_knobs_by_name(capsys):
    rc, src, err = codegen(capsys, "--size", "512", "--mc", "1x4", "--unroll", "4", "--np", "32",
                           "--mrt", "2x2", "--glsl", "450", "--fetch=texture")
    assert rc == 0, err
    assert src.startswith("#version 450 core") and "texture(A," in src
    assert header(src) == {"mc": "1x4", "mrt": "2x2", "np": "32", "unroll": "4", "fetch": "texture"}


@pytest.mark.parametrize("unroll", ["2", "4", "8", "full"])
def test_every_unroll_is_reachable(capsys, unroll):
    rc, src, err = codegen(capsys, "--size", "256", "--unroll", unroll, "--np", "128", "--mc", "1x4",
                           "--mrt", "2x2")
    assert rc == 0, err
    assert header(src)["unroll"] == unroll


@pytest.mark.parametrize("code,expr", [("1", "dot(a0, b0_0)"), ("2", "a0.x * b0_0.xy"),
                                       ("3", "a0.x * b0_0.xyz"), ("4", "c0_0 += a0.x * b0_0"),
                                       ("5", "a0.xxzz * b0_0.xyxy"), ("2x2", "a0.xxzz * b0_0.xyxy"),
                                       ("1x4", "c0_0 += a0.x * b0_0")])
def test_channel_codes_and_shapes(capsys, code, expr):
    rc, src, err = codegen(capsys, "--size", "64,48,40", "-c", code, "-p", "8")
    assert rc == 0, err
    assert src.startswith("#version 330 core") and expr in src


def test_jiang_flags_are_aliases_of_the_knobs(capsys):
    rc, jiang, err = codegen(capsys, "--size", "64", "-m", "2", "-n", "4", "-p", "16", "-u", "-c", "4")
    assert rc == 0, err
    rc, named, _ = codegen(capsys, "--size", "64", "--mrt_h", "2", "--mrt_w", "4", "--np", "16",
                           "--unroll", "full", "--mc", "1x4")
    assert jiang == named
    assert "mrt=2x4" in jiang and "layout(location = 7) out vec4 out7;" in jiang
    assert "for (int s" not in jiang and "fully unrolled: 4 steps" in jiang


def test_unset_knobs_come_from_the_default_config(capsys):
    rc, default, _ = codegen(capsys, "--size", "256")
    assert rc == 0 and "out=image" in default        # the default is the image path's where it exists
    rc, mrt, _ = codegen(capsys, "--size", "256", "--config", json.dumps({"out": "mrt"}))
    # knobs that name (or only fit) the MRT path complete from the MRT path's default
    rc, partial, _ = codegen(capsys, "--size", "256", "--config", json.dumps({"glsl": "330"}))
    assert partial == mrt
    knobs = header(mrt)
    rc, src, _ = codegen(capsys, "--size", "256", "--config", json.dumps({"mc": "2x2"}))
    assert header(src) == dict(knobs, mc="2x2")
    # --KNOB overrides the JSON
    rc, src, _ = codegen(capsys, "--size", "256", "--config", json.dumps({"mc": "2x2"}), "--mc", "1x2")
    assert header(src)["mc"] == "1x2"


def test_a_default_that_does_not_fit_changes_the_fewest_knobs(capsys):
    # np=8 with mc=1x4 is 2 texel steps a pass: the default unroll (4) cannot divide it.
    rc, src, err = codegen(capsys, "--size", "256", "--out", "mrt", "--np", "8")
    assert rc == 0, err
    h = header(src)
    assert h["np"] == "8" and h["unroll"] in ("1", "2", "full")
    assert re.search(r"changed unroll 4 -> \S+", err)


def test_config_json_and_list_space(capsys):
    cfg = {"glsl": "450", "fetch": "texture", "unroll": 2, "np": 16, "mc": "2x2", "mrt_h": 2, "mrt_w": 1}
    rc, src, _ = codegen(capsys, "--size", "32,32,32", "--config", json.dumps(cfg))
    assert rc == 0 and "#version 450 core" in src and "texture(A," in src
    rc, out, err = codegen(capsys, "--size", "12,10,8", "--list-space")
    assert rc == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    image_knobs = {"out", "block_h", "block_w", "a_src", "b_src", "lang"}
    compute_knobs = {"family", "bm", "bn", "bk", "tm", "tn", "lanes_n", "vec", "pad", "a_t", "db", "ks",
                     "shuffle", "skew", "clamp", "swz", "kred"}
    assert len(lines) > 10 and all(set(c) == set(cfg) | image_knobs | compute_knobs for c in lines)
    assert {c["family"] for c in lines} == {"compute", "fragment"}
    assert all(c["np"] <= 8 and c["mrt_h"] * c["mrt_w"] <= 8 for c in lines)
    assert "valid of" in err


def test_list_knobs(capsys):
    rc, out, _ = codegen(capsys, "--size", "256", "--list-knobs")
    assert rc == 0
    lines = {l.split()[0]: l for l in out.splitlines()}
    assert set(lines) == {"--glsl", "--fetch", "--unroll", "--np", "--mc", "--mrt_h", "--mrt_w",
                          "--out", "--block_h", "--block_w", "--a_src", "--b_src", "--family", "--bm",
                          "--bn", "--bk", "--tm", "--tn", "--lanes_n", "--vec", "--pad", "--a_t", "--db",
                          "--ks", "--shuffle", "--skew", "--clamp", "--swz", "--kred", "--lang"}
    assert "1, 2, 4, 8, full" in lines["--unroll"] and "(default 1)" in lines["--unroll"]   # image default


def test_cuda_knobs_by_name_without_a_gpu(capsys):
    rc, src, err = codegen(capsys, "--backend", "cuda", "--size", "4096", "--BM", "64", "--BN", "64",
                           "--MMA", "0", "--ST", "0")
    assert rc == 0, err
    cfg = json.loads(re.search(r"config: (\{.*\})", src).group(1))
    assert (cfg["BM"], cfg["BN"], cfg["MMA"], cfg["ST"]) == (64, 64, 0, 0)
    rc, _, err = codegen(capsys, "--backend", "cuda", "--size", "4096", "-p", "8")
    assert rc == 2 and "unknown knob --np" in err


@pytest.mark.parametrize("args,msg", [
    (["--size", "32", "-p", "6", "-c", "4"], "whole number of A texels"),
    (["--size", "32", "-m", "4", "-n", "4"], "max_draw_buffers"),
    (["--size", "3,x"], "size must be"),
    (["--size", "32", "--config", "{not json"], "not valid JSON"),
    (["--size", "32", "--unrol", "4"], "unknown knob --unrol for this space (knobs: family, out, lang, glsl, "
                                       "fetch, unroll, np, mc, mrt_h, mrt_w, block_h, block_w, a_src, "
                                       "b_src, bm, bn, bk, tm, tn, lanes_n, vec, pad, a_t, db, ks, "
                                       "shuffle, skew, clamp, swz, kred); did you mean --unroll?"),
    (["--size", "32", "--config", '{"unrol": 4}'], "did you mean --unroll?"),
    (["--size", "32", "--mc", "3x3"], "--mc 3x3: not in its domain for this problem (1x1, 1x2, 1x3, 1x4, 2x2)"),
    (["--size", "32", "--unroll", "16"], "--unroll 16: not in its domain"),
    (["--size", "32", "--mrt", "4"], "--mrt takes HxW"),
    (["--size", "32", "--np"], "--np needs a value"),
    (["--size", "32", "stray"], "unexpected argument 'stray'"),
])
def test_errors_are_one_line(capsys, args, msg):
    rc, _, err = codegen(capsys, *args)
    assert rc == 2 and msg in err and "Traceback" not in err and err.count("\n") == 1, err


def test_module_entry_point():
    r = run_python(None, "-m", "shadertune.codegen", "--size", "16", "--mc", "2x2", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "mc=2x2" in r.stdout


def test_assembly_by_name(capsys):
    """--lang arbfp prints the generated ARBfp program, completed from the ARBfp default
    (unroll full, the GLSL knobs at the values assembly holds); --lang nvfp the NVfp one."""
    rc, src, err = codegen(capsys, "--size", "64", "--lang", "arbfp", "--mc", "2x2", "--np", "16")
    assert rc == 0, err
    assert src.startswith("!!ARBfp1.0") and "mc=2x2" in src and src.count("# k-step") == 8
    rc, src, err = codegen(capsys, "--size", "64", "--lang", "arbfp", "--unroll", "4")
    assert rc == 2 and "arbfp unroll full" in err
    rc, src, err = codegen(capsys, "--size", "64", "--lang", "nvfp", "--unroll", "2", "--np", "32",
                           "--mc", "1x4")
    if rc == 2:                       # this driver runs no NV assembly: not in the space
        assert "--lang nvfp: not in its domain" in err
    else:
        assert src.startswith("!!NVfp4.0") and "REP.S reps.x;" in src


@pytest.mark.parametrize("flag", ["--list-space", "--list-knobs"])
def test_a_listing_takes_no_knobs(capsys, flag):
    rc, out, err = codegen(capsys, "--size", "16", flag, "--np", "4")
    assert rc == 2 and out == "" and "it takes no knobs (given: np)" in err and err.count("\n") == 1, err
