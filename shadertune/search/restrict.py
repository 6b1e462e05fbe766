"""A backend whose space has some knobs narrowed: search-quality studies on a subspace.

Exhaustive search over a whole GL space at GPU sizes takes hours; fixing a few
knobs (say glsl, fetch, unroll) leaves a subspace that exhaustive search can
cover, on which phased and random are then compared honestly.
"""
from __future__ import annotations

import json

from ..space import Space


def parse_fix(items) -> dict:
    """['glsl=330', 'unroll=4,8'] -> {'glsl': ('330',), 'unroll': (4, 8)} (JSON scalars, else text)."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--fix takes KNOB=VALUE[,VALUE...], got {item!r}")
        k, vals = item.split("=", 1)
        parsed = []
        for v in vals.split(","):
            try:
                parsed.append(json.loads(v))
            except json.JSONDecodeError:
                parsed.append(v)
        out[k.strip()] = tuple(parsed)
    return out


def narrow(space: Space, fixed: dict) -> Space:
    """The same space with each knob in `fixed` limited to the given values."""
    knobs = {}
    for k, dom in space.knobs.items():
        if k in fixed:
            # domain values compare by equality: '330' (str) must match the space's type
            keep = tuple(v for v in dom if v in fixed[k] or str(v) in map(str, fixed[k]))
            if not keep:
                raise ValueError(f"--fix {k}: none of {list(fixed[k])} is in its domain {list(dom)}")
            knobs[k] = keep
        else:
            knobs[k] = dom
    unknown = set(fixed) - set(space.knobs)
    if unknown:
        raise ValueError(f"--fix names unknown knobs {sorted(unknown)}; knobs are {list(space.knobs)}")
    # the backend's own kind of space (GL's: a union of its families)
    sub = space.narrowed({k: knobs[k] for k in fixed})
    def inside(start):
        # keep a start point inside the subspace: the old one with the fixed values put in;
        # where they need other outer knobs (GL: lang=arbfp holds unroll and fetch), those
        # the first that fit, the start's other knobs (its groups, its depth) kept
        if sub.why_invalid(start) is None:
            return start
        cand = start.replace(**{k: v[0] for k, v in knobs.items() if k in fixed})
        if sub.why_invalid(cand) is None:
            return cand
        outer = plan.for_config(cand).outer
        free = [k for k in outer if k not in fixed]
        return sub.first({k: v for k, v in cand.items() if k not in free}, free) if free else None
    plan = space.phases
    sub.phases = None if plan is None else plan.with_starts(inside)
    return sub


class RestrictedBackend:
    """Delegates to `backend`; space(problem) is narrowed by `fixed`."""

    def __init__(self, backend, fixed: dict):
        self._backend = backend
        self.fixed = fixed
        self.name = backend.name

    def space(self, problem):
        return narrow(self._backend.space(problem), self.fixed)

    def __getattr__(self, attr):
        return getattr(self._backend, attr)
