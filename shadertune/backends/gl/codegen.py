"""GLSL code generation: a GL config + problem shape -> fragment shader source.

out=mrt renders Jiang's multi-render-target kernel (matmul.frag.j2, layout.py);
out=image the image-store kernel (matmul_image.frag.j2, image_layout.py).
"""
from __future__ import annotations

from ...config import Config
from ...errors import InvalidConfig
from ...templates import render, template_hash
from .image_layout import ImageLayout
from .layout import Layout

TEMPLATE = "gl/matmul.frag.j2"
IMAGE_TEMPLATE = "gl/matmul_image.frag.j2"
VERTEX = "gl/fullscreen.vert"
PACK = "gl/pack/pack_rows.frag"
UNPACK = "gl/pack/unpack_rows.frag"

GLSL_VERSIONS = ("330", "450")
FETCH_STYLES = ("texelFetch", "texture")
UNROLLS = (1, 2, 4, 8, "full")
CARRIES = ("rmw", "pingpong")


def is_compute(config) -> bool:
    """Whether `config` is of the compute family (a config without `family` is a
    fragment one)."""
    family = config.get("family", "fragment")
    if family not in ("fragment", "compute"):
        raise InvalidConfig(f"family must be 'fragment' or 'compute', got {family!r}")
    return family == "compute"


def is_image(config) -> bool:
    """Whether `config` is on the fragment family's image path (a config without `out`
    is an MRT one)."""
    out = config.get("out", "mrt")
    if out not in ("mrt", "image", "buffer"):
        raise InvalidConfig(f"out must be 'mrt', 'image' or 'buffer', got {out!r}")
    return out == "image"


def plan_layout(M: int, N: int, K: int, config: Config) -> Layout | ImageLayout:
    try:
        if is_image(config):
            return ImageLayout.plan(M, N, K, rows=int(config["block_h"]), cols=int(config["block_w"]),
                                    np=int(config["np"]))
        return Layout.plan(M, N, K, mc=config["mc"], mrt_h=int(config["mrt_h"]),
                           mrt_w=int(config["mrt_w"]), np=int(config["np"]))
    except KeyError as e:
        raise InvalidConfig(f"GL config is missing knob {e.args[0]!r}: {config}") from None
    except ValueError as e:
        raise InvalidConfig(str(e)) from None


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


def _glsl_and_fetch(config) -> tuple[str, str]:
    glsl = str(config.get("glsl", "330"))
    fetch = config.get("fetch", "texelFetch")
    if glsl not in GLSL_VERSIONS:
        raise InvalidConfig(f"glsl must be one of {GLSL_VERSIONS}, got {glsl!r}")
    if fetch not in FETCH_STYLES:
        raise InvalidConfig(f"fetch must be one of {FETCH_STYLES}, got {fetch!r}")
    return glsl, fetch


def fragment_source(layout, config: Config, carry: str = "rmw") -> str:
    """The fragment shader of `config` on `layout` (plan_layout's).  `carry` (image
    path) is how partial sums cross passes: 'rmw', read and rewritten in place by the
    owning fragment (the kernels the space holds), or 'pingpong' between two images
    (kept to measure the choice; notes/gl.md)."""
    glsl, fetch = _glsl_and_fetch(config)
    if isinstance(layout, ImageLayout):
        return _image_source(layout, config, glsl, carry)
    a_w, a_h = layout.a_size
    b_w, b_h = layout.b_size
    return render(
        TEMPLATE, glsl=glsl, fetch=fetch, mc=config["mc"], unroll=config.get("unroll", 1),
        unroll_n=unroll_factor(config.get("unroll", 1), layout.steps),
        mc_h=layout.mc_h, mc_w=layout.mc_w, ka=layout.ka, kb=layout.kb, b_sub=layout.b_sub,
        mrt_h=layout.mrt_h, mrt_w=layout.mrt_w, targets=layout.targets,
        np=layout.np, steps=layout.steps, hc=layout.hc, wc=layout.wc,
        a_w=a_w, a_h=a_h, b_w=b_w, b_h=b_h)


def _image_source(L: ImageLayout, config, glsl: str, carry: str) -> str:
    srcs = {}
    for knob in ("a_src", "b_src"):
        srcs[knob] = config.get(knob, "texture")
        if srcs[knob] not in ("texture", "ssbo"):
            raise InvalidConfig(f"{knob} must be 'texture' or 'ssbo', got {srcs[knob]!r}")
    if carry not in CARRIES:
        raise InvalidConfig(f"carry must be one of {CARRIES}, got {carry!r}")
    return render(
        IMAGE_TEMPLATE, glsl=glsl, unroll=config.get("unroll", 1),
        unroll_n=unroll_factor(config.get("unroll", 1), L.steps), carry=carry,
        rows=L.rows, cols=L.cols, ct=L.col_texels, np=L.np, hc=L.hc, wc=L.wc,
        M=L.M, KA=L.KA, NB=L.NB, **srcs)


def templates_hash() -> str:
    from .asm_codegen import SHARED_TEMPLATE, TEMPLATES as ASM_TEMPLATES
    from .compute_codegen import REDUCE_TEMPLATE, TEMPLATE as COMPUTE_TEMPLATE
    return template_hash(TEMPLATE, IMAGE_TEMPLATE, VERTEX, PACK, UNPACK, COMPUTE_TEMPLATE, REDUCE_TEMPLATE,
                         *ASM_TEMPLATES.values(), SHARED_TEMPLATE)
