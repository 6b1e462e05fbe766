"""Hand-written GL baselines (shaders/gl/handtuned/), run by the same driver as generated code.

Each shader declares its texture layout in a `// layout: {...}` header line;
the driver packs A, B and C accordingly, runs the passes and times them like
any tuned config, so the comparison is kernel against kernel.
"""
from __future__ import annotations

import json
import re

from ...core.config import Config
from ...errors import InvalidConfig
from ...core.problem import Problem
from ...core.templates import read
from .asm import handtuned as assembly
from .mrt.driver import MrtKernel
from .mrt.layout import Layout

BASELINES = {
    "naive": "gl/handtuned/naive.frag",
    "tfjs-2x2": "gl/handtuned/tfjs_2x2.frag",
    "expert-4x4-mrt": "gl/handtuned/expert_4x4_mrt.frag",
}


def declared_layout(source: str) -> dict:
    m = re.search(r"^//\s*layout:\s*(\{.*\})\s*$", source, re.M)
    if not m:
        raise ValueError("hand-tuned shader lacks its '// layout: {...}' header")
    return json.loads(m.group(1))


def build(backend, problem: Problem, name: str, np: int | None = None) -> MrtKernel:
    """Build baseline `name` for `problem`; np (k per pass) defaults to the whole K (one pass)."""
    if name not in BASELINES:
        raise ValueError(f"unknown hand-tuned baseline {name!r}; expected one of {list(BASELINES)}")
    src = read(BASELINES[name])
    lay = declared_layout(src)
    ka = lay["ka"]
    np_ = np if np is not None else -(-problem.K // ka) * ka
    layout = Layout.plan(problem.M, problem.N, problem.K, mc=lay["mc"], mrt_h=lay["mrt_h"],
                         mrt_w=lay["mrt_w"], np=np_, ka=ka, kb=lay["kb"])
    limit = backend.device().limits.get("max_texture_size", 4096)
    if layout.largest_texture() > limit:
        raise InvalidConfig(f"{name}: a texture of {layout.largest_texture()} texels exceeds "
                            f"the device's max texture size {limit}")
    cfg = Config(baseline=name, np=layout.np, **{k: v for k, v in lay.items()})
    return MrtKernel(backend.ctx, problem, cfg, layout, src)


def assembly_support(backend) -> tuple[bool, str]:
    """Whether the assembly baseline (ARB_fragment_program) can run here, and a note why not."""
    return assembly.supported(backend)


def build_assembly(backend, problem: Problem, np: int | None = None):
    """The expert 4x4 RGBA + 4-MRT algorithm as an ARB_fragment_program (compatibility context)."""
    return assembly.build(backend, problem, np)
