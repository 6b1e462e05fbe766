"""How reports arrange the GL knobs (Backend.knob_layout): Jiang's landscape, GFLOP/s
against the pass depth np, one line per channel packing mc (and output path and
language: GLSL, ARBfp or NVfp assembly), the MRT grid, the image block and the compute family's tiles as heat maps, each view through a family's best config
(a dense, exhaustively searched subspace); tables show the MRT grid as mrt=HxW."""
from ..base import KnobLayout

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
                "ks": "split-K"},
    pair_names={("mrt_h", "mrt_w"): "MRT grid", ("block_h", "block_w"): "image block",
                ("bm", "bn"): "compute block tile", ("tm", "tn"): "compute thread tile"},
    folded=(("mrt_h", "mrt_w", "mrt"),),
)
