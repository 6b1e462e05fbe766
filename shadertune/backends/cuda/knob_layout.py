"""How reports arrange the CUDA knobs (Backend.knob_layout): GFLOP/s against split-K
(KG), one line per kernel family (MMA), the block, warp and thread tiles as heat
maps; a tuned candidate list is sparse, so each view shows the best config with the
values shown."""
from ..base import KnobLayout

CUDA_KNOB_LAYOUT = KnobLayout(
    line="KG",
    family=("MMA",),
    pairs=(("BM", "BN"), ("WM", "WN"), ("TM", "TN")),
    hold="best",
    knob_names={"KG": "KG (split-K across the grid)", "MMA": "kernel family", "BK": "BK (k per stage)",
                "ST": "ST (cp.async stages)", "VEC": "VEC (load width)", "KL": "KL (split-K in a block)",
                "KR": "KR (split-K reduction)", "DB": "DB (double buffering)",
                "PAD": "PAD (shared-memory padding)", "trans": "trans (A transposed in shared memory)"},
    pair_names={("BM", "BN"): "block tile", ("WM", "WN"): "warp tile", ("TM", "TN"): "thread tile"},
    value_names={"MMA": {0: "FFMA", 3: "3xTF32 mma.sync", 4: "3xTF32 wgmma"}},
)
