"""GLSL code generation for the compute family: a ComputeLayout -> compute shader sources.

Every constant the templates need is derived here (layout.py) and passed
in, so the templates stay readable GLSL.
"""
from __future__ import annotations

from ....core.templates import render
from .layout import ComputeLayout

TEMPLATE = "gl/matmul_compute.comp.j2"
REDUCE_TEMPLATE = "gl/matmul_reduce.comp.j2"
SCALE_TEMPLATE = "gl/matmul_scale.comp.j2"
COMPUTE_GLSL = "450"     # barrier() inside (uniform) loops needs GLSL 4.50
REDUCE_THREADS = 256
_VTYPES = {1: "float", 2: "vec2", 4: "vec4"}
_VCOMPS = {1: ("",), 2: (".x", ".y"), 4: (".x", ".y", ".z", ".w")}
_SWIZZLES = {1: ".x", 2: ".xy", 4: ""}         # a buffer texture's texel is a vec4
MAX_GROUPS = 65535                               # work groups a dispatch dimension may hold


def describe(config) -> str:
    """The knobs a compute program depends on, as its header says them (np is not one:
    passes are dispatches, so one program serves every np and every shape)."""
    return " ".join(f"{k}={config[k]}" for k in sorted(config) if k != "np")


def _log2(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def operand_plans(L: ComputeLayout, config) -> list[dict]:
    """What the template needs to move A and B: per operand its source, how its slab
    lies (stored rows: `along` when shared rows run the same way, else the store turns
    it), its load groups (a group fills whole vec4 words of shared memory: 4 / vec
    vectors along a row, or 4 rows of one vector each when the slab turns), and the
    terms of its global index."""
    plans = []
    # rowvec: vectors between stored rows, a uniform (a view of a larger matrix has its own)
    for name, width, along, row_is_k, origin, bound, rowvec, lds in (
            ("A", L.bm if L.trans_a else L.bk, L.a_along, L.trans_a, "m0", "M", "u_lda", L.lda4),
            ("B", L.bk if L.trans_b else L.bn, L.b_along, not L.trans_b, "n0", "N", "u_ldb", L.ldb4)):
        loads = L.loads_a if name == "A" else L.loads_b
        per_group = L.group_size(along)
        plans.append(dict(
            name=name, p=name.lower(), src=config.get(name.lower() + "_src", "ssbo"),
            skew=L.a_skew if name == "A" else L.b_skew,
            binding=0 if name == "A" else 1, arr=name + "s", ld4name="LD" + name + "4",
            ld4=lds, along=along, row_is_k=row_is_k, origin=origin, bound=bound, rowvec=rowvec,
            off=name.lower() + "off", groups=loads // per_group, per_group=per_group,
            row_shift=_log2(width // 4 if along else width // L.vec),
            row_mask=(width // 4 if along else width // L.vec) - 1))
    return plans


def load_parts(ops: list[dict], db: int) -> tuple[list, list, list]:
    """The load groups of a stage as (operand, groups) pairs: all of them, and with db = 2
    the two halves they are issued in (the first the larger: A's groups, then B's)."""
    flat = [(i, g) for i, op in enumerate(ops) for g in range(op["groups"])]

    def part(pairs):
        return [(op, [g for i, g in pairs if i == n]) for n, op in enumerate(ops)
                if any(i == n for i, _ in pairs)]
    cut = -(-len(flat) // 2)
    halves = (part(flat[:cut]), part(flat[cut:])) if db == 2 else ([], [])
    return part(flat), *halves


def compute_source(L: ComputeLayout, config, probe_warps: bool = False) -> str:
    """The GEMM compute shader of `config` on layout L.  `probe_warps` (a measurement,
    never a tuned kernel) makes it record per SM the highest warp slot it ran in
    (NVIDIA's GL_NV_shader_thread_group) into a buffer at binding 4."""
    ops = operand_plans(L, config)
    whole, half1, half2 = load_parts(ops, L.db)
    return render(
        TEMPLATE, glsl=COMPUTE_GLSL, config_text=describe(config), probe_warps=probe_warps,
        ops=ops, whole=whole, half1=half1, half2=half2,
        SKEW_A=L.a_skew, SKEW_B=L.b_skew, CLAMP=L.clamp, DEFER=L.db > 0, SWZ=L.swz, SHUFFLE=L.shuffle, KRED=L.kred,
        trans_a=L.trans_a, trans_b=L.trans_b,
        BM=L.bm, BN=L.bn, BK=L.bk, TM=L.tm, TN=L.tn, threads=L.threads,
        lanes_m=L.lanes_m, lanes_n=L.lanes_n, warps_n=L.warps_n, WM=L.wm, WN=L.wn,
        VEC=L.vec, vec_shift=_log2(L.vec), vtype=_VTYPES[L.vec], vcomp=_VCOMPS[L.vec], swizzle=_SWIZZLES[L.vec],
        comp=_VCOMPS[4], cvec=L.c_vec, cvec_shift=_log2(L.c_vec), ctype=_VTYPES[L.c_vec],
        lda4=L.lda4, ldb4=L.ldb4, a_rows=L.a_rows,
        nbuf=L.nbuf, a_t=L.a_t, db=L.db, KS=L.ks, unroll=L.unroll)


def _grid(words: int) -> tuple[int, int]:
    groups = -(-words // REDUCE_THREADS)
    x = min(groups, MAX_GROUPS)
    return x, -(-groups // x)


def reduce_groups(L: ComputeLayout) -> tuple[int, int]:
    """The reduce dispatch's (x, y) work groups: one invocation per word of C."""
    return _grid(L.c_floats // L.c_vec)


def scale_groups(L: ComputeLayout) -> tuple[int, int]:
    """The scale dispatch's (x, y) work groups (kred = 1): one invocation per float of C."""
    return _grid(L.c_floats)


def scale_source(L: ComputeLayout) -> str:
    """C = beta * C before atomic splits add into it (kred = 1; scale_uniforms)."""
    return render(SCALE_TEMPLATE, glsl=COMPUTE_GLSL, threads=REDUCE_THREADS)


def scale_uniforms(L: ComputeLayout) -> dict:
    return {"u_count": L.c_floats, "u_row": scale_groups(L)[0] * REDUCE_THREADS}


def reduce_source(L: ComputeLayout) -> str:
    """The split-K reduce shader of layout L (L.ks > 1): one program per splits and store
    width, the shape in uniforms (reduce_uniforms)."""
    return render(REDUCE_TEMPLATE, glsl=COMPUTE_GLSL, KS=L.ks, cvec=L.c_vec, ctype=_VTYPES[L.c_vec],
                  threads=REDUCE_THREADS)


def reduce_uniforms(L: ComputeLayout) -> dict:
    """The reduce program's shape uniforms for layout L."""
    x, _ = reduce_groups(L)
    per = L.M * L.N // L.c_vec
    row = L.N // L.c_vec
    return {"u_per": per, "u_count": L.batch * per, "u_row": x * REDUCE_THREADS,
            "u_c0": 0, "u_ldc": row, "u_roww": row}
