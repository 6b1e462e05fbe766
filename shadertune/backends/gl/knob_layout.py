"""How reports arrange the GL knobs (Backend.knob_layout): Jiang's landscape, GFLOP/s
against the pass depth np, one line per channel packing mc (and output path), the
MRT grid and the image block as heat maps, each view through a family's best config
(a dense, exhaustively searched subspace); tables show the MRT grid as mrt=HxW."""
from ..base import KnobLayout

GL_KNOB_LAYOUT = KnobLayout(
    line="np",
    family=("out", "mc"),
    pairs=(("mrt_h", "mrt_w"), ("block_h", "block_w")),
    hold="slice",
    knob_names={"np": "np (k per pass)", "mc": "mc (channel packing)", "unroll": "unroll",
                "glsl": "glsl (compiler)", "fetch": "fetch (profile)", "out": "output path",
                "a_src": "A read from", "b_src": "B read from"},
    pair_names={("mrt_h", "mrt_w"): "MRT grid", ("block_h", "block_w"): "image block"},
    folded=(("mrt_h", "mrt_w", "mrt"),),
)
