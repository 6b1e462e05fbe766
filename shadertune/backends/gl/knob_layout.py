"""How reports arrange the GL knobs (Backend.knob_layout): Jiang's landscape, GFLOP/s
against the pass depth np, one line per channel packing mc (and output path and
language: GLSL, ARBfp or NVfp assembly), the MRT grid, the image block and the compute family's tiles as heat maps, each view through a family's best config
(a dense, exhaustively searched subspace); tables show the MRT grid as mrt=HxW."""
from collections.abc import Mapping
from typing import Any

from ..base import KnobLayout

# The knobs that act on a GL kernel (the others are held at one value by its family,
# output path or language: backends/gl/space.py; tests/test_acting_knobs.py holds this
# to the space).  A config that leaves out the image-path or compute knobs is an MRT
# config of the fragment family (space.with_defaults).
_COMPUTE = ("family", "bm", "bn", "bk", "tm", "tn", "lanes_n", "vec", "pad", "a_t", "db", "ks",
            "shuffle", "skew", "clamp", "swz", "kred", "np", "unroll", "a_src", "b_src")
_FRAGMENT = ("family", "out", "lang", "glsl", "fetch", "unroll", "np")
_MRT = ("mc", "mrt_h", "mrt_w")
_IMAGE = ("block_h", "block_w", "a_src", "b_src")
_HELD_BY_IMAGE = ("mc", "mrt_h", "mrt_w", "fetch", "glsl", "lang")
_HELD_BY_ASSEMBLY = ("glsl", "fetch")        # and ARBfp's unroll: 'full', no loops


def acting(config: Mapping[str, Any]) -> tuple[str, ...]:
    if config.get("family", "fragment") == "compute":
        return _COMPUTE
    out = config.get("out", "mrt")
    if out == "image":
        return tuple(k for k in _FRAGMENT if k not in _HELD_BY_IMAGE) + _IMAGE
    names = _FRAGMENT + _MRT
    lang = config.get("lang", "glsl")
    if lang != "glsl":
        names = tuple(k for k in names if k not in _HELD_BY_ASSEMBLY
                      and not (lang == "arbfp" and k == "unroll"))
    return names


GL_KNOB_LAYOUT = KnobLayout(
    line="np",
    family=("out", "lang", "mc"),
    pairs=(("mrt_h", "mrt_w"), ("block_h", "block_w"), ("bm", "bn"), ("tm", "tn")),
    hold="slice",
    knob_names={"np": "np (k per pass)", "mc": "mc (channel packing)", "unroll": "unroll",
                "lang": "lang (compiler)", "glsl": "glsl (GLSL version)", "fetch": "fetch (profile)",
                "out": "output path",
                "a_src": "A read from", "b_src": "B read from", "family": "family",
                "bk": "bk (k a stage)", "lanes_n": "lanes along N", "vec": "vector width",
                "pad": "shared padding", "a_t": "A k-major in shared", "db": "double buffering",
                "ks": "split-K", "skew": "skewed shared rows", "clamp": "unchecked loads",
                "swz": "tile walk strips", "shuffle": "subgroup shuffles", "kred": "atomic split-K"},
    pair_names={("mrt_h", "mrt_w"): "MRT grid", ("block_h", "block_w"): "image block",
                ("bm", "bn"): "compute block tile", ("tm", "tn"): "compute thread tile"},
    folded=(("mrt_h", "mrt_w", "mrt"),),
    acting=acting,
)
