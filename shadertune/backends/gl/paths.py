"""The GL kernel paths (PATHS) and which one a config is (path_of).

Adding a path is one new folder holding its KernelPath record (contract.py) and
one entry in PATHS: the backend's source, build, roofline, cost model, template
hash and device limits go through the registry, and a path with a space of its
own joins the union space (space.gl_space) as a family.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...errors import InvalidConfig
from ...core.problem import Problem
from ...core.templates import template_hash
from .asm import PATH as ASM
from .compute import PATH as COMPUTE
from .contract import PATH_KNOBS, KernelPath
from .cost import milliseconds
from .image import PATH as IMAGE
from .mrt import PATH as MRT

# The registry.  Its order is the order the path knobs' values are listed in (the
# union's domains, error messages) and the order families are given to the union space.
PATHS: tuple[KernelPath, ...] = (MRT, IMAGE, ASM, COMPUTE)


def _values(knob: str) -> tuple:
    """Every value of path knob `knob` a config of some path holds, in registry order."""
    seen = [PATH_KNOBS[knob]] if knob == "family" else []
    for p in PATHS:
        seen += [p.family] if knob == "family" else list(p.marks.get(knob, ()))
        if knob in p.fixed:
            seen.append(p.fixed[knob])
    return tuple(dict.fromkeys(seen))


KNOWN = {knob: _values(knob) for knob in PATH_KNOBS}


def _one_of(values: Sequence) -> str:
    names = [repr(v) for v in values]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def path_of(config: Mapping) -> KernelPath:
    """The path of `config` (a config without the path knobs is a render-target one in
    GLSL); InvalidConfig for a value no path has, or a combination none takes."""
    for knob, default in PATH_KNOBS.items():
        value = config.get(knob, default)
        if value not in KNOWN[knob]:
            raise InvalidConfig(f"{knob} must be {_one_of(KNOWN[knob])}, got {value!r}")
    for path in PATHS:
        if path.owns(config):
            return path
    said = ", ".join(f"{k}={config.get(k, d)!r}" for k, d in PATH_KNOBS.items())
    raise InvalidConfig(f"no GL kernel path takes {said}")


def predict_ms(problem: Problem, configs: Sequence[Mapping], limits: Mapping) -> list[float]:
    """Predicted milliseconds of each config by its path's cost model (cost.py; a config
    the model cannot describe: inf)."""
    return milliseconds(lambda p, c, lim: path_of(c).cycles(p, c, lim), problem, configs, limits)


# The order the store's template hash has always read the templates in: kernels that
# render the same keep their stored results.  A template no earlier version hashed
# goes after these, in registry order.
_HASH_ORDER = ("gl/matmul.frag.j2", "gl/matmul_image.frag.j2", "gl/fullscreen.vert",
               "gl/pack/pack_rows.frag", "gl/pack/unpack_rows.frag", "gl/matmul_compute.comp.j2",
               "gl/matmul_reduce.comp.j2", "gl/matmul.arbfp.j2", "gl/matmul.nvfp.j2", "gl/matmul_asm.j2")
HASHED_TEMPLATES = tuple(sorted(dict.fromkeys(t for p in PATHS for t in p.templates),
                                key=lambda t: _HASH_ORDER.index(t) if t in _HASH_ORDER else len(_HASH_ORDER)))


def templates_hash() -> str:
    """The hash of every path's templates (the store keeps results per template hash)."""
    return template_hash(*HASHED_TEMPLATES)


def path_limits() -> tuple:
    """The readers (ctx -> dict) of the limits the paths read from the device for themselves."""
    return tuple(p.device_limits for p in PATHS if p.device_limits is not None)
