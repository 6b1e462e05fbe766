"""Config -> CUDA source: derived constants are computed here, the templates
(shaders/cuda/gemm.cu, FFMA; gemm_dmma.cu, float64 DMMA mma.sync; gemm_mma.cu,
3xTF32 mma.sync; gemm_wgmma.cu, 3xTF32 warpgroup MMA; gemm_wgmma_ps.cu, the same on
operands split and packed by a first kernel) stay readable CUDA. Each fills the
blocks of one frame, gemm_base.cu (title, constants, helpers, prologue, main
loop, epilogue), which adds the K_G split's tail they share."""
from __future__ import annotations

from ...core.config import Config
from ...core.problem import Problem
from ...core.templates import render, template_hash as _template_hash
from . import dmma, streamk
from .space import complete, derive, extra_regs, scatters

TEMPLATES = ["cuda/gemm_base.cu", "cuda/streamk_loop.cu", "cuda/streamk_fixup.cu", "cuda/gemm.cu", "cuda/gemm_mma.cu", "cuda/gemm_wgmma.cu", "cuda/gemm_wgmma_ps.cu", "cuda/gemm_dmma.cu",
             "cuda/wgmma_ops.cu", "cuda/wgmma_threads.cu", "cuda/pack_split.cu", "cuda/signature.cu",
             "cuda/block_range.cu", "cuda/mma_prologue.cu", "cuda/mma_copy.cu", "cuda/mma_epilogue.cu",
             "cuda/mma_pipeline.cu", "cuda/dmma_pipeline.cu", "cuda/cp_async.cu", "cuda/cp_async_pinned.cu", "cuda/splitk_last_block.cu", "cuda/splitk_reduce.cu",
             "cuda/partials_sum.cu"]
KERNEL = "st_gemm"

_VEC_TYPES = {  # (dtype, VEC) -> (type, zero value)
    ("float32", 1): ("float", "0.0f"),
    ("float32", 2): ("float2", "make_float2(0.0f, 0.0f)"),
    ("float32", 4): ("float4", "make_float4(0.0f, 0.0f, 0.0f, 0.0f)"),
    ("float64", 1): ("double", "0.0"),
    ("float64", 2): ("double2", "make_double2(0.0, 0.0)"),
}
_COMPS = [".x", ".y", ".z", ".w"]


def template_hash() -> str:
    return _template_hash(*TEMPLATES)


def load_layout(problem: Problem, c, d) -> tuple[int, int, int, int]:
    """(RA, PA, RB, PB): rows of each stored block tile and how many VEC-wide
    vectors of a row sit side by side in the load index. Where the shared
    store transposes (scalar stores) and a row holds >= 4 sectors, a group
    covers 32 bytes (one sector), so a warp spans >= 16 rows and its scattered
    stores fall in distinct banks; elsewhere a group is a whole row (the plain
    row-major order)."""
    it = problem.itemsize
    scatter_a, scatter_b = scatters(problem, c)
    vec = c["VEC"]
    grain = max(1, 32 // (vec * it))
    ra, cva = (d.KT, c["BM"] // vec) if problem.trans_a else (c["BM"], d.KT // vec)
    rb, cvb = (c["BN"], d.KT // vec) if problem.trans_b else (d.KT, c["BN"] // vec)
    # Only rows of >= 4 groups are regrouped: there the plain map puts a warp
    # on <= 4 rows (>= 4-way store conflicts; 16-way for ICA's KT = 256).
    # Shorter rows keep the plain map (<= 2-way, fewer L1 wavefronts per load;
    # the DeepBench KT = 16 configs were measured on it).
    pa = grain if scatter_a and cva >= 4 * grain else cva
    pb = grain if scatter_b and cvb >= 4 * grain else cvb
    return ra, pa, rb, pb


# The K_G reduce kernel's blocks are 256 threads: RX elements x RZ lanes of z.
REDUCE_THREADS = 256
# RZ doubles (up to min(8, KG)) while M * N * RZ is under this many threads:
# ~one 256-thread block per SM. Large outputs (DeepBench: M * N >= 40960) get
# RZ = 1, one thread per element summing all KG partials with independent
# loads; small ones (ICA 32^2: 1024) RZ = 8, 8x the blocks.
REDUCE_FILL = 32768


def reduce_shape(problem: Problem, config) -> tuple[int, int]:
    """(RX, RZ) of the second kernel of a K_G split (KR = 0)."""
    kg, mn = config["KG"], problem.M * problem.N
    rz = 1
    while rz < min(8, kg) and mn * rz < REDUCE_FILL:
        rz *= 2
    assert kg % rz == 0, (kg, rz)
    return REDUCE_THREADS // rz, rz


def _rowcol(X: str, grouped: bool) -> str:
    """The load index -> (row r, element column c) statement for operand X.
    The plain row-major map is written as such (not as the grouped formula
    with P = a row, which is equal but costs a register and a few integer ops
    per load: the compiler cannot prove idx < R * P)."""
    if grouped:
        return f"const int r = (idx / P{X}) % R{X}, c = (idx % P{X} + idx / (P{X} * R{X}) * P{X}) * VEC;"
    return f"const int r = idx / P{X}, c = (idx % P{X}) * VEC;"


def batch_params(problem: Problem, config) -> dict:
    """What every template needs for a batch (shaders/cuda/block_range.cu): nothing
    changes the source of a single product; a batch adds the operands'
    per-product strides as two trailing kernel arguments (elements, 0 for a
    broadcast operand) and the M tiles of one product."""
    if problem.batch == 1:
        return {"batch": 1, "mtiles": 1, "batch_args": "", "wsplit": "M * N"}
    return {"batch": problem.batch, "mtiles": -(-problem.M // config["BM"]),
            "batch_args": ", const long long sA, const long long sB", "wsplit": "WSPLIT"}


def streamk_params(problem: Problem, c, d) -> dict:
    """What the stream-K loop needs (SK > 0): its unit index type."""
    if not c["SK"]:
        return {}
    return {"sk_t": streamk.index_type(streamk.shape(problem, c["BM"], c["BN"], d.KT)[2])}


def params(problem: Problem, config: Config) -> dict:
    """Everything the template needs, knobs and derived constants."""
    c = dict(complete(config))
    d = derive(problem, c)
    ra, pa, rb, pb = load_layout(problem, c, d)
    scatter_a, scatter_b = scatters(problem, c)
    rx, rz = reduce_shape(problem, c)
    fp32 = problem.dtype == "float32"
    vec_t, vec_zero = _VEC_TYPES[(problem.dtype, c["VEC"])]
    return {
        "kernel": KERNEL,
        "T": "float" if fp32 else "double",
        "vec_t": vec_t, "vec_zero": vec_zero,
        "frag_t": "float4" if fp32 else "double2",
        "comp": _COMPS[:c["VEC"]] if c["VEC"] > 1 else [""],
        "fcomp": _COMPS[:d.FV],
        "trans_a": problem.trans_a, "trans_b": problem.trans_b,
        "c_vec": problem.N % d.FV == 0,
        "config_text": Config(c).key,
        **{k: c[k] for k in ("BM", "BN", "BK", "TM", "TN", "WM", "WN", "VEC", "DB", "ST", "KG", "KL", "KR", "SK", "trans")},
        "PS": 0,
        "scatter_a": scatter_a, "scatter_b": scatter_b,
        "async_a": bool(c["ST"]) and not scatter_a, "async_b": bool(c["ST"]) and not scatter_b,
        "vbytes": c["VEC"] * problem.itemsize,
        "nbuf": c["ST"] or (2 if c["DB"] else 1),
        "ra": ra, "pa": pa, "rb": rb, "pb": pb,
        "rowcol_a": _rowcol("A", ra * pa < d.loads_a * d.threads),
        "rowcol_b": _rowcol("B", rb * pb < d.loads_b * d.threads),
        # kbeg/kend: z * k_units / KG in 32 bits where it fits (no 64-bit division)
        "kgran": d.kgran, "split_t": "unsigned" if d.k_units * c["KG"] < 2 ** 32 else "unsigned long long",
        "rx": rx, "rz": rz,
        "FV": d.FV, "lanes_m": d.lanes_m, "lanes_n": d.lanes_n, "warps_n": d.warps_n,
        "threads_mn": d.threads_mn, "threads": d.threads, "KT": d.KT,
        "loads_a": d.loads_a, "loads_b": d.loads_b, "lda_s": d.lda_s, "ldb_s": d.ldb_s,
        "stage_a": d.stage_elems_a, "stage_b": d.stage_elems_b,
        **batch_params(problem, c),
    }


def _tile_offsets_fit(problem: Problem, c, KT: int) -> bool:
    side = max(c["BM"], c["BN"], KT)
    return (side + 1) * max(problem.M, problem.N, problem.K) < 2 ** 32


def params_mma(problem: Problem, config: Config) -> dict:
    """What the mma.sync kernels need: gemm_mma.cu (MMA = 3, float) and
    gemm_dmma.cu (MMA = 1, double)."""
    c = dict(complete(config))
    d = derive(problem, c)
    rx, rz = reduce_shape(problem, c)
    return {
        "kernel": KERNEL, "config_text": Config(c).key, "T": "float" if problem.dtype == "float32" else "double",
        "trans_a": problem.trans_a, "trans_b": problem.trans_b,
        **{k: c[k] for k in ("BM", "BN", "BK", "WM", "WN", "VEC", "ST", "KG", "KR", "SK", "PS")},
        "warps_n": d.warps_n, "threads": d.threads,
        "loads_a": d.loads_a, "loads_b": d.loads_b, "lda_s": d.lda_s, "ldb_s": d.ldb_s,
        "stage_a": d.stage_elems_a, "stage_b": d.stage_elems_b,
        "vbytes": c["VEC"] * problem.itemsize,
        "kgran": d.kgran, "split_t": "unsigned" if d.k_units * c["KG"] < 2 ** 32 else "unsigned long long",
        "n_even": problem.N % 2 == 0,
        # mma_copy.cu's per-copy offsets from a stage's corner (< a tile side times
        # a matrix side) in 32 bits where they fit: one register a copy, and an
        # address is the pinned corner plus the offset scaled (LEA, LEA.HI.X)
        "off_t": "unsigned" if _tile_offsets_fit(problem, c, d.KT) else "unsigned long long",
        # the K_G reductions shared with gemm.cu (splitk_*.cu)
        "FV": d.FV, "c_vec": problem.N % d.FV == 0, "fcomp": _COMPS[:d.FV], "rx": rx, "rz": rz,
        "pair_t": "float2" if problem.dtype == "float32" else "double2",
        "acc_t": "float" if problem.dtype == "float32" else "double",
        **batch_params(problem, c),
        **streamk_params(problem, c, d),
    }


def params_wgmma(problem: Problem, config: Config) -> dict:
    """What gemm_wgmma.cu needs (the MMA = 4 kernel): gemm_mma.cu's values
    and the wgmma's accumulator operands, WN/2 registers written out."""
    c = dict(complete(config))
    nreg, ni = c["WN"] // 2, c["WN"] // 8
    return {
        **params_mma(problem, config),
        "AR": c["AR"],
        "wgmma_nreg": nreg,
        "wgmma_regs": ", ".join(f"%{r}" for r in range(nreg)),
        "wgmma_outs": ", ".join(f'"+f"(d[{j}][{q}])' for j in range(ni) for q in range(4)),
    }


def source(problem: Problem, config: Config) -> str:
    c = complete(config)
    mma = c["MMA"]
    if mma == 4:
        name = "cuda/gemm_wgmma_ps.cu" if c["PS"] else "cuda/gemm_wgmma.cu"
        return render(name, **params_wgmma(problem, config))
    if mma == dmma.MMA:
        return render("cuda/gemm_dmma.cu", **params_mma(problem, c),
                      **dmma.params(c, derive(problem, c), extra_regs(problem, c["SK"])))
    if mma:
        return render("cuda/gemm_mma.cu", **params_mma(problem, config))
    return render("cuda/gemm.cu", **params(problem, config))
