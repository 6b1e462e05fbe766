"""GLSL code generation: a GL config + problem shape -> fragment shader source."""
from __future__ import annotations

from ...config import Config
from ...errors import InvalidConfig
from ...templates import render, template_hash
from .layout import Layout

TEMPLATE = "gl/matmul.frag.j2"
VERTEX = "gl/fullscreen.vert"

GLSL_VERSIONS = ("330", "450")
FETCH_STYLES = ("texelFetch", "texture")
UNROLLS = (1, 2, 4, 8, "full")


def plan_layout(M: int, N: int, K: int, config: Config) -> Layout:
    try:
        return Layout.plan(M, N, K, mc=config["mc"], mrt_h=int(config["mrt_h"]),
                           mrt_w=int(config["mrt_w"]), np=int(config["np"]))
    except KeyError as e:
        raise InvalidConfig(f"GL config is missing knob {e.args[0]!r}: {config}") from None
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


def unroll_factor(unroll, steps: int) -> int:
    """Steps per loop iteration; 'full' (or a factor >= steps) unrolls the whole pass."""
    if unroll == "full":
        return steps
    u = int(unroll)
    if u < 1:
        raise InvalidConfig(f"unroll must be a positive int or 'full', got {unroll!r}")
    if u >= steps:
        return steps
    if steps % u:
        raise InvalidConfig(f"unroll={u} does not divide the {steps} steps of a pass (np/ka)")
    return u


def fragment_source(layout: Layout, config: Config) -> str:
    glsl = str(config.get("glsl", "330"))
    fetch = config.get("fetch", "texelFetch")
    if glsl not in GLSL_VERSIONS:
        raise InvalidConfig(f"glsl must be one of {GLSL_VERSIONS}, got {glsl!r}")
    if fetch not in FETCH_STYLES:
        raise InvalidConfig(f"fetch must be one of {FETCH_STYLES}, got {fetch!r}")
    a_w, a_h = layout.a_size
    b_w, b_h = layout.b_size
    return render(
        TEMPLATE, glsl=glsl, fetch=fetch, mc=config["mc"], unroll=config.get("unroll", 1),
        unroll_n=unroll_factor(config.get("unroll", 1), layout.steps),
        mc_h=layout.mc_h, mc_w=layout.mc_w, ka=layout.ka, kb=layout.kb, b_sub=layout.b_sub,
        mrt_h=layout.mrt_h, mrt_w=layout.mrt_w, targets=layout.targets,
        np=layout.np, steps=layout.steps, hc=layout.hc, wc=layout.wc,
        a_w=a_w, a_h=a_h, b_w=b_w, b_h=b_h)


def templates_hash() -> str:
    return template_hash(TEMPLATE, VERTEX)
