"""Generated assembly kernels (lang=arbfp, nvfp) beside GLSL: codegen, counts, the shared
driver, the space and the search.  ARBfp runs on llvmpipe (Mesa has ARB_fragment_program
in its compatibility profile); NVfp runs where the driver has NV_gpu_program4 (NVIDIA)."""
import re

import numpy as np
import pytest
from numerics import rel_err

from shadertune.backends.gl import space as gl_space_mod
from shadertune.backends.gl.asm.codegen import analyse, asm_source, program_counts
from shadertune.backends.gl.asm.driver import AsmKernel
from shadertune.backends.gl.mrt.layout import Layout, packing
from shadertune.core.config import Config
from shadertune.errors import BuildError
from shadertune.core.problem import Problem
from shadertune.search import Evaluator

ARBFP = dict(lang="arbfp", glsl="330", fetch="texture", unroll="full")
NVFP = dict(lang="nvfp", glsl="330", fetch="texelFetch")
SHAPES = [("1x1", 1, 1), ("1x2", 2, 2), ("1x3", 1, 4), ("1x4", 4, 2), ("2x2", 2, 4), ("1x4", 2, 1)]


def _langs(backend) -> dict:
    return backend.device().limits.get("asm_limits", {})


@pytest.fixture(scope="module")
def arbfp(gl):
    if "arbfp" not in _langs(gl):
        pytest.skip(f"no ARB_fragment_program shades in this context ({gl.device().driver})")
    return gl


@pytest.mark.parametrize("mc, mh, mw", SHAPES)
def test_arbfp_kernels_are_correct_multi_pass_ragged_with_alpha_beta(arbfp, rng, mc, mh, mw):
    """Every packing on several grids, three passes of a ragged K (the last one short),
    M and N not divisible by the blocking, alpha / beta, and into out=."""
    p = Problem(37, 29, 43)
    cfg = Config(**ARBFP, mc=mc, mrt_h=mh, mrt_w=mw, np=16)
    assert arbfp.space(p).why_invalid(cfg) is None
    A, B, C = rng.standard_normal((37, 43)), rng.standard_normal((43, 29)), rng.standard_normal((37, 29))
    with arbfp.build(p, cfg) as k:
        assert k.passes == 3 and k.source.startswith("!!ARBfp1.0")
        assert rel_err(k.run(A, B), A @ B) <= 1e-5
        out = np.zeros((37, 29), np.float32)
        got = k.run(A, B, C, alpha=0.5, beta=-2.0, out=out)
        assert got is out and rel_err(out, 0.5 * (A @ B) - 2.0 * C) <= 1e-5
        times = k.time(repeats=2, warmup=1)
        assert len(times) == 2 and all(t > 0 for t in times)


def test_arbfp_one_pass_and_checked_run_bands(arbfp, rng):
    """One pass (np = K), and the evaluator's checked run split into row bands (a one-pass
    config abandoned early draws a band first): the same product."""
    p = Problem(64, 48, 32)
    A, B = rng.standard_normal((64, 32)), rng.standard_normal((32, 48))
    cfg = Config(**ARBFP, mc="1x4", mrt_h=2, mrt_w=2, np=32)
    with arbfp.build(p, cfg) as k:
        assert k.passes == 1
        C, ms = k.checked_run(A, B, limit_ms=1e9)
        assert ms > 0 and rel_err(C, A @ B) <= 1e-5


@pytest.mark.parametrize("mc, mh, mw", [("1x1", 2, 2), ("1x4", 4, 2), ("2x2", 1, 4)])
def test_counts_predicted_from_one_and_two_steps_are_the_programs_and_the_drivers(arbfp, mc, mh, mw):
    """The space prunes on counts extrapolated from programs of one and two k-steps: they
    equal the counts of the whole program, and the driver's own as ARB_fragment_program
    defines them: ALU and texture instructions exactly, all instructions with or without
    END (Mesa counts it), temporaries and parameters at most ours (a driver may merge equal
    constants).  Texture indirections: Mesa 22 counts none (reads 0); others, ours."""
    ka = packing(mc)[2]
    p = Problem(24, 40, 16 * ka)
    cfg = Config(**ARBFP, mc=mc, mrt_h=mh, mrt_w=mw, np=16 * ka)
    with arbfp.build(p, cfg) as k:
        text = analyse(k.source)
        assert program_counts("arbfp", mc, mh, mw, "full", 16) == text
        got = k.program.counts
        assert (got.alu, got.tex) == (text.alu, text.tex)
        assert got.instructions in (text.instructions, text.instructions - 1)
        assert got.temporaries <= text.temporaries and got.parameters <= text.parameters
        assert got.indirections in (0, text.indirections)


def test_a_program_the_driver_rejects_is_a_compile_failure_with_its_message(arbfp, monkeypatch):
    """The driver's message and where it stopped, recorded as compile_failed: the search
    goes on."""
    real = AsmKernel._compile

    def broken_text(text):
        return text.replace("# k-step 0\n", "# k-step 0\nMAD q, q, nonsense;\n", 1)

    def broken(layout, config):
        return broken_text(asm_source(layout, config))
    monkeypatch.setattr(AsmKernel, "_compile", lambda self, source: real(self, broken_text(source)))
    p = Problem(16, 16, 16)
    cfg = Config(**ARBFP, mc="1x4", mrt_h=1, mrt_w=1, np=8).to_dict()
    with pytest.raises(BuildError, match=r"rejected the arbfp program at line \d+, column \d+"):
        arbfp.build(p, cfg)
    bad = next(i for i, s in enumerate(broken(Layout.plan(16, 16, 16, mc="1x4", np=8), cfg).split("\n"))
               if "nonsense" in s) + 1
    r = Evaluator(arbfp, p, repeats=1, warmup=0)(Config(cfg))
    assert r.status == "compile_failed" and not r.message.endswith("no message")  # the driver's words
    line = int(re.search(r"at line (\d+)", r.message).group(1))
    assert bad <= line <= bad + 1          # the driver's position: where its parser stopped
    # the context is left clean: the next kernel runs
    monkeypatch.setattr(AsmKernel, "_compile", real)
    assert Evaluator(arbfp, p, repeats=1, warmup=0)(Config(cfg)).status == "ok"


def test_hand_written_and_generated_assembly_share_the_backends_context(arbfp):
    from shadertune.backends.gl import handtuned
    p = Problem(8, 8, 8)
    with handtuned.build_assembly(arbfp, p) as k, arbfp.build(p, Config(**ARBFP, mc="1x4", mrt_h=4,
                                                                         mrt_w=1, np=8)) as g:
        assert k.ctx is g.ctx is arbfp.ctx


# --- the space -------------------------------------------------------------------

LIMITS = {"max_draw_buffers": 8, "max_texture_size": 16384, "max_texture_units": 16, "gl_version": 450}


def _fragment(problem, **asm):
    return gl_space_mod.fragment_space(problem, {**LIMITS, "asm_limits": asm})


def test_lang_is_in_the_space_where_the_driver_runs_it():
    p = Problem(64, 64, 64)
    assert _fragment(p).knobs["lang"] == ("glsl",)
    big = {"instructions": 1 << 20, "temporaries": 4096, "parameters": 2048}
    s = _fragment(p, arbfp=big, nvfp=big)
    assert s.knobs["lang"] == ("glsl", "arbfp", "nvfp")
    arb = [c for c in s.configs() if c["lang"] == "arbfp"]
    nv = [c for c in s.configs() if c["lang"] == "nvfp"]
    assert arb and nv
    # assembly holds the GLSL knobs at one value each; ARBfp has no loops
    assert {(c["glsl"], c["fetch"], c["unroll"], c["out"]) for c in arb} == {("330", "texture", "full", "mrt")}
    assert {(c["glsl"], c["fetch"], c["out"]) for c in nv} == {("330", "texelFetch", "mrt")}
    assert {c["unroll"] for c in nv} >= {1, 2, 4, "full"}
    # every packing and grid the GLSL kernels have
    assert {(c["mc"], c["mrt_h"], c["mrt_w"]) for c in arb} == \
        {(c["mc"], c["mrt_h"], c["mrt_w"]) for c in s.configs() if c["lang"] == "glsl"}
    why = s.why_invalid(arb[0].replace(unroll=4))
    assert "arbfp unroll full" in why


def test_assembly_limits_prune_before_anything_is_written():
    """A driver's instruction and indirection limits bound np (a fully unrolled pass grows
    with it); what passes is within the limits by the program's own count."""
    p = Problem(256, 256, 256)
    limits = {"instructions": 600, "indirections": 20, "temporaries": 64, "parameters": 256}
    s = _fragment(p, arbfp=limits)
    arb = [c for c in s.configs() if c["lang"] == "arbfp"]
    assert arb
    for cfg in arb[::max(1, len(arb) // 40)]:
        L = Layout.plan(256, 256, 256, mc=cfg["mc"], mrt_h=cfg["mrt_h"], mrt_w=cfg["mrt_w"], np=cfg["np"])
        assert not analyse(asm_source(L, cfg)).over(limits)
    deep = Config(**ARBFP, out="mrt", mc="1x4", mrt_h=4, mrt_w=2, np=256, block_h=0, block_w=0,
                  a_src="texture", b_src="texture")
    assert "driver's limits" in s.why_invalid(deep)
    assert max(c["np"] for c in arb if c["mc"] == "1x4" and (c["mrt_h"], c["mrt_w"]) == (4, 2)) < 256


def test_configs_stored_before_the_knob_read_as_glsl(gl):
    from shadertune.backends.gl.space import with_defaults
    assert with_defaults({"mc": "1x4", "np": 8})["lang"] == "glsl"
    assert with_defaults({"family": "compute", "bm": 64})["lang"] == "glsl"
    p = Problem(32, 32, 32)
    compute = [c for c in gl.space(p).configs() if c["family"] == "compute"][:1]
    for cfg in compute:
        old = {k: v for k, v in cfg.items() if k != "lang"}
        assert gl.space(p).why_invalid(old) is None


def test_a_partial_assembly_config_completes_from_its_languages_default(arbfp):
    p = Problem(32, 32, 32)
    cfg = arbfp.default_for(p, {"lang": "arbfp"})
    assert cfg["lang"] == "arbfp" and cfg["unroll"] == "full" and cfg["fetch"] == "texture"
    assert arbfp.space(p).why_invalid(cfg.replace(mc="2x2")) is None


@pytest.mark.slow
def test_phased_search_walks_the_assembly_language(arbfp, tmp_path):
    """Fixed to the render-target path, the phased plan runs lang=arbfp as a compiler of
    its own (outer knob), every config verified."""
    from shadertune.search import Budget, tune
    from shadertune.search.restrict import RestrictedBackend
    p = Problem(16, 24, 20)
    # one GLSL combination of the outer knobs (the GLSL version, fetch and unroll ARBfp holds)
    be = RestrictedBackend(arbfp, {"family": ("fragment",), "out": ("mrt",), "lang": ("glsl", "arbfp"),
                                   "glsl": ("330",), "fetch": ("texture",), "unroll": ("full",)})
    e = tune(be, p, strategy="phased", budget=Budget(max_evals=50), repeats=1)
    langs = {r["config"]["lang"] for r in e["results"]}
    assert langs == {"glsl", "arbfp"}
    ok = [r for r in e["results"] if r["status"] == "ok" and r["config"]["lang"] == "arbfp"]
    assert ok and all(r["error"] < 1e-5 for r in ok)


# --- NV_gpu_program4 ---------------------------------------------------------------

def _nvfp(mc="1x4", mh=2, mw=2, np_=32, unroll=2, K=64):
    L = Layout.plan(16, 16, K, mc=mc, mrt_h=mh, mrt_w=mw, np=np_)
    return L, asm_source(L, dict(NVFP, mc=mc, unroll=unroll))


def test_nvfp_program_structure():
    """NVfp4.0 with a REP loop of unroll k-steps (integer texel fetches, one ADD.S a fetch),
    written out when unroll is full; the counts the space prunes on match the text."""
    L, text = _nvfp()
    assert text.startswith("!!NVfp4.0\n") and text.rstrip().endswith("END")
    assert text.count("REP.S reps.x;") == 1 and text.count("ENDREP;") == 1
    assert "INT PARAM reps = { 4, 4, 4, 4 };" in text                 # 8 steps, 2 a loop turn
    body = text.split("REP.S reps.x;")[1].split("ENDREP;")[0]
    fetches = L.mrt_h + L.mrt_w * L.b_sub
    assert body.count("TXF ") == 2 * fetches and body.count("ADD.S ") == 2 * fetches
    assert body.count("MAD ") == 2 * L.targets * 4
    assert len(re.findall(r"result\.color\[\d\]", text)) == L.targets
    assert analyse(text) == program_counts("nvfp", "1x4", 2, 2, 2, L.steps)
    _, full = _nvfp(unroll="full")
    assert "REP" not in full and full.count("# k-step") == L.steps
    assert analyse(full) == program_counts("nvfp", "1x4", 2, 2, "full", L.steps)


@pytest.mark.parametrize("mc", ["1x1", "1x2", "1x3", "2x2"])
def test_nvfp_packings_use_the_glsl_kernels_channel_math(mc):
    _, text = _nvfp(mc=mc, unroll=1, np_=16)
    body = text.split("REP.S reps.x;")[1].split("ENDREP;")[0]
    want = {"1x1": "MAD c0_0, a0, b0_0, c0_0;", "1x2": "MAD c0_0, a0.zzww, b0_1, c0_0;",
            "1x3": "MAD c0_0, a0.w, b0_3, c0_0;", "2x2": "MAD c0_0, a0.yyww, b0_0.zwzw, c0_0;"}
    assert want[mc] in body


def test_nvfp_kernels_run_where_the_driver_has_them(gl, rng):
    if "nvfp" not in _langs(gl):
        pytest.skip("NV_gpu_program4 is NVIDIA's (not on this driver: "
                    f"{gl.device().renderer}); its codegen is checked above")
    p = Problem(37, 29, 43)
    A, B, C = rng.standard_normal((37, 43)), rng.standard_normal((43, 29)), rng.standard_normal((37, 29))
    for mc, mh, mw in SHAPES:
        for unroll in (1, 2, "full"):
            cfg = Config(**NVFP, unroll=unroll, mc=mc, mrt_h=mh, mrt_w=mw, np=16)
            with gl.build(p, cfg) as k:
                assert rel_err(k.run(A, B), A @ B) <= 1e-5, (mc, mh, mw, unroll)
                assert rel_err(k.run(A, B, C, alpha=0.5, beta=-2.0), 0.5 * (A @ B) - 2.0 * C) <= 1e-5



def test_fixing_lang_keeps_the_plans_start_with_the_knobs_the_language_holds(arbfp):
    """`search --fix lang=arbfp` starts the render-target path from its default's blocking
    and depth (4x2 targets of 1x4, np 128), the outer knobs ARBfp holds put in: not from the
    first config in domain order (one target of 1x1 and the shallowest pass, the slowest
    corner of the space at large sizes)."""
    from shadertune.search.restrict import RestrictedBackend
    p = Problem(256, 256, 256)
    sub = RestrictedBackend(arbfp, {"lang": ("arbfp",)}).space(p)
    start = next(s for s in sub.phases.starts() if s["family"] == "fragment")
    assert sub.why_invalid(start) is None
    assert (start["lang"], start["unroll"], start["fetch"]) == ("arbfp", "full", "texture")
    assert (start["mc"], start["mrt_h"], start["mrt_w"], start["np"]) == ("1x4", 4, 2, 128)
