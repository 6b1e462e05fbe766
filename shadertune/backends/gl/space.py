"""The GL knob space (Jiang's, seeds/002) and its pruning.

Knobs: glsl (the 'compiler' stand-in: GLSL version), fetch (the 'profile'
stand-in: texelFetch or normalised texture()), unroll, np, mc, mrt_h, mrt_w.
Pruning uses device limits (draw buffers, texture size, texture units), the
problem's shape (np <= K, no render target made only of padding) and an
instruction budget for unrolled code, all before anything compiles.
"""
from __future__ import annotations

from ...config import Config
from ...problem import Problem
from ...space import Space
from .codegen import FETCH_STYLES, GLSL_VERSIONS, UNROLLS
from .layout import MC_SHAPES, Layout, packing

MRT_SIDES = (1, 2, 4)
# Unrolled body budget: (steps per loop body) x (render targets), a proxy for
# the instruction count of the generated loop body.  Measured on an H200 at 1024
# (mc=1x4, 4x2 targets, unroll=full): a body of 64 runs at full speed, 128 at 0.6x,
# 256 at 0.04x after a 2.5 s compile, 1024 at 0.01x after a 40 s compile.
UNROLL_BUDGET = 128

PHASES = {"outer": ["glsl", "fetch", "unroll"], "refine": "np",
          "groups": [["mc"], ["mrt_h", "mrt_w"]]}


def np_values(K: int) -> list[int]:
    """np domain: every even value up to 64, then 16 evenly spaced values per
    octave (so recursive refinement around any power of two has room), and
    K rounded up to 4 (one pass)."""
    kpad = -(-K // 4) * 4
    vals = set(range(2, min(64, kpad) + 1, 2))
    lo = 64
    while lo < kpad:
        step = max(4, lo // 16)
        vals.update(range(lo, min(2 * lo, kpad) + 1, step))
        lo *= 2
    vals.add(kpad)
    if K % 2 == 0 and K < kpad:
        vals.add(K)
    return sorted(v for v in vals if v <= kpad)


def _steps(cfg) -> int:
    return int(cfg["np"]) // packing(cfg["mc"])[2]


def gl_space(problem: Problem, limits: dict) -> Space:
    M, N, K = problem.M, problem.N, problem.K
    kpad = -(-K // 4) * 4
    max_tex = int(limits.get("max_texture_size", 4096))

    def np_fits_packing(cfg: Config) -> bool:
        """np is a whole number of A texels (4 k for 1xN, 2 k for 2x2)"""
        return int(cfg["np"]) % packing(cfg["mc"])[2] == 0

    def unroll_divides_pass(cfg: Config) -> bool:
        """unroll < steps per pass and divides them (a larger factor is 'full')"""
        u = cfg["unroll"]
        s = _steps(cfg)
        return u == "full" or (u < s and s % u == 0) or (u == 1 and s == 1)

    def unroll_budget(cfg: Config) -> bool:
        """unrolled loop body within the instruction budget"""
        u = cfg["unroll"]
        body = _steps(cfg) if u == "full" else int(u)
        return body * cfg["mrt_h"] * cfg["mrt_w"] <= UNROLL_BUDGET

    layouts: dict = {}

    def layout(mc, mrt_h, mrt_w, np_) -> Layout:
        # the same layout serves several restrictions and every glsl/fetch/unroll value;
        # memoised in a plain dict so that the space pickles (a cluster ships it)
        key = (mc, mrt_h, mrt_w, np_)
        if key not in layouts:
            layouts[key] = Layout.plan(M, N, K, mc=mc, mrt_h=mrt_h, mrt_w=mrt_w, np=np_)
        return layouts[key]

    def layout_of(cfg: Config) -> Layout:
        return layout(cfg["mc"], cfg["mrt_h"], cfg["mrt_w"], cfg["np"])

    def targets_hold_data(cfg: Config) -> bool:
        """every render target holds some of C (no target made only of padding)"""
        L = layout_of(cfg)
        return (L.mrt_h - 1) * L.hc * L.mc_h < M and (L.mrt_w - 1) * L.wc * L.mc_w < N

    def textures_fit(cfg: Config) -> bool:
        """every texture within the device's max texture size"""
        return layout_of(cfg).largest_texture() <= max_tex

    knobs = {
        "glsl": GLSL_VERSIONS,
        "fetch": FETCH_STYLES,
        "unroll": UNROLLS,
        "np": np_values(max(K, 1)),
        "mc": tuple(MC_SHAPES),
        "mrt_h": MRT_SIDES,
        "mrt_w": MRT_SIDES,
    }
    restrictions = [
        "mrt_h * mrt_w <= max_draw_buffers",
        "int(glsl) <= gl_version",
        "3 + mrt_h * mrt_w <= max_texture_units",
        "np <= kpad",
        np_fits_packing,
        unroll_divides_pass,
        unroll_budget,
        targets_hold_data,
        textures_fit,
    ]
    constants = {"max_draw_buffers": int(limits.get("max_draw_buffers", 8)),
                 "gl_version": int(limits.get("gl_version", 330)),
                 "max_texture_units": int(limits.get("max_texture_units", 16)),
                 "kpad": kpad, "M": M, "N": N, "K": K}
    space = Space(knobs, restrictions, constants, phases=PHASES)
    space.phases["start"] = default_config(problem, space).to_dict()
    return space


def default_config(problem: Problem, space: Space) -> Config:
    """A safe, usually fast config: 1x4 packing on 4x2 targets, 128-k passes (the best
    shape measured on an H200, bench-gl), falling back to smaller blockings."""
    kpad = -(-max(problem.K, 1) // 4) * 4
    np_ = min(128, kpad)
    for mc, mh, mw in (("1x4", 4, 2), ("1x4", 2, 2), ("1x4", 1, 1), ("1x1", 1, 1)):
        for unroll in (4, 1, "full"):
            cfg = Config(glsl="330", fetch="texelFetch", unroll=unroll, np=np_, mc=mc, mrt_h=mh, mrt_w=mw)
            if cfg in space:
                return cfg
    configs = space.configs()
    if not configs:
        raise ValueError(f"the GL space for {problem.key} is empty")
    return configs[0]
