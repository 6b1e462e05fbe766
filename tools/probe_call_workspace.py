"""What a single call costs beyond the device time, per kind of call: the untuned
pick's K_G, reduction and pre-split variants timed held (device time behind a spin
kernel) and as calls (CUDAKernel.time's 'call' mode: events around one call, a sync
after it) under each launch means of the express lane (graphs, kernels).

    PYTHONPATH=. python3 tools/probe_call_workspace.py [--out probe.jsonl] [--repeats 300]

Each case: a problem's device-time pick (tuning.candidates without the call
ranking: the untuned default before session 20) with knobs replaced (K_G 1, 2, 4, 8; KR 0, 1; pre-split or A from registers), where the space
admits the result. One JSON line per config: held and call medians ('held0',
'graphs0', 'kernels0', then a second round '...1'), in ms. Needs a GPU. Made for
notes/cuda.md, session 20: a call whose workspace is above driver.WORKSPACE_KEEP
costs 12-15 us more than the same launches with a kept one, a second kernel nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from shadertune.backends.cuda import CUDABackend  # noqa: E402
from shadertune.backends.cuda.tuning import candidates  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402

AR = {"PS": 0, "AR": 1, "VEC": 2}
CASES = [
    (Problem(900, 700, 1300), [{}, {"KG": 1}, {"KG": 2}, {"KG": 2, "KR": 1}, {"KR": 1}, {"KG": 8},
                               {"KG": 8, "KR": 1}, {"KG": 1, "PS": 1, "AR": 0, "VEC": 1}]),
    (Problem(1024, 1024, 1024, "float32", False, True), [{}, AR, dict(AR, KG=2), dict(AR, KG=2, KR=1)]),
    (Problem(2560, 32, 2560), [{}, {"KR": 1}, {"KG": 8}, {"KG": 8, "KR": 1}, {"KG": 1}]),
    (Problem(1000, 1000, 1000, "float64"), [{}, {"KG": 2}, {"KG": 2, "KR": 1}]),
    (Problem(64, 64, 60000, "float32", False, True), [{}, {"KR": 1}, {"KG": 64}, {"KG": 64, "KR": 1}]),
]


def configs(be: CUDABackend) -> list:
    out = []
    for p, changes in CASES:
        base = candidates(p, be.space(p), be.limits(), 1)[0]
        for ch in changes:
            c = base.replace(**ch)
            if be.space(p).why_invalid(c) is None and (p, c) not in out:
                out.append((p, c))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the JSON lines here")
    ap.add_argument("--repeats", type=int, default=300)
    a = ap.parse_args(argv)
    import cupy as cp
    be = CUDABackend()
    todo = configs(be)
    be.precompile_many(todo)
    out = open(a.out, "w") if a.out else None
    for p, c in todo:
        k = be.build(p, c)
        sa, sb = p.stored_shapes
        k.prepare(cp.random.rand(*sa).astype(p.dtype), cp.random.rand(*sb).astype(p.dtype))
        row = {"p": p.key, "c": c.to_dict()}
        for rnd in (0, 1):
            row[f"held{rnd}"] = statistics.median(k.time(a.repeats, warmup=10, mode="held"))
            for means in ("graphs", "kernels"):
                os.environ["SHADERTUNE_CUDA_LAUNCH"] = means    # read when the call's launches are made
                k._timed_go = None
                row[f"{means}{rnd}"] = statistics.median(k.time(a.repeats, warmup=20, mode="call"))
        line = json.dumps(row)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
    return 0


if __name__ == "__main__":     # the compile pool spawns: nothing may run on import
    sys.exit(main())
