"""The compute family's knobs of issue 39 on llvmpipe: db = 2 (the prefetch in halves),
skew (a conflict-free transposed store), clamp (loads without checks), swz (the tile
walk in strips), shuffle (subgroup shuffles, gated on the device), kred (splits added
with float atomics) and 16-wide blocks for a thin side; each built, run and checked
against float64 on odd shapes, transposes, alpha/beta and batches (test_gl_compute.py's
cover test runs every value the space offers here too), and what the space, the
cost model and the phase plan say about them.
"""
import collections
import os
import shutil
import subprocess

import numpy as np
import pytest

from shadertune.backends.gl import GLBackend
from shadertune.backends.gl.compute import codegen
from shadertune.backends.gl.compute.driver import ComputeKernel
from shadertune.backends.gl.compute.layout import ADDED_KNOBS, ComputeLayout, one_pass_np as one_pass
from shadertune.backends.gl.compute.model import compute_ms, residency
from shadertune.backends.gl.compute.space import COMPUTE_KNOBS, COMPUTE_PHASES, compute_space
from shadertune.backends.gl.space import compute_default_config, gl_space
from shadertune.errors import InvalidConfig
from shadertune.core.problem import Problem
from shadertune.search.evaluate import Evaluator

from numerics import rel_err

# an H200-like device (compute_units, 48 KB shared, subgroup shuffles and float atomics)
H200 = {"compute": True, "max_compute_shared_bytes": 49152, "max_compute_invocations": 1024,
        "max_compute_groups": [65535] * 3, "max_ssbo_bytes": 1 << 31, "max_texture_buffer_texels": 1 << 27,
        "compute_units": 132, "software_renderer": False, "subgroup_shuffle": True, "atomic_float": True}
BASE = dict(family="compute", out="buffer", glsl="450", bm=64, bn=64, bk=16, tm=8, tn=8, lanes_n=8, vec=2,
            pad=4, a_t=1, db=0, ks=1, unroll="full", a_src="ssbo", b_src="ssbo", **ADDED_KNOBS)

OWN = {k: v for k, v in BASE.items() if k not in ("family", "out", "glsl")}    # compute_space's knobs


@pytest.fixture(scope="module")
def backend():
    return GLBackend()


def operands(p: Problem, seed=0):
    rng = np.random.default_rng(seed)
    a_shape, b_shape = p.stored_shapes
    return (rng.uniform(-1, 1, a_shape).astype(np.float32), rng.uniform(-1, 1, b_shape).astype(np.float32),
            rng.uniform(-1, 1, p.out_shape).astype(np.float32))


def reference(p: Problem, A, B, C, alpha, beta):
    a64, b64 = A.astype(np.float64), B.astype(np.float64)
    prod = np.matmul(np.swapaxes(a64, -1, -2) if p.trans_a else a64,
                     np.swapaxes(b64, -1, -2) if p.trans_b else b64)
    return alpha * prod + (beta * C if beta else 0.0)


def check(kernel, p, alpha=1.5, beta=-0.5, seed=0):
    A, B, C = operands(p, seed)
    got = kernel.run(A, B, C if beta else None, alpha=alpha, beta=beta)
    err = rel_err(got, reference(p, A, B, C, alpha, beta))
    assert np.isfinite(got).all() and err < 1e-5, err


def compute_configs(space, **want):
    """The compute configs of a GL space that hold `want` (the space narrowed: quick)."""
    return space.narrowed({"family": ("compute",), **{k: (v,) for k, v in want.items()}}).configs()


# --- db = 2, clamp, kred, thin blocks: from the space, on odd shapes ------------------
@pytest.mark.parametrize("problem,want", [
    (Problem(37, 53, 29), {"db": 2}),
    (Problem(40, 36, 64, trans_a=True), {"db": 2, "clamp": 1}),
    (Problem(45, 61, 70, trans_b=True, batch=2), {"clamp": 1}),
    (Problem(17, 33, 2100, trans_a=True, trans_b=True), {"kred": 1}),
    (Problem(12, 70, 300, batch=3), {"kred": 1, "bm": 16}),
    (Problem(70, 9, 40), {"bn": 16, "clamp": 1}),
])
def test_new_values_from_the_space_are_right(backend, problem, want):
    configs = compute_configs(backend.space(problem), **want)
    assert configs, f"no config of {want} for {problem.key}"
    pick = [configs[0], configs[len(configs) // 2], configs[-1]]
    for i, cfg in enumerate(pick):
        with backend.build(problem, cfg) as k:
            check(k, problem, *((1.0, 0.0), (2.0, 0.5), (-1.5, 1.0))[i], seed=i)


def test_kred_adds_into_c_without_a_workspace(backend):
    """Splits add into C with atomics: no workspace, no reduce dispatch; beta = 0 starts
    from zeros (over the NaN poison), beta != 0 from a scale dispatch."""
    p = Problem(16, 24, 640)
    cfg = compute_configs(backend.space(p), kred=1, ks=4)[0]
    A, B, C = operands(p, 3)
    with backend.build(p, cfg) as k:
        assert k.reducer is None and k.w_buf is None and k.scaler is not None
        k.load(A, B)
        k.poison()
        assert np.isnan(k.read(0)).all()
        check(k, p, alpha=2.0, beta=0.0)
        check(k, p, alpha=0.5, beta=-2.0)
    whole = cfg.replace(kred=0)
    assert ComputeLayout.plan(p, whole).workspace_floats == 4 * p.M * p.N
    assert ComputeLayout.plan(p, cfg).workspace_floats == 0


def test_skewed_slabs_are_right_for_every_transpose_and_vec(backend):
    for p, vec in ((Problem(40, 36, 64), 2), (Problem(64, 40, 48, trans_a=True), 4),
                   (Problem(36, 64, 64, trans_b=True), 4), (Problem(48, 64, 40, trans_a=True, trans_b=True), 2)):
        configs = compute_configs(backend.space(p), skew=1, vec=vec)
        assert configs, p.key
        for cfg in (configs[0], configs[-1]):
            with backend.build(p, cfg) as k:
                check(k, p)


# --- skew: the turned store's banks ----------------------------------------------------
def store_degree(L: ComputeLayout, cfg) -> int:
    """The most distinct 16-byte words that one quarter warp's turned store puts in one
    of the 8 bank groups (1: conflict-free), by the template's addressing (store())."""
    worst = 1
    shift = L.vec.bit_length() - 1
    for op in codegen.operand_plans(L, cfg):
        if op["along"]:
            continue
        for g in range(op["groups"]):
            for v in range(L.vec):
                for first in range(0, L.threads, 8):
                    words = set()
                    for tid in range(first, first + 8):
                        q = tid + g * L.threads
                        r, c = (q >> op["row_shift"]) << 2, (q & op["row_mask"]) * L.vec
                        words.add((c + v) * L.nbuf * op["ld4"] + (r >> 2) + op["skew"] * (c >> shift))
                    worst = max(worst, max(collections.Counter(w % 8 for w in words).values()))
    return worst


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_skew_makes_every_turned_store_conflict_free(ta, tb):
    p = Problem(256, 256, 256, trans_a=ta, trans_b=tb)
    degrees = collections.defaultdict(set)
    for cfg in compute_space(p, H200).narrowed({"db": (0, 1), "clamp": (0,), "swz": (1,), "kred": (0,),
                                                "shuffle": (0,), "unroll": ("full",), "a_src": ("ssbo",),
                                                "b_src": ("ssbo",), "np": (256,), "ks": (1,)}).configs():
        L = ComputeLayout.of(p, cfg)
        if L.turns and L.vec > 1:
            degrees[cfg["skew"]].add(store_degree(L, cfg))
    assert degrees[1] == {1}
    assert max(degrees[0]) >= 4            # without it, some turned stores conflict 4 ways or more


# --- swz: the walk, built directly (the space offers it only past an L2's bytes) ------
@pytest.mark.parametrize("swz, src", [(2, "ssbo"), (8, "ssbo"), (2, "texture")])
def test_swizzled_walk_covers_every_tile_once(backend, swz, src):
    """10 tile rows: strips of swz rows and a short last strip; a checked run times its
    first tile rows as a band of their own (the walk within the band).  The walk is the
    grid's, whatever the operands are read through."""
    p = Problem(300, 70, 40)
    cfg = BASE | dict(bm=32, bn=32, tm=4, tn=4, swz=swz, np=40, a_src=src, b_src=src)
    L = ComputeLayout.plan(p, cfg)
    assert L.tiles_m == 10
    src = codegen.compute_source(L, cfg)
    assert f"strips of {swz} tile rows" in src
    A, B, C = operands(p, 4)
    k = ComputeKernel(backend.ctx, p, cfg, L, src, pool=backend.pool, transfers=backend.transfers)
    try:
        check(k, p)
        got, ms = k.checked_run(A, B, limit_ms=1e9)
        assert ms > 0 and rel_err(got, reference(p, A, B, C, 1.0, 0.0)) < 1e-5
    finally:
        k.release()


def test_the_space_offers_swz_only_past_an_l2():
    small, large = Problem(2048, 2048, 2048), Problem(4096, 4096, 4096)
    assert "L2" in compute_space(small, H200).why_invalid(OWN | dict(np=2048, swz=8))
    assert compute_space(large, H200).why_invalid(OWN | dict(np=4096, swz=8)) is None
    # swz, skew and clamp also with operands through textures; db = 2, shuffle and kred not
    assert compute_space(large, H200).why_invalid(OWN | dict(np=4096, swz=8, a_src="texture")) is None
    assert compute_space(large, H200).why_invalid(OWN | dict(np=4096, swz=8, clamp=1, a_src="texture")) is None
    assert "main form" in compute_space(large, H200).why_invalid(
        OWN | dict(np=4096, swz=8, db=2, a_src="texture"))
    assert "main form" in compute_space(large, H200).why_invalid(OWN | dict(np=4096, swz=8, unroll=4))


def test_skewed_slabs_read_through_textures_are_right_for_every_transpose(backend):
    for p in (Problem(40, 36, 64), Problem(64, 40, 48, trans_a=True),
              Problem(36, 64, 64, trans_b=True), Problem(48, 64, 40, trans_a=True, trans_b=True)):
        for a_src, b_src in (("texture", "ssbo"), ("ssbo", "texture"), ("texture", "texture")):
            configs = compute_configs(backend.space(p), skew=1, a_src=a_src, b_src=b_src)
            assert configs, (p.key, a_src, b_src)
            with backend.build(p, configs[0]) as k:
                check(k, p, alpha=0.5, beta=-2.0)


@pytest.mark.parametrize("p,a_src,b_src,db", [(Problem(45, 38, 53), "texture", "ssbo", 1),
                                              (Problem(38, 45, 70, trans_a=True, trans_b=True), "ssbo", "texture", 0),
                                              (Problem(40, 52, 37, trans_b=True), "texture", "texture", 1)])
def test_clamped_loads_through_textures_are_right(backend, p, a_src, b_src, db):
    """clamp reads a row or column past the matrix at the last one whatever reads it: a
    texture's index is the buffer's (ragged M, N and K; a prefetch or not)."""
    configs = compute_configs(backend.space(p), clamp=1, a_src=a_src, b_src=b_src, db=db)
    assert configs, (p.key, a_src, b_src, db)
    with backend.build(p, configs[len(configs) // 2]) as k:
        check(k, p, alpha=1.5, beta=0.5)


# --- shuffle: gated on the device ------------------------------------------------------
def test_shuffle_is_an_invalid_config_without_subgroup_shuffles(backend):
    """A device without subgroup shuffles offers no shuffle config; one asked for is an
    invalid config with its reason (the evaluator records it), never a crash."""
    p = Problem(64, 64, 64)
    no_shuffle = dict(backend.device().limits, subgroup_shuffle=False)
    cfg = BASE | dict(np=64, shuffle=1)
    assert all(c["shuffle"] == 0 for c in compute_space(p, no_shuffle).configs())
    assert "subgroup shuffles" in compute_space(p, no_shuffle).why_invalid(OWN | dict(np=64, shuffle=1))
    if not backend.device().limits.get("subgroup_shuffle"):          # llvmpipe
        with pytest.raises(InvalidConfig, match="subgroup"):
            backend.build(p, cfg)
        result = Evaluator(backend, p, repeats=1)(backend.space(p).canonical(cfg))
        assert result.status == "invalid" and "subgroup" in result.message
    h200 = [c for c in compute_space(p, H200).configs() if c["shuffle"] == 1]
    assert h200 and all(c["a_t"] == 1 and c["lanes_n"] >= c["tm"] for c in h200)


def glslang() -> str | None:
    return shutil.which("glslangValidator")


@pytest.mark.skipif(glslang() is None, reason="glslangValidator not installed (the GPU batch runs shuffle)")
@pytest.mark.parametrize("extra", [{}, {"unroll": 4}, {"skew": 1, "pad": 0}, {"db": 2, "clamp": 1},
                                   {"tm": 4, "lanes_n": 4}])
def test_shuffle_source_compiles_with_glslang(tmp_path, extra):
    """llvmpipe has no subgroup shuffles: the shuffle variant's GLSL is checked by Khronos'
    reference compiler (and run against float64 by the GPU batch)."""
    p = Problem(64, 64, 64)
    cfg = BASE | dict(np=64, shuffle=1) | extra
    src = codegen.compute_source(ComputeLayout.plan(p, cfg), cfg)
    path = tmp_path / "k.comp"
    path.write_text(src)
    r = subprocess.run([glslang(), str(path)], capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr


# --- the device limit, the space's rules, the model, the plan ---------------------------
def test_device_reports_float_atomics_and_kred_needs_them(backend):
    limits = backend.device().limits
    assert "atomic_float" in limits
    p = Problem(16, 24, 640)
    atomic = next(c for c in compute_space(p, dict(limits, atomic_float=True)).configs() if c["kred"])
    without = compute_space(p, dict(limits, atomic_float=False))
    assert all(c["kred"] == 0 for c in without.configs())
    assert "float atomics" in without.why_invalid(atomic)


def test_db2_halves_the_prefetch_and_the_registers():
    p = Problem(4096, 4096, 4096)
    one, two = (ComputeLayout.plan(p, BASE | dict(bm=128, bn=128, np=4096, db=d)) for d in (1, 2))
    assert two.in_flight * 2 == one.in_flight and two.registers < one.registers
    assert residency(two, H200) == 2 > residency(one, H200) == 1
    whole, first, second = codegen.load_parts(codegen.operand_plans(two, BASE), 2)
    groups = sorted((op["name"], g) for part in (first, second) for op, gs in part for g in gs)
    assert groups == sorted((op["name"], g) for op, gs in whole for g in gs) and first and second


def test_cost_model_reads_the_new_knobs():
    p = Problem(4096, 4096, 4096)
    base = BASE | dict(bm=128, bn=128, np=4096)
    plain, clamped, shuffled, db2, db1 = compute_ms(
        p, [base, base | {"clamp": 1}, base | {"shuffle": 1}, base | {"db": 2}, base | {"db": 1}], H200)
    assert clamped < plain < shuffled          # fewer instructions; more of the shared pipe
    assert db2 < db1                           # db = 1 costs the second workgroup a unit
    skinny = Problem(64, 4096, 4096)
    split = base | dict(bm=64, np=4096, ks=16)
    reduce_ms, atomic_ms = compute_ms(skinny, [split, split | {"kred": 1}], H200)
    assert atomic_ms < reduce_ms               # no workspace read back in a dispatch of its own
    wide = Problem(8192, 8192, 8192)
    walk, strips = compute_ms(wide, [base | dict(np=8192), base | dict(np=8192, swz=8)], H200)
    assert strips <= walk


def test_phase_plan_names_every_compute_knob_once():
    named = [k for group in COMPUTE_PHASES.groups for k in group] + [COMPUTE_PHASES.refine]
    own = set(COMPUTE_KNOBS) | {"np", "unroll", "a_src", "b_src"}
    assert sorted(named) == sorted(own)


def test_configs_stored_before_the_knobs_read_as_off(backend):
    """A compute config without the knobs added since (the pre-tuned table's, a store's)
    is the kernel those configs ran: every new knob off."""
    p = Problem(64, 64, 64)
    old = {k: v for k, v in (BASE | dict(np=64)).items() if k not in ADDED_KNOBS}
    canonical = backend.space(p).canonical(old)
    assert {k: canonical[k] for k in ADDED_KNOBS} == ADDED_KNOBS
    assert codegen.compute_source(ComputeLayout.plan(p, old), old) == \
        codegen.compute_source(ComputeLayout.plan(p, canonical), old)


SHUFFLE_BY_SHARED = """
shared vec4 shuffle_x_[{threads}];
// subgroupShuffle over subgroups of 32 consecutive invocations, through shared memory
// (called in uniform control flow by every invocation, as the variant calls it)
vec4 subgroupShuffle(vec4 v, uint id) {{
    const int me = int(gl_LocalInvocationIndex);
    shuffle_x_[me] = v;
    memoryBarrierShared();
    barrier();
    const vec4 got = shuffle_x_[(me & ~31) + int(id)];
    memoryBarrierShared();
    barrier();
    return got;
}}
"""


@pytest.mark.parametrize("p,extra", [
    (Problem(37, 53, 40), {"vec": 1}),
    (Problem(64, 48, 100, trans_b=True, batch=2), {"unroll": 4, "lanes_n": 16, "bn": 128}),
    (Problem(40, 72, 64, trans_a=True), {"skew": 1, "pad": 0, "db": 2, "clamp": 1}),
    (Problem(33, 40, 48), {"tm": 4, "lanes_n": 4, "bm": 32, "bn": 64, "vec": 1, "db": 1}),
])
def test_shuffle_lane_arithmetic_with_the_shuffle_emulated(backend, p, extra):
    """The shuffle variant's words, rows and source lanes, run on llvmpipe with
    subgroupShuffle emulated through shared memory (llvmpipe has no subgroup shuffles; the
    GPU batch's sweep runs the real one)."""
    cfg = BASE | dict(np=one_pass(p.K), shuffle=1) | extra
    L = ComputeLayout.plan(p, cfg)
    src = codegen.compute_source(L, cfg)
    src = "\n".join(line for line in src.splitlines() if "GL_KHR_shader_subgroup" not in line)
    src = src.replace("void main() {", SHUFFLE_BY_SHARED.format(threads=L.threads) + "\nvoid main() {", 1)
    assert "subgroupShuffle(ash" in src
    k = ComputeKernel(backend.ctx, p, cfg, L, src, pool=backend.pool, transfers=backend.transfers)
    try:
        check(k, p)
    finally:
        k.release()


# --- db: the zero of a value outside the matrix selected at the store ----------------
@pytest.mark.parametrize("ta,tb,db,clamp", [(False, False, 1, 0), (True, False, 2, 0), (False, True, 1, 1),
                                            (True, True, 2, 1)])
def test_prefetched_values_outside_the_matrix_are_zero_when_stored(backend, ta, tb, db, clamp):
    """With a prefetch across the FMAs (db >= 1) a load keeps the fetched value and the
    store selects zero for one outside the matrix (a select at the load would make the
    invocation wait for it before its FMAs).  Ragged M, N and K (a partial last stage),
    and a huge value at index 0 (where an outside load reads): one not zeroed shows."""
    p = Problem(45, 38, 53, trans_a=ta, trans_b=tb)
    cfgs = compute_configs(backend.space(p), db=db, clamp=clamp, ks=1)
    assert cfgs, (p.key, db, clamp)
    cfg = cfgs[len(cfgs) // 3]
    src = codegen.compute_source(ComputeLayout.plan(p, cfg), cfg)
    assert "ok ? v :" not in src                 # no select at the load
    A, B, C = operands(p, seed=db + 2 * clamp)
    A.flat[0] = B.flat[0] = 1e18
    with backend.build(p, cfg) as k:
        got = k.run(A, B, C, alpha=1.0, beta=0.5)
    want = reference(p, A, B, C, 1.0, 0.5)
    inside = np.abs(want) < 1e10             # outputs that read index 0 honestly are huge
    assert np.isfinite(got).all()
    assert rel_err(got[inside], want[inside]) < 1e-5


def test_a_clamped_prefetch_hides_latency_with_half_the_warps():
    """The cost model: db = 1 with unchecked loads (clamp) at 8 warps a unit ranks with the
    one-slab tile at 16 (measured 0.96-0.99x on the H200), with checked loads below it
    (0.77-0.82x); 128 x 128 blocks of 8 x 16 prefetched and clamped rank first at 4096 (1.08x
    measured), and are the untuned default there."""
    p = Problem(4096, 4096, 4096)
    base = BASE | dict(bm=128, bn=128, np=4096)
    one_slab, checked, clamped, wide = compute_ms(p, [base, base | {"db": 1}, base | {"db": 1, "clamp": 1},
                                                      base | dict(tm=8, tn=16, bk=8, lanes_n=4, db=1, clamp=1)],
                                                  H200)
    assert clamped == pytest.approx(one_slab, rel=0.05) and checked > 1.1 * one_slab
    assert wide < min(one_slab, clamped)
    limits = dict(H200, max_draw_buffers=8, max_texture_size=16384, max_texture_units=16, gl_version=450)
    first = compute_default_config(p, gl_space(p, limits))
    assert (first["bm"], first["bn"], first["tm"], first["tn"], first["db"], first["clamp"]) == (128, 128, 8, 16, 1, 1)
