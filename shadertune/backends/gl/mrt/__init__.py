"""The render-target path (out=mrt, lang=glsl): Jiang's fragment kernel.

A fragment computes mrt_h x mrt_w texels of C, one per render target, each
texel an mc block; A and B are packed into RGBA32F textures and partial sums
ping-pong across passes of np k-values.  layout.py (the texture layout),
codegen.py (matmul.frag.j2), targets.py and driver.py (the kernel), space.py
(its rules), roofline.py (fetch or ALU bound).
"""
from __future__ import annotations

from ..contract import KernelPath
from ..cost import fragment_cycles
from ..fragment import VERTEX
from . import features, roofline, space
from .codegen import TEMPLATE, fragment_source, plan_layout
from .driver import MrtKernel


def _build(ctx, problem, config, layout, source, pool=None, transfers=None) -> MrtKernel:
    return MrtKernel(ctx, problem, config, layout, source, pool=pool, transfers=transfers)


def _cycles(problem, config, limits) -> float:
    return fragment_cycles(problem, config, limits, roofline.bound)


PATH = KernelPath(
    name="mrt", family="fragment", marks={"out": ("mrt",), "lang": ("glsl",)},
    plan=plan_layout, source=fragment_source, build=_build,
    cycles=_cycles, roofline=roofline.bound, features=features.features,
    templates=(TEMPLATE, VERTEX), rules=space.rules)
