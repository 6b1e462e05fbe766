"""The image path (out=image): the fragment kernel past the render targets' 32 outputs.

A fragment owns a block_h x block_w block of C and writes it with imageStore
(GL 4.2 / ARB_shader_image_load_store); operands stay row-major, read from
textures or storage buffers (a_src, b_src).  layout.py (the row-major layout),
codegen.py (matmul_image.frag.j2), driver.py (the kernel), space.py (its blocks,
sources and rules), roofline.py (ALU, fetch or storage-buffer bound).
"""
from __future__ import annotations

from ..contract import KernelPath
from ..cost import fragment_cycles
from ..fragment import VERTEX
from ..platform.transfer import PACKING_TEMPLATES
from . import codegen, features, roofline, space
from .codegen import image_source, plan_layout
from .driver import ImageKernel


def _build(ctx, problem, config, layout, source, pool=None, transfers=None) -> ImageKernel:
    return ImageKernel(ctx, problem, config, layout, source, pool=pool, transfers=transfers)


def _cycles(problem, config, limits) -> float:
    return fragment_cycles(problem, config, limits, roofline.bound)


PATH = KernelPath(
    name="image", family="fragment", marks={"out": ("image",), "lang": ("glsl",)},
    plan=plan_layout, source=image_source, build=_build,
    cycles=_cycles, roofline=roofline.bound, features=features.features,
    templates=(codegen.TEMPLATE, VERTEX, *PACKING_TEMPLATES), rules=space.rules)
