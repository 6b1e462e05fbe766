"""The assembly path (lang=arbfp, nvfp): the render-target kernel in assembly.

Jiang's compiler dimension: the same knobs, layout and textures as the
render-target path (mrt/), written as an ARB_fragment_program or
NV_gpu_program4 program, in a compatibility-profile context.  codegen.py (the
programs and what they hold), driver.py (the kernel and the driver's program
limits), space.py (its rules), handtuned.py (the hand-written ARBfp baseline);
its bound is the render-target path's (mrt/roofline.py).
"""
from __future__ import annotations

from ..contract import KernelPath
from ..cost import fragment_cycles
from ..mrt.codegen import plan_layout
from ..mrt import features
from ..mrt.roofline import bound
from . import codegen, space
from .codegen import asm_source
from .driver import AsmKernel, assembly_limits


def _build(ctx, problem, config, layout, source, pool=None, transfers=None) -> AsmKernel:
    return AsmKernel(ctx, problem, config, layout, source, pool=pool, transfers=transfers)


def _cycles(problem, config, limits) -> float:
    return fragment_cycles(problem, config, limits, bound)


def _limits(ctx) -> dict:
    """The assembly languages that shade here and their program limits (driver.py)."""
    return {"asm_limits": assembly_limits(ctx)}


PATH = KernelPath(
    name="asm", family="fragment", marks={"out": ("mrt",), "lang": space.ASM_LANGS},
    plan=plan_layout, source=asm_source, build=_build,
    cycles=_cycles, roofline=bound, features=features.features,
    templates=(*codegen.TEMPLATES.values(), codegen.SHARED_TEMPLATE), rules=space.rules,
    device_limits=_limits)
