"""Config -> CUDA source: derived constants are computed here, the template
(shaders/cuda/gemm.cu) stays readable CUDA."""
from __future__ import annotations

from ...config import Config
from ...problem import Problem
from ...templates import render, template_hash as _template_hash
from .space import derive

TEMPLATES = ["cuda/gemm.cu"]
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


def params(problem: Problem, config: Config) -> dict:
    """Everything the template needs, knobs and derived constants."""
    c = dict(config)
    d = derive(problem, c)
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
        "config_text": config.key if isinstance(config, Config) else Config(c).key,
        **{k: c[k] for k in ("BM", "BN", "BK", "TM", "TN", "WM", "WN", "VEC", "DB", "KG", "KL", "trans")},
        "FV": d.FV, "lanes_m": d.lanes_m, "lanes_n": d.lanes_n, "warps_n": d.warps_n,
        "threads_mn": d.threads_mn, "threads": d.threads, "KT": d.KT,
        "loads_a": d.loads_a, "loads_b": d.loads_b, "lda_s": d.lda_s, "ldb_s": d.ldb_s,
        "stage_a": d.stage_elems_a, "stage_b": d.stage_elems_b,
    }


def source(problem: Problem, config: Config) -> str:
    return render("cuda/gemm.cu", **params(problem, config))
