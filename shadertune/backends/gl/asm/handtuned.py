"""The hand-written assembly baseline: ARB_fragment_program, run as generated assembly is.

Jiang found part of the gap to GPUbench's expert code in the high-level
language.  This runs the expert 4x4 RGBA + 4-MRT algorithm written as an
ARBfp1.0 program (shaders/gl/handtuned/expert_4x4_mrt.arbfp.j2) through the
assembly kernels' driver (driver.py): the backend's own context (a
compatibility-profile one where the driver offers it), the same texture
layout, multi-pass ping-pong, transfers and timing as every other kernel.
Contexts where no ARB_fragment_program shades report that and skip.
"""
from __future__ import annotations

from ....core.config import Config
from ....errors import InvalidConfig
from ....core.problem import Problem
from ....core.templates import render
from ..mrt.layout import Layout
from .codegen import float_constant
from .driver import AsmKernel, available_langs

TEMPLATE = "gl/handtuned/expert_4x4_mrt.arbfp.j2"


def supported(backend) -> tuple[bool, str]:
    """Whether the assembly baseline can run here, with a note why not."""
    try:
        ctx = backend.ctx
    except Exception as e:
        return False, f"assembly baseline skipped: no GL context: {e}"
    renderer = ctx.info.get("GL_RENDERER", "?")
    if "arbfp" not in available_langs(ctx):
        return False, (f"assembly baseline skipped: {renderer} runs no ARB_fragment_program in this "
                       f"context ({ctx.info.get('GL_VERSION', '?')}; assembly needs a compatibility-profile "
                       "context with GL_ARB_fragment_program)")
    return True, f"ARB_fragment_program on {renderer}"


def source(layout: Layout) -> str:
    """The hand-written program for `layout` (its steps written out, its constants put in)."""
    a_w, a_h = layout.a_size
    b_w, b_h = layout.b_size
    c_w, c_h = layout.cfull_size
    return render(TEMPLATE, steps=layout.steps, hc=layout.hc, wc=layout.wc, a_w=a_w, a_h=a_h, b_w=b_w,
                  b_h=b_h, c_w=c_w, c_h=c_h, num=float_constant)


def build(backend, problem: Problem, np: int | None = None) -> AsmKernel:
    ok, note = supported(backend)
    if not ok:
        raise InvalidConfig(note)
    np_ = np if np is not None else min(-(-problem.K // 4) * 4, 256)
    layout = Layout.plan(problem.M, problem.N, problem.K, mc="1x4", mrt_h=4, mrt_w=1, np=np_, ka=4, kb=1)
    limit = backend.device().limits.get("max_texture_size", 4096)
    if layout.largest_texture() > limit:
        raise InvalidConfig(f"assembly baseline: a texture of {layout.largest_texture()} texels "
                            f"exceeds the device's max texture size {limit}")
    config = Config(baseline="expert-4x4-mrt-asm", lang="arbfp", np=layout.np, mc="1x4", mrt_h=4, mrt_w=1)
    return AsmKernel(backend.ctx, problem, config, layout, source(layout), pool=backend.pool,
                     transfers=backend.transfers)
