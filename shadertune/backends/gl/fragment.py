"""What the fragment family's paths (mrt/, image/, asm/) share, and no path owns.

The knobs of the GLSL fragment kernels (glsl, the GLSL version; fetch, the
texture instruction; unroll, the k-steps a loop body writes out) and what they
mean; the fullscreen triangle a pass draws, compiled with a fragment shader; and
row bands: a pass drawn over a band of fragment rows computes what the whole
pass does there (gl_FragCoord stays the window position), which checked runs use
to time the first part of a one-pass kernel; and the learned model's features of
a fragment config, from the counts its path gives.
"""
from __future__ import annotations

import contextlib

from ...core.config import Config
from ...errors import BuildError, InvalidConfig
from ...core.templates import read
from ..base import log2_count
from .platform.uninterrupted import uninterrupted

VERTEX = "gl/fullscreen.vert"
GLSL_VERSIONS = ("330", "450")
FETCH_STYLES = ("texelFetch", "texture")
UNROLLS = (1, 2, 4, 8, "full")


def unroll_factor(unroll, steps: int) -> int:
    """Steps per loop iteration; 'full' (or a factor >= steps) unrolls the whole pass."""
    if unroll == "full":
        return steps
    u = int(unroll)
    if u < 1:
        raise InvalidConfig(f"unroll must be a positive int or 'full', got {unroll!r}")
    if u >= steps:
        return steps
    if steps % u:
        raise InvalidConfig(f"unroll={u} does not divide the {steps} steps of a pass (np/ka)")
    return u


def glsl_and_fetch(config: Config) -> tuple[str, str]:
    glsl = str(config.get("glsl", "330"))
    fetch = config.get("fetch", "texelFetch")
    if glsl not in GLSL_VERSIONS:
        raise InvalidConfig(f"glsl must be one of {GLSL_VERSIONS}, got {glsl!r}")
    if fetch not in FETCH_STYLES:
        raise InvalidConfig(f"fetch must be one of {FETCH_STYLES}, got {fetch!r}")
    return glsl, fetch


def compile_program(ctx, source: str):
    """The program of fragment shader `source` behind the fullscreen triangle."""
    try:
        with uninterrupted():    # Ctrl-C inside the driver's compile crashed it
            return ctx.program(vertex_shader=read(VERTEX), fragment_shader=source)
    except Exception as e:  # moderngl raises a plain Exception with the compiler log
        raise BuildError(f"GLSL compile/link failed: {str(e).strip()[:2000]}", source) from None


def fullscreen_pipeline(ctx, program):
    """What draws `program`: a vertex array of no attributes (the fullscreen triangle's
    vertices come from gl_VertexID)."""
    return ctx.vertex_array(program, [])


@contextlib.contextmanager
def row_bands(fbos, rows):
    """Draws into `fbos` cover fragment rows [r0, r1) of their viewports only (all
    for None): gl_FragCoord stays the window position, so a pass split into row
    bands computes what the whole pass does."""
    if rows is None:
        yield
        return
    full = [fbo.viewport for fbo in fbos]
    try:
        for fbo, (x, y, w, _) in zip(fbos, full):
            fbo.viewport = (x, y + rows[0], w, rows[1] - rows[0])
        yield
    finally:
        for fbo, vp in zip(fbos, full):
            fbo.viewport = vp


def fragment_features(p, cfg: Config, L, counts) -> dict:
    """The learned model's features of a fragment config on layout L (its path's
    KernelPath.features): per pass one draw of hc x wc fragments; `counts`(L, steps,
    body) gives the path's (outputs per fragment, texels it fetches a pass, MACs a
    pass, render targets or block texels a loop body writes, padded MACs)."""
    steps = L.steps
    unroll = cfg.get("unroll", 1)
    body = steps if unroll == "full" else min(int(unroll), steps)
    fragments = L.hc * L.wc
    outputs, fetches, macs, body_targets, padded = counts(L, steps, body)
    return {
        "log2_passes": log2_count(L.passes),
        "np_effective": float(L.np),
        "log2_fragments": log2_count(fragments),
        "outputs_per_fragment": float(outputs),
        "log2_fragment_passes": log2_count(fragments * L.passes),
        "unrolled_body": float(body_targets),
        "log2_fetches": log2_count(fragments * L.passes * fetches),
        "macs_per_fetch": macs / max(fetches, 1),
        "padding": padded / max(p.M * p.N * p.K, 1),
        "log2_largest_texture": log2_count(L.largest_texture()),
    }
