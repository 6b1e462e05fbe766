"""How reports arrange the CUDA knobs (Backend.knob_layout): GFLOP/s against split-K
(KG), one line per kernel family (MMA), the block, warp and thread tiles as heat
maps; a tuned candidate list is sparse, so each view shows the best config with the
values shown."""
from collections.abc import Mapping
from typing import Any

from ..base import KnobLayout


def acting(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The knobs that act on a CUDA kernel: the tensor-core kernels (MMA > 0) hold the
    FFMA kernel's thread tile, transposition, padding, K_L and double buffering at
    one value, the wgmma kernel (MMA = 4) its warp rows, and AR, PS, KR and SK act
    only in the kernels that have them (backends/cuda/space.py's rules;
    tests/test_acting_knobs.py holds this to them)."""
    mma = config.get("MMA", 0)
    held = set()
    if mma:
        held |= {"TM", "TN", "trans", "PAD", "KL", "DB"}
    else:
        held.add("SK")
    if mma == 4:
        held.add("WM")
    else:
        held |= {"AR", "PS"}
    if config.get("AR", 0) or config.get("KG", 1) != 1:
        held.add("PS")
    if config.get("PS", 0):
        held.add("VEC")
    elif config.get("VEC", 1) != 1:
        held.add("PS")
    if config.get("KG", 1) == 1:
        held.add("KR")
    else:
        held.add("SK")
    return tuple(k for k in config if k not in held)


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
    acting=acting,
)
