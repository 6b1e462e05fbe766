"""What the learned model derives from a render-target config (KernelPath.features;
the assembly path draws the same layout): each fragment computes mrt_h x mrt_w C
texels, fetching mrt_h A texels and mrt_w * b_sub B texels per k-step."""
from __future__ import annotations

from ....core.config import Config
from ....core.problem import Problem
from ..fragment import fragment_features
from .codegen import plan_layout


def counts(L, steps: int, body: int) -> tuple:
    outputs = L.targets * L.mc_h * L.mc_w
    fetches = steps * (L.mrt_h + L.mrt_w * L.b_sub)
    macs = steps * L.ka * outputs
    return outputs, fetches, macs, body * L.targets, L.Mp * L.Np * L.Kp


def features(p: Problem, cfg: Config, limits) -> dict:
    return fragment_features(p, cfg, plan_layout(p, cfg), counts)
