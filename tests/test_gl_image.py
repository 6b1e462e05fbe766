"""The image path (out=image): every knob x odd shapes x alpha/beta against float64.

Shapes the blocking does not divide, K and N that end mid-texel (GPU packing),
single and ragged multi-pass runs, both operand sources, both ways of carrying
partial sums across passes, both transfer paths, NaN-poisoned outputs.
"""
import itertools

import numpy as np
import pytest

from shadertune.backends.gl.image.codegen import image_source, plan_layout
from shadertune.backends.gl.image.driver import ImageKernel
from shadertune.backends.gl.image.space import BLOCK_COLS, BLOCK_ROWS, REGISTER_BUDGET
from shadertune.backends.gl.platform.transfer import Transfers
from shadertune.core.config import Config
from shadertune.core.problem import Problem

from numerics import rel_err

# (M, N, K): ragged everywhere (K % 4 = 1, N % 4 = 1); K % 4 = 2 with N aligned; all aligned
SHAPES = [(37, 61, 129), (19, 24, 30), (24, 32, 40)]
BLOCKS = [(h, w) for h, w in itertools.product(BLOCK_ROWS, BLOCK_COLS) if h * w <= REGISTER_BUDGET]
SOURCES = list(itertools.product(("texture", "ssbo"), repeat=2))


def image_cfg(**kw):
    base = dict(out="image", glsl="450", fetch="texelFetch", unroll=1, np=16, mc="1x4", mrt_h=1, mrt_w=1,
                block_h=4, block_w=8, a_src="texture", b_src="texture")
    return Config({**base, **kw})


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(11)
    out = {}
    for M, N, K in SHAPES:
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        C = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        out[(M, N, K)] = A, B, C, A.astype(np.float64) @ B.astype(np.float64)
    return out


def _kernel(backend, p, cfg, carry="rmw", transfers=None):
    """A kernel of cfg on the real context, also for points the device's space prunes."""
    if carry == "rmw" and transfers is None and cfg in backend.space(p):
        return backend.build(p, cfg)
    layout = plan_layout(p, cfg)
    return ImageKernel(backend.ctx, p, cfg, layout, image_source(layout, cfg, carry=carry),
                       pool=backend.pool, transfers=transfers, carry=carry)


# every block once, the four source pairs and the two ragged shapes in turn
CASES = [(SHAPES[i % 2], blk, SOURCES[i % 4]) for i, blk in enumerate(BLOCKS)]


@pytest.mark.parametrize("shape,block,src", CASES,
                         ids=[f"{'x'.join(map(str, s))}-{b[0]}x{b[1]}-A-{a[0]}-B-{a[1]}" for s, b, a in CASES])
def test_every_block_and_operand_source(gl_backend, operands, shape, block, src):
    A, B, _, ref = operands[shape]
    p = Problem(*shape)
    cfg = image_cfg(block_h=block[0], block_w=block[1], a_src=src[0], b_src=src[1], np=12)
    why = gl_backend.space(p).why_invalid(cfg)
    if why is not None:
        # only blocks that would be mostly padding for this shape are pruned
        assert "holds some of C" in why, why
    with _kernel(gl_backend, p, cfg) as k:
        out = k.run(A, B)
        assert out.shape == shape[:2] and out.dtype == np.float32
        assert np.isfinite(out).all(), "an output element was not written"
        assert rel_err(out, ref) <= 1e-5


# K = 129 is 33 A texels: np 8 and 16 end on a one-step pass (the unrolled loop's rest),
# np 12 divides it, np 132 is one pass
@pytest.mark.parametrize("np_,unroll,carry,src", [
    (8, 2, "rmw", ("texture", "ssbo")), (16, 4, "rmw", ("ssbo", "texture")),
    (12, 1, "pingpong", ("texture", "ssbo")), (16, 2, "pingpong", ("ssbo", "ssbo")),
    (132, 1, "rmw", ("texture", "texture"))], ids=str)
def test_passes_unrolling_and_carries(gl_backend, operands, np_, unroll, carry, src):
    A, B, C, ref = operands[SHAPES[0]]
    p = Problem(*SHAPES[0])
    cfg = image_cfg(np=np_, unroll=unroll, a_src=src[0], b_src=src[1], block_h=4, block_w=8)
    with _kernel(gl_backend, p, cfg, carry=carry) as k:
        assert k.passes == -(-33 // (np_ // 4))
        assert rel_err(k.run(A, B), ref) <= 1e-5
        # checked_run in two parts (the first passes timed alone), as the evaluator runs it
        out, ms = k.checked_run(A, B, limit_ms=1e9)
        assert ms > 0 and rel_err(out, ref) <= 1e-5
        assert rel_err(k.run(A, B, C, alpha=-0.5, beta=2.0), -0.5 * ref + 2.0 * C) <= 1e-5


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_alpha_beta_into_out_and_repeated_runs(gl_backend, operands, shape):
    A, B, C, ref = operands[shape]
    p = Problem(*shape)
    with _kernel(gl_backend, p, image_cfg(np=8, b_src="ssbo")) as k:
        out = np.full(shape[:2], np.nan, np.float32)
        got = k.run(A, B, C, alpha=3.0, beta=-1.0, out=out)
        assert got is out and rel_err(out, 3.0 * ref - C) <= 1e-5
        # C may be `out` itself (numpy's out= semantics: beta * out + ...)
        Cs = C.copy()
        k.run(A, B, Cs, alpha=1.0, beta=0.5, out=Cs)
        assert rel_err(Cs, ref + 0.5 * C) <= 1e-5
        # every run starts from Cin, not from what the last one left
        k.run(A, B, C, alpha=1.0, beta=1.0)
        k.time(repeats=2, warmup=1)
        assert rel_err(k.read(0), ref + C) <= 1e-5
        assert rel_err(k.run(A, B), ref) <= 1e-5          # beta = 0 again: C not read


def test_bad_out_arrays_are_refused(gl_backend, operands):
    A, B, _, _ = operands[SHAPES[2]]
    p = Problem(*SHAPES[2])
    with _kernel(gl_backend, p, image_cfg()) as k:
        for bad, msg in [(np.zeros((24, 32)), "float32"), (np.zeros((32, 24), np.float32), "shape"),
                         (np.zeros((24, 64), np.float32)[:, ::2], "C-contiguous")]:
            with pytest.raises(ValueError, match=msg):
                k.run(A, B, out=bad)
        ro = np.zeros((24, 32), np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            k.run(A, B, out=ro)


@pytest.mark.parametrize("mode", ["staged", "direct"])
@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[2]], ids=lambda s: "x".join(map(str, s)))
def test_both_transfer_paths(gl_backend, operands, mode, shape):
    A, B, C, ref = operands[shape]
    p = Problem(*shape)
    tr = Transfers(gl_backend.ctx, mode=mode)
    try:
        for src in SOURCES[1:3]:
            cfg = image_cfg(a_src=src[0], b_src=src[1])
            with _kernel(gl_backend, p, cfg, transfers=tr) as k:
                assert rel_err(k.run(A, B, C, alpha=2.0, beta=1.0), 2.0 * ref + C) <= 1e-5
        assert tr.mode == mode and tr.bytes_up >= 4 * A.size and tr.bytes_down >= 4 * ref.size
    finally:
        tr.release()


def test_poison_shows_unwritten_elements(gl_backend, operands):
    A, B, _, _ = operands[SHAPES[0]]
    p = Problem(*SHAPES[0])
    with _kernel(gl_backend, p, image_cfg()) as k:
        k.run(A, B)
        k.poison()
        assert np.isnan(k.read(0)).all()
    # a kernel that stores nothing leaves every element NaN: the evaluator can tell
    cfg = image_cfg()
    layout = plan_layout(p, cfg)
    src = image_source(layout, cfg).replace("imageStore(C, q,", "if (false) imageStore(C, q,")
    with ImageKernel(gl_backend.ctx, p, cfg, layout, src) as k:
        assert np.isnan(k.run(A, B)).all()


def test_operands_stay_on_the_gpu_across_image_kernels(gl_backend, operands):
    """Every image config holds A and B alike (row-major): a search uploads them once."""
    from shadertune.search.operands import OperandCache
    A, B, _, ref = operands[SHAPES[2]]
    p = Problem(*SHAPES[2])
    cache = OperandCache()
    up = gl_backend.transfers.bytes_up
    for blk in [(4, 8), (8, 4), (2, 16)]:
        with gl_backend.build(p, image_cfg(block_h=blk[0], block_w=blk[1], b_src="ssbo")) as k:
            out, _ = k.checked_run(A, B, cache=cache)
            assert rel_err(out, ref) <= 1e-5
            skipped = k.uploads_skipped
    assert skipped == 2 and gl_backend.transfers.bytes_up - up == A.nbytes + B.nbytes


def test_glsl_330_with_the_extensions_compiles_the_same_kernel(gl_backend, operands):
    """A context older than 4.5 writes image-path shaders as GLSL 330 + ARB extensions."""
    A, B, _, ref = operands[SHAPES[1]]
    p = Problem(*SHAPES[1])
    cfg = image_cfg(glsl="330", a_src="ssbo", b_src="ssbo")
    layout = plan_layout(p, cfg)
    src = image_source(layout, cfg)
    assert "#extension GL_ARB_shader_image_load_store : require" in src
    assert "#extension GL_ARB_shader_storage_buffer_object : require" in src
    with ImageKernel(gl_backend.ctx, p, cfg, layout, src) as k:
        assert rel_err(k.run(A, B), ref) <= 1e-5


@pytest.mark.parametrize("src", [("texture", "texture"), ("ssbo", "ssbo")], ids=lambda s: f"{s[0]}-{s[1]}")
def test_padding_is_rewritten_in_pooled_objects(gl_backend, operands, src):
    """K % 4 = 2 with N aligned: B goes up as it is and its rows past K are zeroed at
    every load, also in pooled objects that held NaN before."""
    A, B, _, ref = operands[SHAPES[1]]
    p = Problem(*SHAPES[1])
    cfg = image_cfg(a_src=src[0], b_src=src[1], np=8)
    with gl_backend.build(p, cfg) as k:
        assert not k.layout.bc_packed_on_gpu and k.layout.a_packed_on_gpu
        for obj in (k.tex_a, k.tex_b):                              # NaN, then back to the pool
            if src[0] == "ssbo":
                obj.write(np.full(obj.size // 4, np.nan, np.float32))
            else:
                obj.write(np.full((obj.height, obj.width, 4), np.nan, np.float32))
    with gl_backend.build(p, cfg) as k:
        assert rel_err(k.run(A, B), ref) <= 1e-5


def test_a_search_records_image_kernels_that_fail_and_goes_on(gl_backend, monkeypatch):
    """A driver that cannot compile the image path: every image config is recorded as
    compile_failed with the compiler's reason, and the search carries on to the MRT path."""
    from shadertune.backends.gl.image import codegen
    from shadertune.search import Budget, tune
    real = codegen._image_source
    monkeypatch.setattr(codegen, "_image_source",
                        lambda *a, **kw: real(*a, **kw).replace("imageStore(C, q,", "imageStore(C, q, q,"))
    from shadertune.search.restrict import RestrictedBackend
    fragment = RestrictedBackend(gl_backend, {"family": ("fragment",)})     # the paths of Jiang's family
    e = tune(fragment, Problem(8, 8, 8), strategy="phased", budget=Budget(max_evals=30), repeats=1,
             warmup=0)
    image = [r for r in e["results"] if r["config"]["out"] == "image"]
    mrt = [r for r in e["results"] if r["config"]["out"] == "mrt"]
    assert image and all(r["status"] == "compile_failed" and "GLSL" in r["message"] for r in image)
    assert any(r["status"] == "ok" for r in mrt) and e["best"]["config"]["out"] == "mrt"
