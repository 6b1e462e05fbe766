"""The GL cost model's shared part: the device a config's cycles are counted on, the
fragment family's cycles from its roofline bound, and cycles into milliseconds.

Every path ranks in one unit, so that one ranking covers both families: cycles
of a compute unit (an NVIDIA SM) at its clock.  The compute family's model
(compute/model.py) counts FMA work and traffic on such units; the fragment
family's paths are modelled by their roofline (fetch or ALU bound; each path's
KernelPath.roofline) at the rates NVIDIA's Hopper gives fragment shaders, which
run on a few of its units; on a software renderer fragment shaders run faster
than compute shaders (measured on llvmpipe), and the fragment rates are scaled
for it.  paths.predict_ms asks each config's path (KernelPath.cycles).

Every constant below is a measurement on the H200 through NVIDIA's GL driver
(notes/gl.md, "The compute family's cost model"); on other devices the model still
ranks by the same quantities, which is what the model strategy needs.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from ...core.problem import Problem

# A compute unit's FMA lanes and the clock the model's cycles are counted in.
LANES = 128
CLOCK_HZ = 1.98e9
DISPATCH_CYCLES = 10_000     # a dispatch's (or a draw's) fixed cost (~5 us)
# Fragment rates relative to the compute FMA peak, on the H200 (fragment FMA peak 1.94
# TFLOP/s, 31.7 G fetches/s, 25.3 G storage-buffer loads/s against 62.3 TFLOP/s); on a
# software renderer fragment shaders ran 1.7x the compute family's best (llvmpipe).
FRAGMENT_FMA_SHARE = 1.94 / 62.3
FRAGMENT_FETCH_PER_FLOP = 31.7 / 62.3e3       # G fetches per GFLOP of compute peak
FRAGMENT_LOAD_PER_FLOP = 25.3 / 62.3e3
SOFTWARE_FRAGMENT_GAIN = 1.7 / FRAGMENT_FMA_SHARE

Roofline = Callable[[Mapping, Mapping, Problem], dict]


def fragment_cycles(problem: Problem, config: Mapping, limits: Mapping, roofline: Roofline) -> float:
    """Predicted cycles of a fragment config: its bound by `roofline` (its path's) at
    the fragment rates relative to the compute peak (the module docstring), plus a
    draw per pass."""
    units = max(1, int(limits.get("compute_units", 1)))
    peak = units * LANES * 2 * CLOCK_HZ / 1e9                    # compute GFLOP/s
    scale = SOFTWARE_FRAGMENT_GAIN if limits.get("software_renderer") else 1.0
    rates = {"fragment_fma_gflops": peak * FRAGMENT_FMA_SHARE * scale,
             "fetch_gtexels": peak * FRAGMENT_FETCH_PER_FLOP * scale,
             "ssbo_gloads": peak * FRAGMENT_LOAD_PER_FLOP * scale}
    gflops = roofline(config, rates, problem)["gflops"]
    np_ = int(config.get("np") or problem.K)
    passes = -(-problem.K // max(1, min(np_, problem.K)))
    return problem.flops / (gflops * 1e9) * CLOCK_HZ + DISPATCH_CYCLES * passes


def milliseconds(cycles: Callable[[Problem, Mapping, Mapping], float], problem: Problem,
                 configs: Sequence[Mapping], limits: Mapping) -> list[float]:
    """Predicted milliseconds of each config by `cycles` (a config the model cannot
    describe: inf)."""
    out = []
    for c in configs:
        try:
            n = cycles(problem, c, limits)
        except (KeyError, ValueError, ZeroDivisionError):
            n = math.inf
        out.append(n / CLOCK_HZ * 1e3)
    return out
