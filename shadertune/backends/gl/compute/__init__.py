"""The compute family (family=compute): GEMM compute shaders over storage buffers.

A family of its own in the union space: a workgroup computes a bm x bn tile of
C through shared memory, K cut into passes and split-K.  layout.py (what a
config does with a problem), space.py (its knobs, rules, phase plan and default
shapes), codegen.py (matmul_compute.comp.j2 and the split-K reduce), driver.py
(the kernel), model.py (its cost model), roofline.py (FMA or memory bound).
"""
from __future__ import annotations

from ....errors import InvalidConfig
from ..contract import KernelPath
from . import codegen, features, space
from .driver import ComputeKernel
from .layout import ComputeLayout
from .model import compute_cycles
from .roofline import compute_roofline


def _plan(problem, config) -> ComputeLayout:
    try:
        return ComputeLayout.plan(problem, config)
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


def _build(ctx, problem, config, layout, source, pool=None, transfers=None) -> ComputeKernel:
    return ComputeKernel(ctx, problem, config, layout, source,
                         codegen.reduce_source(layout) if layout.reduces else None,
                         pool=pool, transfers=transfers)


def _device_limits(ctx) -> dict:
    """What the compute family's knobs read beyond compute_limits: float atomics on
    storage buffers (NV_shader_atomic_float: kred = 1)."""
    return {"atomic_float": "GL_NV_shader_atomic_float" in set(ctx.extensions)}


def _space(problem, limits):
    """The family's space, or None where the device has no GL 4.5 compute shaders."""
    return space.compute_space(problem, limits) if space.compute_available(limits) else None


PATH = KernelPath(
    name="compute", family="compute",
    plan=_plan, source=codegen.compute_source, build=_build,
    cycles=compute_cycles, roofline=compute_roofline, features=features.features,
    templates=(codegen.TEMPLATE, codegen.REDUCE_TEMPLATE, codegen.SCALE_TEMPLATE),
    space=_space, phases=space.COMPUTE_PHASES, fixed=space.COMPUTE_FIXED,
    off={k: v for k, v in space.FRAGMENT_VALUES.items() if k != "family"},
    candidates=space.compute_candidates, device_limits=_device_limits, batched=True,
    ahead=True)
