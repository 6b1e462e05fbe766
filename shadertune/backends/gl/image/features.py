"""What the learned model derives from an image-path config (KernelPath.features):
each fragment owns a block_h x block_w block of C and reads block_h A texels and
block_w B texels per 4-k step."""
from __future__ import annotations

from ....core.config import Config
from ....core.problem import Problem
from ..fragment import fragment_features
from .codegen import plan_layout


def counts(L, steps: int, body: int) -> tuple:
    a_reads, b_reads = L.fragment_reads()
    outputs = L.rows * L.cols                            # C elements per fragment
    fetches = steps * (a_reads + b_reads)                # texels per fragment and pass
    macs = steps * 4 * outputs
    padded = (L.hc * L.rows) * (L.wc * L.cols) * (L.passes * L.np)
    return outputs, fetches, macs, body * L.rows * L.col_texels, padded


def features(p: Problem, cfg: Config, limits) -> dict:
    return fragment_features(p, cfg, plan_layout(p, cfg), counts)
