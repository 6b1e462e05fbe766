"""A backend whose space has some knobs narrowed: search-quality studies on a subspace.

Exhaustive search over a whole GL space at GPU sizes takes hours; fixing a few
knobs (say glsl, fetch, unroll) leaves a subspace that exhaustive search can
cover, on which phased and random are then compared honestly.
"""
from __future__ import annotations

import difflib
import json

from ..core.space import Space


def fix_item(item: str) -> tuple[str, tuple]:
    """'unroll=4,full' -> ('unroll', (4, 'full')) (JSON scalars, else text); ValueError
    for text that is not KNOB=VALUE[,VALUE...]."""
    if not isinstance(item, str) or "=" not in item:
        raise ValueError(f"--fix takes KNOB=VALUE[,VALUE...], got {item!r}")
    k, vals = item.split("=", 1)
    k = k.strip()
    if not k or not vals.strip():
        raise ValueError(f"--fix takes KNOB=VALUE[,VALUE...], got {item!r}")
    parsed = []
    for v in vals.split(","):
        v = v.strip()
        try:
            x = json.loads(v)
        except json.JSONDecodeError:
            x = v
        parsed.append(x if isinstance(x, (str, int, float, bool)) or x is None else v)
    return k, tuple(dict.fromkeys(parsed))


def parse_fix(items) -> dict:
    """['glsl=330', 'unroll=4,8'] -> {'glsl': (330,), 'unroll': (4, 8)} (JSON scalars, else
    text); a knob fixed twice keeps the values both allow (none: ValueError)."""
    out: dict = {}
    for item in items or ():
        k, vals = item if isinstance(item, tuple) else fix_item(item)
        if k in out:
            both = tuple(v for v in out[k] if v in vals or str(v) in map(str, vals))
            if not both:
                raise ValueError(f"--fix {k}: {k}={','.join(map(str, out[k]))} and "
                                 f"{k}={','.join(map(str, vals))} leave no value")
            vals = both
        out[k] = vals
    return out


def check_fix(backend, problems, fixed: dict) -> None:
    """That `fixed` leaves a search something for each problem, before anything starts:
    the knobs are the backend's, each value in its domain for the problem on this
    device (the space's declared domains, its device limits applied), the values
    together leave a part of a union (GL: a family), and some valid config; else
    ValueError naming what is wrong."""
    for problem in problems:
        sub = narrow(backend.space(problem), fixed, strict=True)
        if sub.first({}, sub.binding_order()) is None:
            what = " ".join(f"{k}={','.join(map(str, v))}" for k, v in fixed.items())
            raise ValueError(f"--fix {what} leaves no valid config for {problem.key}")


def narrow(space: Space, fixed: dict, strict: bool = False) -> Space:
    """The same space with each knob in `fixed` limited to the given values (those in
    its domain; ValueError where none is, or with `strict` where any is not: --fix)."""
    unknown = [k for k in fixed if k not in space.knobs]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(space.knobs), n=1)
        raise ValueError(f"--fix names unknown knob{'s' * (len(unknown) > 1)} "
                         f"{', '.join(map(repr, unknown))}{f' (did you mean {close[0]!r}?)' if close else ''}; "
                         f"the knobs are {', '.join(space.knobs)}")
    knobs = {}
    for k, dom in space.knobs.items():
        if k in fixed:
            # domain values compare by equality: '330' (str) must match the space's type
            same = lambda v, d: v == d and type(v) is type(d) or str(v) == str(d)  # noqa: E731
            outside = [v for v in fixed[k] if not any(same(v, d) for d in dom)]
            if outside and (strict or len(outside) == len(fixed[k])):
                raise ValueError(f"--fix {k}: {', '.join(map(str, outside))} "
                                 f"{'is' if len(outside) == 1 else 'are'} not in its domain "
                                 f"{', '.join(map(str, dom))} here")
            knobs[k] = tuple(d for d in dom if any(same(v, d) for v in fixed[k]))
        else:
            knobs[k] = dom
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
