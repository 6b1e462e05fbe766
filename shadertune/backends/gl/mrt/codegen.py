"""GLSL code generation of the render-target path: a config + problem shape -> fragment shader.

out=mrt renders Jiang's multi-render-target kernel (matmul.frag.j2) on the
texture layout of layout.py.
"""
from __future__ import annotations

from ....core.config import Config
from ....errors import InvalidConfig
from ....core.problem import Problem
from ....core.templates import render
from ..fragment import glsl_and_fetch, unroll_factor
from .layout import Layout

TEMPLATE = "gl/matmul.frag.j2"


def plan_layout(problem: Problem, config: Config) -> Layout:
    """The texture layout of `config` for `problem` (InvalidConfig where it has none)."""
    try:
        return Layout.plan(problem.M, problem.N, problem.K, mc=config["mc"], mrt_h=int(config["mrt_h"]),
                           mrt_w=int(config["mrt_w"]), np=int(config["np"]))
    except KeyError as e:
        raise InvalidConfig(f"GL config is missing knob {e.args[0]!r}: {config}") from None
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


def fragment_source(layout: Layout, config: Config) -> str:
    """The fragment shader of `config` on `layout` (plan_layout's)."""
    glsl, fetch = glsl_and_fetch(config)
    a_w, a_h = layout.a_size
    b_w, b_h = layout.b_size
    return render(
        TEMPLATE, glsl=glsl, fetch=fetch, mc=config["mc"], unroll=config.get("unroll", 1),
        unroll_n=unroll_factor(config.get("unroll", 1), layout.steps),
        mc_h=layout.mc_h, mc_w=layout.mc_w, ka=layout.ka, kb=layout.kb, b_sub=layout.b_sub,
        mrt_h=layout.mrt_h, mrt_w=layout.mrt_w, targets=layout.targets,
        np=layout.np, steps=layout.steps, hc=layout.hc, wc=layout.wc,
        a_w=a_w, a_h=a_h, b_w=b_w, b_h=b_h)
