"""The one contract of a GL kernel path: KernelPath.

A path is one way of computing a product on GL: the render-target path (mrt/,
Jiang's), the image-store path (image/), assembly on the render-target knobs
(asm/), the compute family (compute/).  Each folder holds its layout, codegen,
driver (a kernel.BaseGLKernel), its part of the space, its cost and roofline
hooks, and states them in one KernelPath record; paths.py lists the records
(PATHS) and says which path a config is (path_of).  Everything the backend does
with a config goes through its record: the source, the kernel, the bound, the
predicted time, the templates the store's template hash covers.

Configs are told apart by three knobs: `family` (the fragment family's paths
share one space; a path with a space of its own is a family of its own), `out`
and `lang` (what a fragment path writes and the language it is written in).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...core.config import Config
from ...core.problem import Problem
from ...core.space import PhasePlan, Space

# The knobs that tell the paths apart, and what a config without one means: Jiang's
# render-target path in GLSL (configs stored before the others existed are that).
PATH_KNOBS = {"family": "fragment", "out": "mrt", "lang": "glsl"}


@dataclass(frozen=True)
class KernelPath:
    """One GL kernel path (the module docstring).

    name       the path's name (its folder)
    family     the `family` its configs hold
    marks      the values of `out` and `lang` its configs hold (a family of one path
               needs none): a config is this path's where its family is and each
               knob marked holds one of the values (PATH_KNOBS fill knobs left out)
    plan       (problem, config) -> the layout (InvalidConfig where there is none)
    source     (layout, config) -> the program's source
    build      (ctx, problem, config, layout, source, pool, transfers) -> the kernel
    cycles     (problem, config, limits) -> predicted cycles (the analytical cost
               model, in cost.py's unit)
    roofline   (config, ceilings, problem or None) -> {'gflops', 'bound', ...}: the
               bound measured ceilings set
    features   (problem, config, limits) -> {name: value}: what the learned model
               derives from its configs (features.py gives every config every name)
    templates  the templates its programs are rendered from or read
    rules      the fragment family's paths: (FragmentShape) -> {name: restriction},
               its part of the family's space (space.fragment_space orders them)
    space      a family of its own: (problem, limits) -> its Space, or None where
               the device lacks it
    phases     with `space`: the phased strategy's order over it
    fixed      with `space`: what the other family's knobs hold on its configs
    off        with `space`: what its own knobs hold on the other family's configs
    candidates with `space`: (problem, space) -> configs a search times first
    device_limits  (ctx) -> the limits it reads from the device for itself, added
               to DeviceInfo.limits
    batched    whether its kernels run a stack of products (Problem.batch) in one
               dispatch (calls.py)
    ahead      whether its programs are single compute shaders that the backend
               compiles ahead on the driver's threads (its driver takes them through
               platform/compile_ahead.py)
    """
    name: str
    family: str
    plan: Callable[[Problem, Config], object]
    source: Callable[[object, Config], str]
    build: Callable[..., object]
    cycles: Callable[[Problem, Mapping, Mapping], float]
    roofline: Callable[[Mapping, Mapping, Problem | None], dict]
    features: Callable[[Problem, Config, Mapping], dict]
    templates: tuple[str, ...]
    marks: Mapping[str, tuple] = field(default_factory=dict)
    rules: Callable[..., dict] | None = None
    space: Callable[[Problem, Mapping], Space | None] | None = None
    phases: PhasePlan | None = None
    fixed: Mapping = field(default_factory=dict)
    off: Mapping = field(default_factory=dict)
    candidates: Callable[[Problem, Space], list] | None = None
    device_limits: Callable[[object], dict] | None = None
    batched: bool = False
    ahead: bool = False

    def owns(self, config: Mapping) -> bool:
        """Whether `config` (its path knobs read with PATH_KNOBS' defaults) is this path's."""
        return (config.get("family", PATH_KNOBS["family"]) == self.family
                and all(config.get(k, PATH_KNOBS[k]) in v for k, v in self.marks.items()))
