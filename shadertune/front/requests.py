"""Config resolution: what matmul(config=...) asks for, as a Config for one problem.

The same rules and the same messages for every backend:

- 'auto'            the best stored tuning result (shadertune.selection.chain), else its fallbacks;
                    with tune='first-use', a shape the store has no result for is
                    tuned first (bounded; shadertune.front.first_use)
- 'default' / None  backend.default_config(problem)
- a preset name     backend.presets(): e.g. 'fast' (the default config); GL adds 'jiang', 'naive'
- a dict / Config   knobs; the ones left out are filled from the default config for the
  or JSON text      problem, and when that mix breaks a restriction the filled knobs (only
                    those) move to the nearest valid values.  Unknown knob names get a
                    "did you mean"; a value written as text ('330' vs 330) is matched to
                    the domain's value of the same spelling.

parse_request() checks the form once per call; resolve() gives the Config for one
problem.  With adapt=True (a tiling remainder: the caller's config was made for the
main tile) every knob may move to the nearest valid config, and the problem's default
is taken when none is near.
"""
from __future__ import annotations

import difflib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..selection import chain as select     # at import, never read from sys.modules on a call (notes/reliability.md)
from ..core.config import Config
from .first_use import ensure_tuned
from ..perfmodel.first_use_plan import parse as parse_tune
from ..core.problem import Problem

# A filled or adapted config may move at most this many knobs: beyond that it is no
# longer the config the caller asked for.
MAX_MOVES = 2

_BUILTIN = ("auto", "default")


@dataclass(frozen=True)
class ConfigRequest:
    kind: str                      # 'auto' | 'default' | 'preset' | 'knobs'
    name: str | None = None        # the preset
    knobs: Config | None = None    # the knobs given
    tune: object = None            # 'auto' only: a perfmodel.FirstUse (tune on first use) or None

    def describe(self) -> str:
        return self.name if self.kind == "preset" else self.kind if self.knobs is None else str(self.knobs.to_dict())


def parse_request(spec, backend, tune=None) -> ConfigRequest:
    """Check the form of `spec` and `tune` (no problem needed yet); raise
    TypeError/ValueError.  `tune` (None, 'first-use' or a perfmodel.FirstUse)
    goes with config 'auto' only: it fills the store auto reads."""
    if tune is None and type(spec) is str:     # the common calls: one of two constants
        request = _BUILTIN_REQUESTS.get(spec)
        if request is not None:
            return request
    request = _parse_config(spec, backend)
    if tune is not None:
        first_use = parse_tune(tune)
        if first_use is not None:
            if request.kind != "auto":
                raise ValueError(f"matmul: tune={tune!r} needs config='auto', got config={spec!r}")
            return replace(request, tune=first_use)
    return request


_BUILTIN_REQUESTS = {name: ConfigRequest(name) for name in _BUILTIN}


def _parse_config(spec, backend) -> ConfigRequest:
    if spec is None:
        return ConfigRequest("default")
    if isinstance(spec, str):
        text = spec.strip()
        if text in _BUILTIN:
            return ConfigRequest(text)
        if text.startswith("{"):
            try:
                d = json.loads(text)
            except json.JSONDecodeError as e:
                raise ValueError(f"matmul: config is not valid JSON ({e}): {spec!r}") from None
            return _knobs_request(d)
        presets = backend.presets()
        if text in presets:
            return ConfigRequest("preset", name=text)
        names = list(_BUILTIN) + list(presets)
        raise ValueError(f"matmul: unknown config {spec!r} for the {backend.name} backend{_did_you_mean(text, names)} "
                         f"(expected 'auto', 'default', a preset: {', '.join(presets)}, "
                         f"a dict of knobs or JSON text)")
    if isinstance(spec, Mapping):
        return _knobs_request(spec)
    raise TypeError(f"matmul: config must be 'auto', 'default', a preset name, a dict or Config "
                    f"of knobs, or JSON text, got {type(spec).__name__}")


def _knobs_request(d) -> ConfigRequest:
    if not isinstance(d, Mapping):
        raise ValueError(f"matmul: config JSON must be an object of knobs, got {type(d).__name__}")
    knobs = {}
    for k, v in d.items():
        if isinstance(v, np.generic):   # np.int64(64) means 64
            v = v.item()
        knobs[k] = v
    try:
        return ConfigRequest("knobs", knobs=Config(knobs))
    except TypeError as e:
        raise TypeError(f"matmul: {e}") from None


def _did_you_mean(name: str, names) -> str:
    close = difflib.get_close_matches(str(name), [str(n) for n in names], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


# --- resolution --------------------------------------------------------------------
def resolve(backend, problem: Problem, request, *, db=None, where: str | None = None,
            adapt: bool = False) -> Config:
    """The Config `request` (a ConfigRequest or anything parse_request takes) names for
    `problem`; `where` names the caller's shapes in errors (default: the problem)."""
    if not isinstance(request, ConfigRequest):
        request = parse_request(request, backend)
    if request.kind == "default":
        return backend.default_config(problem)
    if request.kind == "auto":
        if request.tune is not None:     # tuning writes the store; the selection reads it
            ensure_tuned(backend, problem, db, request.tune)
        return select.select_config(backend, problem, db=db)[0]
    if request.kind == "preset":
        given = Config(backend.preset_config(request.name, problem))
        label = f"preset {request.name!r} ({given.to_dict()})"
    else:
        given = request.knobs
        label = f"config {given.to_dict()}"
    return fill(backend, problem, given, where=where, adapt=adapt, label=label)


def fill(backend, problem: Problem, given: Mapping, *, where: str | None = None,
         adapt: bool = False, label: str | None = None) -> Config:
    """`given` (some or all knobs) completed from the default config and checked."""
    space = backend.space(problem)
    where = where or problem.key
    label = label or f"config {dict(given)}"
    knobs = {}
    for k, v in given.items():
        if k not in space.knobs:
            raise ValueError(f"matmul: unknown config knob {k!r} for the {backend.name} backend"
                             f"{_did_you_mean(k, space.knobs)} (its knobs: {', '.join(space.knobs)})")
        knobs[k] = _in_domain(v, space.knobs[k])
        if not adapt and knobs[k] not in space.knobs[k]:
            raise ValueError(f"matmul: {label} is not valid for {where} on the {backend.name} backend: "
                             f"{k}={v!r} not in {list(space.knobs[k])}")
    # knobs given that no config holds together (adapting may move them: not an error)
    conflict = None if adapt else space.conflict(knobs)
    if conflict is not None:
        raise ValueError(f"matmul: {label} is not valid for {where} on the {backend.name} backend: "
                         f"{conflict}")
    default = backend.default_for(problem, knobs)
    # the canonical form: every knob the space reads (a union's part completes what it holds)
    start = space.canonical(Config({**default.to_dict(), **knobs}))
    why = space.why_invalid(start)
    if why is None:
        return start
    fixed = set() if adapt else set(knobs)
    near = nearest_valid(space, start, fixed)
    if near is not None:
        return near
    if adapt:
        return default
    filled = {k: v for k, v in default.items() if k not in knobs}
    note = (f" (the knobs not given were taken from the default config: {filled}, and no "
            f"config within {MAX_MOVES} changes of them is valid)") if filled else ""
    raise ValueError(f"matmul: {label} is not valid for {where} on the {backend.name} backend: "
                     f"{why}{note}")


def _in_domain(value, domain):
    """value as the domain spells it: '330' for 330, 4 for '4', 1 for True; else as given."""
    for same in (lambda d: d == value and type(d) is type(value),
                 lambda d: str(d) == str(value),
                 lambda d: d == value):
        for d in domain:
            if same(d):
                return d
    return value


def nearest_valid(space, start: Config, fixed=frozenset()) -> Config | None:
    """The valid config that changes fewest knobs of `start` outside `fixed` (at most
    MAX_MOVES), each moved as little as it can (numbers by ratio, others by domain
    order); None if there is none."""
    if start in space:
        return start
    free = [k for k in space.knobs if k not in fixed]
    ranked = {k: _by_closeness(space.knobs[k], start[k]) for k in free}
    for moves in range(1, MAX_MOVES + 1):
        best, best_cost = None, None
        for knobs in itertools.combinations(free, moves):
            options = [[(i, v) for i, v in enumerate(ranked[k]) if v != start[k]] for k in knobs]
            for choice in itertools.product(*options):
                cost = sum(i for i, _ in choice)
                if best_cost is not None and cost >= best_cost:
                    continue
                cand = start.replace(**{k: v for k, (_, v) in zip(knobs, choice)})
                if cand in space:
                    best, best_cost = cand, cost
        if best is not None:
            return best
    return None


def _by_closeness(domain, v0) -> list:
    def distance(v):
        if _number(v) and _number(v0):
            if v > 0 and v0 > 0:
                return abs(math.log2(v / v0))
            return abs(v - v0)
        return 0.0 if v == v0 else math.inf
    order = {v: i for i, v in enumerate(domain)}
    return sorted(domain, key=lambda v: (distance(v), order[v]))


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
