"""GLSL code generation of the image path: a config + problem shape -> fragment shader.

out=image renders the image-store kernel (matmul_image.frag.j2) on the row-major
layout of layout.py.
"""
from __future__ import annotations

from ....core.config import Config
from ....errors import InvalidConfig
from ....core.problem import Problem
from ....core.templates import render
from ..fragment import glsl_and_fetch, unroll_factor
from .layout import ImageLayout

TEMPLATE = "gl/matmul_image.frag.j2"
CARRIES = ("rmw", "pingpong")


def plan_layout(problem: Problem, config: Config) -> ImageLayout:
    """The layout of `config` for `problem` (InvalidConfig where it has none)."""
    try:
        return ImageLayout.plan(problem.M, problem.N, problem.K, rows=int(config["block_h"]),
                                cols=int(config["block_w"]), np=int(config["np"]))
    except KeyError as e:
        raise InvalidConfig(f"GL config is missing knob {e.args[0]!r}: {config}") from None
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


def image_source(layout: ImageLayout, config: Config, carry: str = "rmw") -> str:
    """The fragment shader of `config` on `layout` (plan_layout's).  `carry` is how
    partial sums cross passes: 'rmw', read and rewritten in place by the owning
    fragment (the kernels the space holds), or 'pingpong' between two images (kept to
    measure the choice; notes/gl.md)."""
    glsl, _ = glsl_and_fetch(config)
    return _image_source(layout, config, glsl, carry)


def _image_source(L: ImageLayout, config, glsl: str, carry: str) -> str:
    srcs = {}
    for knob in ("a_src", "b_src"):
        srcs[knob] = config.get(knob, "texture")
        if srcs[knob] not in ("texture", "ssbo"):
            raise InvalidConfig(f"{knob} must be 'texture' or 'ssbo', got {srcs[knob]!r}")
    if carry not in CARRIES:
        raise InvalidConfig(f"carry must be one of {CARRIES}, got {carry!r}")
    return render(
        TEMPLATE, glsl=glsl, unroll=config.get("unroll", 1),
        unroll_n=unroll_factor(config.get("unroll", 1), L.steps), carry=carry,
        rows=L.rows, cols=L.cols, ct=L.col_texels, np=L.np, hc=L.hc, wc=L.wc,
        M=L.M, KA=L.KA, NB=L.NB, **srcs)
