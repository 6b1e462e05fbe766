"""The config a profiling or accuracy study of a 3xTF32 kernel runs (scripts/profile-cuda,
scripts/accuracy-3xtf32): given, else the store's fastest 3xTF32 result, else what
config="auto" takes, else run U's winner.  It reads the store and `auto`'s selection,
so it sits above them; what a 3xTF32 kernel is and run U's winner are the CUDA
backend's (backends/cuda/profile.py)."""
from __future__ import annotations

import json

from shadertune.backends.cuda.profile import RUN_U_4096, is_3xtf32
from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.errors import InvalidConfig
from shadertune.selection.chain import select_config


def pick_config(be, problem, store=None, config=None) -> tuple[Config, str]:
    """(config, how): `config` (a JSON string or a mapping) if given, checked
    against the space; else the fastest correct 3xTF32 config `store` holds for
    `problem` on this device and templates (store.ranked), else what
    config="auto" would take from it (select_config; it may not be 3xTF32:
    `how` says so); with neither, run U's 4096 winner where it is valid for
    `problem`, else the backend's default config."""
    space = be.space(problem)
    if config is not None:
        cfg = Config(json.loads(config) if isinstance(config, str) else config)
        why = space.why_invalid(cfg)
        if why:
            raise InvalidConfig(f"--config is not valid for {problem.label}: {why}")
        return cfg, "given (--config)"
    if store is not None:
        with Store(store, readonly=True) as s:
            ranked = s.ranked(be.name, be.device().key, problem, be.template_hash())
            mine = [r for r in ranked if is_3xtf32(r.config)]
            if mine:
                return mine[0].config, (f"the store's fastest 3xTF32 config for {problem.label} "
                                        f"({mine[0].median_ms:.4f} ms; {len(ranked)} correct configs ranked)")
            cfg, how = select_config(be, problem, s)
        kind = "3xTF32" if is_3xtf32(cfg) else f"NOT 3xTF32 (MMA = {cfg.get('MMA', 0)})"
        return cfg, f"the store has no 3xTF32 result for {problem.label}; config='auto' picks ({how}), {kind}"
    cfg = Config(RUN_U_4096)
    if not space.why_invalid(cfg):
        return cfg, "run U's 4096 winner (BENCHMARKS.md)"
    cfg = be.default_config(problem)
    return cfg, "the backend's default config (run U's 4096 winner is not valid here)"
