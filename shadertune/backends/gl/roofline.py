"""The GL roofline model: which measured ceiling bounds a config.

Each kernel path states its own bound (KernelPath.roofline: mrt/roofline.py,
image/roofline.py, compute/roofline.py; the assembly path is bound as the
render-target path it draws).  The ceilings are measured by microbench.py
(`report roofline`); GLBackend's roofline() and ceiling_lines() hooks call the
functions here.
"""
from __future__ import annotations

from collections.abc import Mapping

from ...core.problem import Problem
from ...core.roofline.bounds import flat, peak_line
from .mrt.roofline import best_roofline
from .paths import path_of


def gl_config_roofline(config: Mapping, ceilings: Mapping, problem: Problem | None = None) -> dict:
    """The bound of one GL config ({'gflops', 'bound', ...}: its path's roofline);
    without a problem a fragment config's bound of one pass of np (not clamped to K)."""
    return path_of(config).roofline(config, ceilings, problem)


def gl_ceiling_lines(ceilings: Mapping) -> list[tuple[str, float]]:
    """The fragment FMA peak, and the fetch roofline of the best blocking (within 8 targets)."""
    c = flat(ceilings)
    lines = peak_line(c, "fragment_fma_gflops", "fragment FMA peak")
    try:
        top = best_roofline(c)
    except KeyError:
        return lines
    return lines + [(f"fetch roofline {top['gflops']:,.0f} ({top['flops_per_fetch']:.1f} flops/fetch)",
                     top["gflops"])]
