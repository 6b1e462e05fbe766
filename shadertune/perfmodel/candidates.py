"""The valid configs a model ranks for a problem when a whole space is too many.

The whole pruned space when its product is small (ENUMERATE_UP_TO); else a
sample, bounded in count and time, of three kinds:
- seeds: configs measured on other problems (where the model has seen real
  times) and the backend's default, those valid for this problem;
- random walks from the seeds, one knob changed per step, valid steps only
  (the CUDA and GL products are millions of points of which a few per
  thousand are valid: uniform draws alone find few, and enumerating the valid
  ones takes seconds);
- uniform draws (search.random_search.draws).
Seeds come first: a ranking keeps the given order among equal predictions.

analytical_candidates(): the backend's own list for a problem (Backend.candidates),
those valid in its space: what `auto` ranks beside the verified configs, and what
seeds first use's sample.
"""
from __future__ import annotations

import random
import time
from collections.abc import Iterable

from ..core.config import Config
from ..errors import ShadertuneError
from ..core.problem import Problem
from ..search.random_search import draws
from ..core.space import Space

# the length of the backend's analytical candidate list (Backend.candidates) that joins
# the verified configs as auto's candidates (the backends' default length)
ANALYTICAL = 24
ENUMERATE_UP_TO = 20_000
SAMPLES = 2_000
SECONDS = 1.0
WALK_STEPS = 12


def candidates(space: Space, seeds: Iterable, *, samples: int = SAMPLES, seconds: float = SECONDS,
               seed: int = 0) -> list[Config]:
    out = {}
    for c in seeds:
        c = c if isinstance(c, Config) else Config(c)
        if c not in out and _valid(space, c):
            out[c] = None
    if space.full_size <= ENUMERATE_UP_TO:
        out.update(dict.fromkeys(space.configs()))
        return list(out)
    deadline = time.monotonic() + seconds
    rng = random.Random(seed)
    names = list(space.knobs)
    starts = list(out)
    target = min(samples, len(out) + max(samples // 2, 1))
    while starts and len(out) < target and time.monotonic() < deadline:
        cur = rng.choice(starts)
        for _ in range(WALK_STEPS):
            k = rng.choice(names)
            nxt = cur.replace(**{k: rng.choice(space.knobs[k])})
            if nxt != cur and (nxt in out or _valid(space, nxt)):
                cur = nxt
                out[cur] = None
    for c in draws(space, rng):
        if len(out) >= samples or time.monotonic() > deadline:
            break
        out[c] = None
    return list(out)


def _valid(space: Space, cfg) -> bool:
    try:
        return space.why_invalid(cfg) is None
    except Exception:        # a config of another shape of knobs: not a candidate
        return False


def analytical_candidates(backend, problem: Problem, space=None, n: int = ANALYTICAL) -> list:
    """The backend's analytical candidate list for `problem` (backend.candidates, best
    first), those valid in its space; [] where the backend has none for it."""
    space = space if space is not None else backend.space(problem)
    try:
        listed = backend.candidates(problem, n)
    except ShadertuneError:          # e.g. InvalidConfig: no valid config at all
        return []
    out = []
    for c in listed:
        c = c if isinstance(c, Config) else Config(c)
        if space.why_invalid(c) is None:
            out.append(c)
    return out
