"""The CUDA backend's untuned pick against measured stores, offline (no GPU).

    PYTHONPATH=TREE python tools/untuned_vs_stores.py STORE [STORE ...] [--min-configs 20]
        [--template-hash H | --any-hash] [--json OUT.json]

STORE: a store (SQLite) or a compressed one (*.sqlite.xz, read through a temporary copy).
For every (device, problem) with at least --min-configs verified configs of the CUDA
backend under the current template hash (--any-hash: every hash, each apart), it prints:

  pick      what config="default" (and config="auto" on a shape with no stored result
            and no saved model) runs today: CUDABackend.default_config, the head of
            tuning.candidates();
  pick ms   its measured median, or (~) that of its nearest measured neighbour (the
            same kernel, the fewest knob steps: a step is a factor of two of a size
            knob or any change of another), with the knobs that differ;
  best ms   the fastest measured config, and pick / best;
  rank      the pick's (or its neighbour's) place among the measured configs;
  model     model_cycles' choice among the measured configs over the best (1.00: the
            cost model ranks the measured best first).

Medians of a config measured in several stores (the same device, problem and
template hash) are pooled by their median. Devices are told apart by the renderer
(the part of the store's device key before " | "); the model itself knows no device
but the sm_90 limits (132 SMs on both H100 SXM and H200). Used to calibrate the
untuned pick (notes/cuda.md, sessions 18-20).
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import statistics
import sys

from shadertune.backends.cuda import CUDABackend
from shadertune.backends.cuda.space import KNOB_DEFAULTS
from shadertune.backends.cuda.tuning import model_cycles
from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.db import Store
from shadertune.db.compressed import readable

# knobs whose values are sizes or counts: a neighbour step is a factor of two
_SIZE_KNOBS = ("BM", "BN", "BK", "TM", "TN", "WM", "WN", "KG", "KL", "VEC", "ST")


def load(paths, template_hash: str | None) -> dict:
    """{(renderer, template hash, problem key): {"problem": Problem, "ms": {config key:
    [medians]}, "stores": set}} of every verified CUDA result."""
    groups: dict = {}
    for p in paths:
        with readable(pathlib.Path(p)) as plain, Store(plain, readonly=True) as store:
            for (backend, device, th, problem) in {
                    (r["backend"], r["device"], r["template_hash"], r["problem"])
                    for r in store.rows("backend = 'cuda'")}:
                if template_hash is not None and th != template_hash:
                    continue
                prob = _problem_of_key(problem)
                g = groups.setdefault((device.split(" | ")[0], th, problem),
                                      {"problem": prob, "ms": {}, "stores": set()})
                g["stores"].add(str(p))
                for r in store.ranked(backend, device, prob, th):
                    cfg = {**KNOB_DEFAULTS, **r.config.to_dict()}
                    g["ms"].setdefault(Config(cfg).key, []).append(r.median_ms)
    return groups


def _problem_of_key(key: str) -> Problem:
    """A Problem from its key (MxNxK:dtype:TT[:bB])."""
    parts = key.split(":")
    m, n, k = (int(x) for x in parts[0].split("x"))
    batch = Problem.batch_of_key(key)
    return Problem(m, n, k, parts[1], parts[2][0] == "T", parts[2][1] == "T", batch)


def knob_steps(a: dict, b: dict) -> float:
    """Distance between two configs: a factor of two of a size knob is one step, any
    other change one step."""
    steps = 0.0
    for k in set(a) | set(b):
        x, y = a.get(k), b.get(k)
        if x == y:
            continue
        if k in _SIZE_KNOBS and x and y:
            steps += abs(math.log2(x) - math.log2(y))
        else:
            steps += 1.0
    return steps


def nearest(pick: dict, measured: dict) -> tuple[str, float]:
    """(config key, steps) of the measured config of pick's kernel nearest to it."""
    same = [k for k in measured if json.loads(k).get("MMA") == pick.get("MMA")] or list(measured)
    return min(((k, knob_steps(pick, json.loads(k))) for k in same), key=lambda t: (t[1], t[0]))


def judge(problem: Problem, ms: dict, pick: Config, limits: dict) -> dict:
    """One row: the pick's measured (or nearest) median, the best, its rank, and the
    cost model's choice among the measured configs."""
    med = {k: statistics.median(v) for k, v in ms.items()}
    order = sorted(med, key=med.get)
    best = med[order[0]]
    p = {**KNOB_DEFAULTS, **pick.to_dict()}
    key = Config(p).key
    exact = key in med
    near, steps = (key, 0.0) if exact else nearest(p, med)
    cycles = {k: model_cycles(problem, json.loads(k), limits) for k in med}
    model_choice = min(cycles, key=cycles.get)
    diff = {k: (p.get(k), json.loads(near).get(k)) for k in p if p.get(k) != json.loads(near).get(k)}
    return {"problem": problem.key, "configs": len(med), "pick": p, "exact": exact,
            "steps": steps, "differs": diff, "pick_ms": med[near], "best_ms": best,
            "best": json.loads(order[0]), "slowdown": med[near] / best,
            "rank": order.index(near) + 1, "model_slowdown": med[model_choice] / best}


def short(c: dict) -> str:
    """A config in a few words: kernel, tile, split."""
    kernel = {0: "ffma", 1: "dmma", 3: "mma", 4: "wgmma"}.get(c.get("MMA", 0), "?")
    s = f"{kernel} {c['BM']}x{c['BN']}x{c['BK']} w{c['WM']}x{c['WN']} st{c.get('ST', 0)}"
    if c.get("KG", 1) > 1:
        s += f" KG{c['KG']} KR{c.get('KR', 0)}"
    if c.get("SK"):
        s += f" SK{c['SK']}"
    if c.get("PS"):
        s += " PS"
    if c.get("AR"):
        s += " AR"
    return s


def table(rows: list[dict]) -> str:
    lines = ["| device | problem | n | untuned pick | pick ms | best ms | pick/best | rank | model/best | best |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        near = "" if r["exact"] else f"~ ({r['steps']:.0f} steps)"
        lines.append(f"| {r['device']} | {r['problem']} | {r['configs']} | {short(r['pick'])} | "
                     f"{r['pick_ms']:.4f}{near} | {r['best_ms']:.4f} | {r['slowdown']:.2f} | "
                     f"{r['rank']} | {r['model_slowdown']:.2f} | {short(r['best'])} |")
    slow = [r["slowdown"] for r in rows]
    if slow:
        geo = math.exp(sum(math.log(s) for s in slow) / len(slow))
        lines.append(f"\n{len(rows)} problems: pick/best geometric mean {geo:.3f}, worst {max(slow):.2f}; "
                     f"exact picks {sum(r['exact'] for r in rows)}")
    return "\n".join(lines)


def evaluate(groups: dict, min_configs: int, backend: CUDABackend | None = None) -> list[dict]:
    backend = backend or CUDABackend()
    limits = backend.limits()
    rows = []
    for (device, th, _), g in sorted(groups.items()):
        if len(g["ms"]) < min_configs:
            continue
        row = judge(g["problem"], g["ms"], backend.default_config(g["problem"]), limits)
        row.update(device=device, template_hash=th, stores=sorted(g["stores"]))
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+", help="stores (*.sqlite or *.sqlite.xz)")
    ap.add_argument("--min-configs", type=int, default=20)
    hashes = ap.add_mutually_exclusive_group()
    hashes.add_argument("--template-hash", help="only results under this template hash "
                        "(default: the current CUDA templates')")
    hashes.add_argument("--any-hash", action="store_true", help="every template hash, each apart")
    ap.add_argument("--json", help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    if a.min_configs < 1:
        ap.error("--min-configs must be at least 1")
    for p in a.stores:
        if not pathlib.Path(p).is_file():
            ap.error(f"no such store: {p}")
    backend = CUDABackend()
    th = None if a.any_hash else (a.template_hash or backend.template_hash())
    rows = evaluate(load(a.stores, th), a.min_configs, backend)
    print(table(rows))
    if a.json:
        from shadertune.core.atomic import write_text
        write_text(a.json, json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
