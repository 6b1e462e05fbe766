"""Space: knob domains, restrictions that declare the knobs they read, a phase plan.

A restriction is a rule a valid config must meet, in one of three forms:

- an expression string over knob names and the space's `constants` (problem
  sizes, device limits), as in Kernel Tuner and CLBlast: the names it uses
  are what it reads, ``"mrt_w * mrt_h <= max_draw_buffers"``;
- a callable whose parameter names are knobs and constants, as in pyATF:
  ``def block_shape(BM, BN, WM, WN): ...`` is called with those values;
- a callable taking one mapping, marked with ``@restriction(knobs=[...])`` to
  say which knobs it reads; unmarked, it reads every knob (checked on whole
  configs only).

Rules are pure functions of what they read (the enumeration caches their
verdicts).  A rule that raises rejects the config.  Enumeration binds the knobs
one at a time, depth first, in an order that completes rules early, and checks
each rule as soon as all the knobs it reads are bound: a dead subtree is cut at
its root instead of being walked to every leaf.  The result is exactly the
product of the domains filtered by every rule.

Pruning happens here, before anything is compiled.
"""
from __future__ import annotations

import inspect
import itertools
import math
import operator
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Union

from .config import Config

Restriction = Union[str, Callable[..., bool]]

# Names an expression restriction may use besides knobs and constants.
_SAFE_BUILTINS = {"min": min, "max": max, "abs": abs, "len": len, "int": int,
                  "ceil": math.ceil, "floor": math.floor, "log2": math.log2,
                  "True": True, "False": False, "None": None}


def restriction(*, knobs: Sequence[str]):
    """Mark a callable that takes one config mapping as reading only `knobs`:
    it is then checked as soon as those knobs are bound (given a mapping that
    holds at least them)."""
    def mark(fn):
        fn.knobs = tuple(knobs)
        return fn
    return mark


@dataclass(frozen=True)
class PhasePlan:
    """How the phased strategy walks a space (a backend's order, Jiang's for GL).

    outer:  knobs enumerated in full, outermost first;
    refine: the knob searched over its powers of two, then refined recursively;
    groups: knob groups searched jointly in turn after the refine knob;
    start:  the config each sweep starts from (a backend's safe default), or None;
    branch, branches: a knob whose values each have a plan of their own, as
            ((value, PhasePlan), ...): the strategy walks the branch knob's values in
            domain order, each with its value's plan (GL: the compute family and the
            fragment family, whose knobs and best order differ).  A plan with
            branches has no outer, refine, groups or start of its own.
    """
    outer: tuple[str, ...] = ()
    refine: str | None = None
    groups: tuple[tuple[str, ...], ...] = ()
    start: Config | None = None
    branch: str | None = None
    branches: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "outer", tuple(self.outer))
        object.__setattr__(self, "groups", tuple(tuple(g) for g in self.groups if g))
        if self.start is not None and not isinstance(self.start, Config):
            object.__setattr__(self, "start", Config(self.start))
        object.__setattr__(self, "branches", tuple((v, p) for v, p in self.branches))
        if self.branch is not None and (self.outer or self.refine or self.groups or self.start):
            raise ValueError("a phase plan with branches has no outer, refine, groups or start of its own")
        if any(not isinstance(p, PhasePlan) or p.branch is not None for _, p in self.branches):
            raise ValueError("a branch's plan is a PhasePlan without branches of its own")

    def plan_for(self, value) -> "PhasePlan":
        """The plan of one value of the branch knob (an empty plan for a value without one)."""
        return dict(self.branches).get(value, PhasePlan())

    def for_config(self, cfg: Mapping) -> "PhasePlan":
        """The plan that walks `cfg`: its branch's, or this one."""
        return self.plan_for(cfg[self.branch]) if self.branch is not None else self

    @property
    def start_point(self) -> Config | None:
        """Where a search without other seeds starts: the start, or the first branch's."""
        if self.branch is None:
            return self.start
        return next((p.start for _, p in self.branches if p.start is not None), None)

    def named_knobs(self) -> list[str]:
        own = [*self.outer, *([self.refine] if self.refine else []),
               *(k for g in self.groups for k in g)]
        if self.branch is not None:
            own.append(self.branch)
        return own + [k for _, p in self.branches for k in p.named_knobs()]

    def starting_at(self, start: Mapping | None) -> "PhasePlan":
        """This plan starting at `start`; with branches, the branch of start's value."""
        if self.branch is None:
            return replace(self, start=None if start is None else Config(start))
        if start is None:
            return self
        value = start[self.branch]
        return replace(self, branches=tuple((v, p.starting_at(start) if v == value else p)
                                            for v, p in self.branches))

    def with_starts(self, fix) -> "PhasePlan":
        """This plan with every start replaced by fix(start) (None drops it)."""
        if self.branch is not None:
            return replace(self, branches=tuple((v, p.with_starts(fix)) for v, p in self.branches))
        return self if self.start is None else replace(self, start=fix(self.start))

    def starts(self) -> list[Config]:
        """Every start point of the plan (its branches' included)."""
        if self.branch is not None:
            return [s for _, p in self.branches for s in p.starts()]
        return [self.start] if self.start is not None else []


@dataclass(frozen=True)
class _Rule:
    """One restriction, compiled: what it reads and how it is called.

    `args` are the names passed positionally (knobs and constants); a mapping
    rule (`takes_mapping`) is given one mapping instead and `args` are the
    knobs it reads."""
    source: Restriction = field(compare=False)
    call: Callable = field(compare=False)
    args: tuple[str, ...]
    reads: frozenset
    takes_mapping: bool
    whole: bool = False                 # a mapping rule that may read every knob (undeclared)
    # verdicts by argument values (rules are pure); bounded, exceptions never kept
    verdicts: dict = field(default_factory=dict, compare=False, repr=False)

    def check(self, cfg: Mapping, constants: Mapping) -> bool:
        """The verdict on `cfg` (a mapping rule gets `cfg` itself)."""
        if self.takes_mapping:
            return bool(self.call(cfg))
        return self.check_values({**constants, **cfg})

    def check_mapping(self, cfg: Mapping) -> bool:
        """The verdict of a mapping rule on `cfg`; one that declares what it reads is
        cached by those values (rules are pure)."""
        if self.whole:
            return bool(self.call(cfg))
        key = tuple([cfg[k] for k in self.args])
        ok = self.verdicts.get(key)
        if ok is None:
            if len(self.verdicts) >= _MAX_VERDICTS:
                self.verdicts.clear()
            ok = self.verdicts[key] = bool(self.call(cfg))
        return ok

    def check_values(self, values: dict) -> bool:
        """The verdict of a positional rule, given knob and constant values by name."""
        if len(self.args) == 1:
            key = (values[self.args[0]],)
        else:
            key = operator.itemgetter(*self.args)(values) if self.args else ()
        ok = self.verdicts.get(key)
        if ok is None:
            if len(self.verdicts) >= _MAX_VERDICTS:
                self.verdicts.clear()
            ok = self.verdicts[key] = bool(self.call(*key))
        return ok


_MAX_VERDICTS = 1 << 16


class Space:
    def __init__(self, knobs: Mapping[str, Sequence[Any]],
                 restrictions: Sequence[Restriction] = (),
                 constants: Mapping[str, Any] | None = None,
                 phases: PhasePlan | None = None):
        if not knobs:
            raise ValueError("a Space needs at least one knob")
        self.knobs: dict[str, tuple] = {}
        for name, dom in knobs.items():
            dom = tuple(dom)
            if not dom:
                raise ValueError(f"knob {name!r} has an empty domain")
            if len(set(dom)) != len(dom):
                raise ValueError(f"knob {name!r} has repeated values: {dom}")
            bad = [v for v in dom if not isinstance(v, (str, int, float, bool)) and v is not None]
            if bad:
                raise TypeError(f"knob {name!r} has values that are not JSON scalars: {bad}")
            self.knobs[name] = dom
        self._domain_sets = {k: frozenset(d) for k, d in self.knobs.items()}
        self.constants = dict(constants or {})
        clash = set(self.constants) & set(self.knobs)
        if clash:
            raise ValueError(f"constants shadow knobs: {sorted(clash)}")
        self.restrictions = list(restrictions)
        self._rules = [self._compile(r) for r in self.restrictions]
        self._admit_order = tuple(self._rules)      # admits(): last rejecter first
        self._valid: list[Config] | None = None
        self._size: int | None = None
        self._walks: dict = {}
        self._order: list[str] | None = None
        self._phases: PhasePlan | None = None
        self.phases = phases

    def __getstate__(self) -> dict:
        # the compiled walks (closures and their caches) are rebuilt where a space is
        # unpickled (a cluster's coordinator receives a worker's): they need not travel
        return {**self.__dict__, "_walks": {}}

    # --- the phase plan ---------------------------------------------------
    @property
    def phases(self) -> PhasePlan | None:
        return self._phases

    @phases.setter
    def phases(self, plan: PhasePlan | None) -> None:
        """A plan may only name this space's knobs, and start (if given) inside it."""
        if plan is not None:
            if not isinstance(plan, PhasePlan):
                raise TypeError(f"a phase plan is a PhasePlan, got {type(plan).__name__}")
            bad = [k for k in plan.named_knobs() if k not in self.knobs]
            if bad:
                raise ValueError(f"phase plan names unknown knobs: {bad}")
            # a start is where local search reads every knob: kept in canonical form
            plan = plan.with_starts(self.canonical)
            for start in plan.starts():
                why = self.why_invalid(start)
                if why:
                    raise ValueError(f"phase plan starts outside the space: {why}")
        self._phases = plan

    # --- restrictions -----------------------------------------------------
    def _compile(self, r: Restriction) -> _Rule:
        names = set(self.knobs) | set(self.constants)
        if isinstance(r, str):
            code = compile(r, f"<restriction {r!r}>", "eval")
            used = _names(code)
            unknown = used - names - set(_SAFE_BUILTINS)
            if unknown:
                raise ValueError(f"restriction {r!r} names unknown knobs or constants: "
                                 f"{sorted(unknown)}")
            # a function of the knobs it names; constants and builtins are its globals
            args = tuple(k for k in self.knobs if k in used)
            fn = eval(f"lambda {', '.join(args)}: ({r})",
                      {"__builtins__": _SAFE_BUILTINS, **self.constants})
            return _Rule(r, fn, args, frozenset(args), False)
        if not callable(r):
            raise TypeError(f"restriction must be a callable or an expression string, got {r!r}")
        declared = getattr(r, "knobs", None)       # set by @restriction(knobs=...)
        if declared is not None:
            unknown = set(declared) - set(self.knobs)
            if unknown:
                raise ValueError(f"restriction {_describe(r)} declares unknown knobs: "
                                 f"{sorted(unknown)}")
            return _Rule(r, r, tuple(declared), frozenset(declared), True)
        params = _parameters(r)
        if params is not None and params and all(p in names for p in params):
            return _Rule(r, r, params, frozenset(p for p in params if p in self.knobs), False)
        if params is not None and len(params) != 1:
            raise ValueError(f"restriction {_describe(r)}: parameters {list(params)} must all be "
                             f"knobs or constants, or it takes one config")
        # one mapping argument, no declaration: it may read any knob
        return _Rule(r, r, tuple(self.knobs), frozenset(self.knobs), True, whole=True)

    # --- canonical form ---------------------------------------------------
    def canonical(self, cfg: Mapping) -> Config:
        """`cfg` in the one form this space's configs take: every knob of the space
        (a plain space: the config as given; a union completes a config to its part's
        held values).  Strategies hold configs in this form, so one kernel is one
        config: searched once, stored once, and every knob of it can be read."""
        return cfg if isinstance(cfg, Config) else Config(cfg)

    def conflict(self, given: Mapping) -> str | None:
        """Why the knob values `given` (some knobs) can never be part of one valid
        config of this space, as one line; None when no such conflict is known
        (a plain space: only whole configs are judged, by why_invalid)."""
        return None

    # --- membership -----------------------------------------------------
    def why_invalid(self, cfg: Mapping) -> str | None:
        """None if `cfg` is a valid point, else a one-line reason (naming the rule)."""
        cfg = cfg if isinstance(cfg, Config) else Config(cfg)
        values = cfg.to_dict()                  # plain dict: the rules read it many times
        why = self._rejection(values, self._rules, cfg)
        if why is None:
            return None
        if why[0] == "keys":
            missing = set(self.knobs) - set(values)
            if missing:
                return f"missing knobs: {sorted(missing)}"
            return f"unknown knobs: {sorted(set(values) - set(self.knobs))}"
        if why[0] == "domain":
            name = why[1]
            return f"{name}={values[name]!r} not in {list(self.knobs[name])}"
        _, rule, error = why
        if error is not None:
            return f"restriction {_describe(rule.source)} failed: {error}"
        return f"restriction {_describe(rule.source)} not met"

    def __contains__(self, cfg: Mapping) -> bool:
        return self.why_invalid(cfg) is None

    def admits(self, values: dict) -> bool:
        """why_invalid(values) is None, for a plain dict of knob values, without the reason
        and without building a Config (a ranker tests ~10^5 candidate points a problem,
        most of them rejected)."""
        # the rules in the order of their last rejections (the verdict is their AND,
        # whatever the order): a ranker's rejected points then fail at the first check
        order = self._admit_order
        why = self._rejection(values, order, None)
        if why is None:
            return True
        if why[0] == "rule" and why[1] is not order[0]:
            self._admit_order = (why[1],) + tuple(r for r in order if r is not why[1])
        return False

    def _rejection(self, values: dict, rules, cfg: Config | None):
        """The first reason `values` (knob values by name) is not a point of the space,
        trying `rules` in that order: ("keys",) (knobs missing or unknown), ("domain",
        knob), ("rule", rule, the exception it raised or None); None for a valid point.
        cfg: `values` as a Config for the rules that take one (made here when needed)."""
        if values.keys() != self._domain_sets.keys():
            return ("keys",)
        for name, dom in self._domain_sets.items():
            if values[name] not in dom:
                return ("domain", name)
        merged = {**values, **self.constants}
        for rule in rules:
            try:
                if rule.takes_mapping:
                    cfg = cfg if cfg is not None else Config(values)
                    ok = rule.check_mapping(cfg)
                else:
                    ok = rule.check_values(merged)
            except Exception as e:  # a restriction that cannot be evaluated rejects
                return ("rule", rule, e)
            if not ok:
                return ("rule", rule, None)
        return None

    # --- enumeration ----------------------------------------------------
    @property
    def full_size(self) -> int:
        """Points before restrictions: the product of the domain sizes."""
        return math.prod(len(d) for d in self.knobs.values())

    def binding_order(self) -> list[str]:
        """The order enumeration binds knobs in, chosen to keep the tree small.

        After binding a set S of knobs the tree has about
        prod(|domain| for S) x prod(pass rate of each rule S completes) nodes
        (pass rates sampled on random values of what each rule reads); the
        deepest levels hold most nodes.  So the order is chosen from the last
        knob back: last, the knob whose level multiplies the tree the most
        (a large domain its rules barely prune, e.g. a padding knob), and so
        on; ties go to declaration order, later knobs later."""
        if self._order is None:
            self._order = self._choose_order()
        return list(self._order)

    def _choose_order(self) -> list[str]:
        rules = [(r.reads, math.log(p)) for r, p in zip(self._rules, self._pass_rates())]
        logdom = {k: math.log(len(d)) for k, d in self.knobs.items()}
        decl = list(self.knobs)
        left = set(decl)
        backwards: list[str] = []
        while left:
            def level(k):
                """log of how much binding k last (of those left) multiplies the tree"""
                return logdom[k] + sum(lp for reads, lp in rules if k in reads and reads <= left)
            k = max(sorted(left, key=decl.index, reverse=True), key=lambda k: round(level(k), 9))
            backwards.append(k)
            left.remove(k)
        return backwards[::-1]

    def _pass_rates(self, samples: int = 64) -> list[float]:
        """Each rule's share of passes on `samples` seeded random draws of what it
        reads (1 for a rule that reads every knob: it only runs on whole configs)."""
        rng = random.Random(0)
        rates = []
        for rule in self._rules:
            if rule.reads == frozenset(self.knobs) and len(self.knobs) > 1:
                rates.append(1.0)
                continue
            check = _bound_check(rule, {k: i for i, k in enumerate(self.knobs)} |
                                 {c: len(self.knobs) + i for i, c in enumerate(self.constants)},
                                 list(self.knobs), cache=False)
            vals = [None] * len(self.knobs) + list(self.constants.values())
            passed = 0
            for _ in range(samples):
                for i, k in enumerate(self.knobs):
                    if k in rule.reads:
                        vals[i] = rng.choice(self.knobs[k])
                passed += check(vals)
            rates.append(max(passed, 0.5) / samples)   # never 0: a rare pass still exists
        return rates

    def _walk(self, held: Mapping | None = None) -> "_Walk":
        """The rules compiled for walking the product (kept: draws reuse them), configs
        built with the `held` items besides the space's own knobs."""
        key = tuple(sorted((held or {}).items()))
        walk = self._walks.get(key)
        if walk is None:
            walk = self._walks[key] = _Walk(self, dict(key))
        return walk

    def configs(self) -> list[Config]:
        """Every valid config (cached), depth first in binding_order(), each knob's
        values in domain order."""
        if self._valid is None:
            self._valid = self._walk().configs()
            self._size = len(self._valid)
        return list(self._valid)

    def count(self) -> int:
        """How many valid configs there are (cached), without making them: knobs that
        no rule links are independent groups, counted each on its own and multiplied
        (a knob no rule reads multiplies the count by its domain's size); a group is
        counted by the pruned depth-first walk that enumerates it."""
        if self._size is None:
            self._size = len(self._valid) if self._valid is not None else self._count()
        return self._size

    @property
    def count_known(self) -> bool:
        """Whether count() answers at once (counted, enumerated or noted before)."""
        return self._size is not None or self._valid is not None

    def note_count(self, n: int) -> None:
        """The count made elsewhere (another process's enumeration of this same space),
        kept as count() keeps its own."""
        if self._size is None:
            self._size = int(n)

    def _count(self) -> int:
        groups = self._independent_groups()
        if len(groups) == 1:
            return self._walk().count()
        total = 1
        for i, group in enumerate(groups):
            # a rule of constants alone (it reads no knob) goes with the first group
            rules = [r.source for r in self._rules if r.reads <= group and (r.reads or i == 0)]
            sub = Space({k: d for k, d in self.knobs.items() if k in group}, rules, self.constants)
            total *= sub._walk().count()
            if not total:
                return 0
        return total

    def _independent_groups(self) -> list[frozenset]:
        """The knobs split into groups that no rule links (union-find over what each
        rule reads), in declaration order of their first knob."""
        root = {k: k for k in self.knobs}

        def find(k):
            while root[k] != k:
                root[k] = root[root[k]]
                k = root[k]
            return k
        for rule in self._rules:
            reads = [k for k in self.knobs if k in rule.reads]
            for k in reads[1:]:
                root[find(k)] = find(reads[0])
        groups: dict = {}
        for k in self.knobs:
            groups.setdefault(find(k), set()).add(k)
        return [frozenset(g) for g in groups.values()]

    def draw(self, rng: random.Random) -> Config | None:
        """One point of the product drawn as random_config draws it (the same values from
        the same generator): the config when it is valid, else None.  The rules are
        checked on the drawn values in binding order with cached verdicts, and a Config
        is made only for a valid point, so a rejected draw costs little."""
        return self._walk().draw(rng)

    def first(self, fixed: Mapping, order: Sequence[str]) -> Config | None:
        """The first valid config with the `fixed` knob values, the other knobs taken
        in `order` (the last varying fastest), each in domain order; None if there is
        none.  Each rule is checked as soon as what it reads is bound, so a branch no
        valid config lies in costs one check, not a walk of its product."""
        rest = [k for k in order if k not in fixed]
        rest += [k for k in self.knobs if k not in fixed and k not in rest]
        whole = frozenset(self.knobs)
        partial = [r for r in self._rules if not (r.takes_mapping and r.reads == whole)]
        bound: dict = {**self.constants, **fixed}
        seen = set(fixed)
        due = [[r for r in partial if r.reads <= seen]]
        for k in rest:
            seen.add(k)
            due.append([r for r in partial if k in r.reads and r.reads <= seen])

        def passes(rules) -> bool:
            return all(_safe_check(r, bound, self.constants) for r in rules)

        def walk(d: int) -> Config | None:
            if d == len(rest):
                cfg = Config({k: bound[k] for k in self.knobs})
                return cfg if self.why_invalid(cfg) is None else None
            for v in self.knobs[rest[d]]:
                bound[rest[d]] = v
                if passes(due[d + 1]):
                    found = walk(d + 1)
                    if found is not None:
                        return found
            return None
        return walk(0) if passes(due[0]) else None

    def __iter__(self) -> Iterator[Config]:
        return iter(self.configs())

    def __len__(self) -> int:
        return self.count()

    def neighbours(self, cfg: Config, knob: str) -> list[Config]:
        """Valid configs that differ from `cfg` only in `knob`."""
        out = []
        for v in self.knobs[knob]:
            c = cfg.replace(**{knob: v})
            if c in self:
                out.append(c)
        return out

    def random_config(self, rng: random.Random) -> Config:
        """A point of the product of the domains drawn uniformly (maybe invalid)."""
        return Config({n: rng.choice(dom) for n, dom in self.knobs.items()})

    def narrowed(self, domains: Mapping[str, Sequence]) -> "Space":
        """The same space (same class, rules and constants) with the knobs in `domains`
        limited to those values (each a non-empty subset of its domain); no plan."""
        knobs = {k: tuple(domains.get(k, dom)) for k, dom in self.knobs.items()}
        return type(self)(knobs, self.restrictions, self.constants)

    def describe(self) -> dict:
        return {"knobs": {k: list(v) for k, v in self.knobs.items()},
                "restrictions": [_describe(r) for r in self.restrictions],
                "full_size": self.full_size, "size": len(self)}


class UnionSpace(Space):
    """The union of disjoint spaces told apart by the value of one knob, `branch`.

    Each part is (value, space, fixed): the branch value its configs hold, a Space
    over the knobs they vary, and the values they hold for the union's other knobs.
    A config of the union carries every knob; it is valid when its branch value names
    a part, it holds that part's fixed values, and the rest is valid in the part.
    Enumeration, membership, first configs and random draws go to the parts, so no
    part's knobs multiply another's (GL: the compute family and the fragment family).
    """

    def __init__(self, branch: str, parts: Sequence[tuple[Any, Space, Mapping]],
                 phases: PhasePlan | None = None, domain_order: Sequence | None = None):
        """`parts` in the order enumeration and the branch knob's domain take them;
        `domain_order` (branch values) the order in which the parts' knobs and values
        make the union's knob order and domains (default: the parts' order)."""
        if not parts:
            raise ValueError("a UnionSpace needs at least one part")
        self.branch = branch
        self.parts: dict = {}
        for value, space, fixed in parts:
            if value in self.parts:
                raise ValueError(f"{branch}={value!r} names two parts")
            if branch in space.knobs or branch in fixed:
                raise ValueError(f"a part of a union over {branch!r} must not have it as a knob")
            if set(space.knobs) & set(fixed):
                raise ValueError(f"part {branch}={value!r} both varies and fixes "
                                 f"{sorted(set(space.knobs) & set(fixed))}")
            self.parts[value] = (space, dict(fixed))
        self.domain_order = tuple(v for v in (domain_order or ()) if v in self.parts)
        self.domain_order += tuple(v for v in self.parts if v not in self.domain_order)
        knobs: dict[str, tuple] = {branch: tuple(self.parts)}
        for value in self.domain_order:
            space, fixed = self.parts[value]
            for k, dom in [*space.knobs.items(), *((k, (v,)) for k, v in fixed.items())]:
                have = knobs.setdefault(k, ())
                knobs[k] = have + tuple(v for v in dom if v not in have)
        names = set(knobs) - {branch}
        for value, (space, fixed) in self.parts.items():
            if set(space.knobs) | set(fixed) != names:
                raise ValueError(f"part {branch}={value!r} leaves out knobs "
                                 f"{sorted(names - set(space.knobs) - set(fixed))}")
        self.knobs = knobs
        self._domain_sets = {k: frozenset(d) for k, d in knobs.items()}
        self.constants = {k: v for space, _ in self.parts.values() for k, v in space.constants.items()}
        self.restrictions = [r for space, _ in self.parts.values() for r in space.restrictions]
        self._valid = None
        self._size = None
        self._walks = {}
        # a draw picks a part in proportion to its product (random_config's weights)
        self._draw_parts = list(self.parts)
        self._draw_weights = list(itertools.accumulate(space.full_size for space, _ in self.parts.values()))
        self._phases = None
        self.phases = phases

    def _whole(self, value, fixed: Mapping, cfg: Config) -> Config:
        return Config({self.branch: value, **fixed, **cfg.to_dict()})

    def canonical(self, cfg: Mapping) -> Config:
        """`cfg` with the knobs its part holds filled in where it leaves them out (a
        config without the branch knob, or naming no part, is returned as it is)."""
        cfg = cfg if isinstance(cfg, Config) else Config(cfg)
        part = self.parts.get(cfg.get(self.branch))
        if part is None:
            return cfg
        missing = {k: v for k, v in part[1].items() if k not in cfg}
        return cfg.replace(**missing) if missing else cfg

    def conflict(self, given: Mapping) -> str | None:
        """The knobs `given` fit no part: a value another knob's part holds otherwise
        (family=compute with mc='2x2': the compute family holds mc='1x4'), or values
        of different parts' own knobs."""
        value = given.get(self.branch)
        names = [value] if self.branch in given else list(self.parts)
        clashes = []
        for v in names:
            if v not in self.parts:
                return None                 # the domain check names it
            space, fixed = self.parts[v]
            clash = next((f"{k}={given[k]!r}" + (f" (it holds {k}={fixed[k]!r})" if k in fixed
                                                 else f" (its {k}: {list(space.knobs[k])})")
                          for k in given if k != self.branch and k in self.knobs and
                          (given[k] != fixed[k] if k in fixed else given[k] not in space.knobs[k])),
                         None)
            if clash is None:
                return None
            clashes.append(f"{self.branch}={v!r} takes no {clash}")
        if self.branch in given:
            return clashes[0]
        return f"the knobs given fit no {self.branch}: " + "; ".join(clashes)

    def why_invalid(self, cfg: Mapping) -> str | None:
        cfg = cfg if isinstance(cfg, Config) else Config(cfg)
        value = cfg.get(self.branch)
        if value not in self.parts:
            return f"{self.branch}={value!r} not in {list(self.parts)}"
        if cfg.keys() != self._domain_sets.keys():
            missing = set(self.knobs) - set(cfg)
            if missing:
                return f"missing knobs: {sorted(missing)}"
            return f"unknown knobs: {sorted(set(cfg) - set(self.knobs))}"
        space, fixed = self.parts[value]
        for k, v in fixed.items():
            if cfg[k] != v:
                return f"{k}={cfg[k]!r}: {self.branch}={value} holds {k}={v!r}"
        return space.why_invalid(Config({k: cfg[k] for k in space.knobs}))

    @property
    def full_size(self) -> int:
        """Points before restrictions: the parts' products added up."""
        return sum(space.full_size for space, _ in self.parts.values())

    def _part_walk(self, value) -> "_Walk":
        """The walk of one part, its configs made whole (the branch value and held knobs)."""
        space, fixed = self.parts[value]
        return space._walk({self.branch: value, **fixed})

    def configs(self) -> list[Config]:
        """Every valid config (cached): the parts' in branch order, each part's in its
        own enumeration order."""
        if self._valid is None:
            self._valid = [c for value in self.parts for c in self._part_walk(value).configs()]
            self._size = len(self._valid)
        return list(self._valid)

    def count(self) -> int:
        """The parts' counts added up (none of them enumerated)."""
        if self._size is None:
            self._size = (len(self._valid) if self._valid is not None
                          else sum(space.count() for space, _ in self.parts.values()))
        return self._size

    def draw(self, rng: random.Random) -> Config | None:
        """random_config's point (a part in proportion to its product, then a point of
        it), whole, when valid; else None."""
        value = rng.choices(self._draw_parts, cum_weights=self._draw_weights)[0]
        return self._part_walk(value).draw(rng)

    def first(self, fixed: Mapping, order: Sequence[str]) -> Config | None:
        for value, (space, held) in self.parts.items():
            if fixed.get(self.branch, value) != value or any(fixed.get(k, v) != v for k, v in held.items()):
                continue
            found = space.first({k: v for k, v in fixed.items() if k in space.knobs},
                                [k for k in order if k in space.knobs])
            if found is not None:
                return self._whole(value, held, found)
        return None

    def random_config(self, rng: random.Random) -> Config:
        """A part drawn in proportion to its product, then a point of its product."""
        sizes = [space.full_size for space, _ in self.parts.values()]
        value = rng.choices(list(self.parts), weights=sizes)[0]
        space, fixed = self.parts[value]
        return self._whole(value, fixed, space.random_config(rng))

    def narrowed(self, domains: Mapping[str, Sequence]) -> "UnionSpace":
        """The union of the parts narrowed to `domains` (a part whose branch value or
        fixed values fall outside them drops out)."""
        parts, why = [], []
        for value, (space, fixed) in self.parts.items():
            held = next((k for k, v in fixed.items() if v not in domains.get(k, (v,))), None)
            own = {k: tuple(v for v in space.knobs[k] if v in domains[k]) for k in space.knobs if k in domains}
            empty = next((k for k, v in own.items() if not v), None)
            if value not in domains.get(self.branch, (value,)):
                why.append(f"{self.branch}={value} is not asked for")
            elif held is not None:
                why.append(f"{self.branch}={value} holds {held}={fixed[held]}")
            elif empty is not None:            # a knob left with none of the part's values drops it
                why.append(f"{self.branch}={value} has none of those {empty} values")
            else:
                parts.append((value, space.narrowed(own), fixed))
        if not parts:
            raise ValueError(f"no {self.branch} is left: {'; '.join(why)}")
        return type(self)(self.branch, parts, domain_order=self.domain_order)

    def binding_order(self) -> list[str]:
        return [self.branch] + [k for k in self.knobs if k != self.branch]


class _Walk:
    """One space's rules compiled for its product in binding order: depth-first
    enumeration (each rule checked as soon as what it reads is bound, so a dead
    subtree is cut at its root), counting (the same walk, no configs made), and
    draws (a point of the product, checked).  Configs are made with `held` items
    besides the space's own knobs (a union's branch value and the knobs its part
    holds), so a union's configs are made once, whole.  Rule verdicts are cached
    by the values each rule reads (rules are pure), bounded for the draws' sake."""

    def __init__(self, space: Space, held: Mapping):
        order = space.binding_order()
        n = self.n = len(order)
        self.order = order
        depth = {k: i for i, k in enumerate(order)}
        # the value list: the bound knob values by depth, then the constants
        const_names = list(space.constants)
        self.consts = [space.constants[c] for c in const_names]
        index = {**depth, **{c: n + i for i, c in enumerate(const_names)}}
        checks: list[list[Callable[[list], bool]]] = [[] for _ in range(n)]
        everything = frozenset(space.knobs)
        self.leaf_rules: list[_Rule] = []
        for rule in space._rules:
            if rule.takes_mapping and rule.reads == everything:
                self.leaf_rules.append(rule)            # given the finished config
                continue
            at = max((depth[k] for k in rule.reads), default=0)
            checks[at].append(_bound_check(rule, index, order, limit=_MAX_VERDICTS))
        self.passes = [_all_of(c) for c in checks]
        self.checks = [p for p in self.passes if p is not None]
        # a config's items sorted by name, the held ones in place; the (name, value)
        # pairs are made once per domain value
        names = sorted([*space.knobs, *held])
        self.slot = [names.index(k) for k in order]
        self.template = [None] * len(names)
        for k, v in held.items():
            self.template[names.index(k)] = (k, v)
        self.doms = [[(v, (k, v)) for v in space.knobs[k]] for k in order]
        self.pairs = [{v: pair for v, pair in dom} for dom in self.doms]
        # draws: the knobs in declaration order (random_config's) and their depths
        self.drawn = [(space.knobs[k], depth[k]) for k in space.knobs]
        self.own = tuple(sorted(space.knobs)) if held and self.leaf_rules else None
        self.constants = space.constants

    def _leaf_ok(self, cfg: Config) -> bool:
        """The rules that read every knob, on the space's own config."""
        if self.own is not None:
            cfg = Config.from_sorted_items(tuple((k, cfg[k]) for k in self.own))
        return all(_safe_check(r, cfg, self.constants) for r in self.leaf_rules)

    def configs(self) -> list[Config]:
        out: list[Config] = []
        self._run(out)
        return out

    def count(self) -> int:
        return self._run(None)

    def _run(self, out: list | None) -> int:
        """Walk the pruned tree; append each valid config to `out` (None: count only)."""
        n, passes, slot, doms = self.n, self.passes, self.slot, self.doms
        vals: list[Any] = [None] * n + self.consts
        items = list(self.template)
        from_items = Config.from_sorted_items
        leaf_rules = self.leaf_rules
        build = out is not None or bool(leaf_rules)
        found = 0

        def leaf(dom, ok, s):
            nonlocal found
            if not build:
                if ok is None:
                    found += len(dom)
                    return
                for v, _ in dom:
                    vals[n - 1] = v
                    if ok(vals):
                        found += 1
                return
            for v, pair in dom:
                vals[n - 1] = v
                if ok is None or ok(vals):
                    items[s] = pair
                    cfg = from_items(tuple(items))
                    if not leaf_rules or self._leaf_ok(cfg):
                        found += 1
                        if out is not None:
                            out.append(cfg)

        def bind(d):
            if d == n - 1:
                leaf(doms[d], passes[d], slot[d])
                return
            ok, s = passes[d], slot[d]
            for v, pair in doms[d]:
                vals[d] = v
                if ok is None or ok(vals):
                    items[s] = pair
                    bind(d + 1)
        bind(0)
        return found

    def draw(self, rng: random.Random) -> Config | None:
        """A point of the product, each knob drawn with rng.choice in declaration order
        (as Space.random_config draws it); the config if every rule passes, else None."""
        vals: list[Any] = [None] * self.n + self.consts
        choice = rng.choice
        for dom, d in self.drawn:
            vals[d] = choice(dom)
        for ok in self.checks:
            if not ok(vals):
                return None
        items = list(self.template)
        for d, (s, pairs) in enumerate(zip(self.slot, self.pairs)):
            items[s] = pairs[vals[d]]
        cfg = Config.from_sorted_items(tuple(items))
        return cfg if not self.leaf_rules or self._leaf_ok(cfg) else None


def _bound_check(rule: _Rule, index: dict, order: list, cache: bool = True,
                 limit: int | None = None) -> Callable[[list], bool]:
    """A check on the enumeration's value list: the rule's verdict for the values
    it reads, cached (rules are pure; at most `limit` kept); an exception rejects."""
    verdicts: dict = {} if cache else _NoCache()
    names = sorted(rule.reads, key=order.index) if rule.takes_mapping else list(rule.args)
    positions = [index[n] for n in names]
    # the cache key: the values read (one value alone when the rule reads one)
    key_of = operator.itemgetter(*positions) if positions else (lambda vals: ())
    if rule.takes_mapping:
        call = lambda key: rule.call(dict(zip(names, (key,) if len(names) == 1 else key)))  # noqa: E731
    elif len(positions) == 1:
        call = rule.call
    else:
        call = lambda key: rule.call(*key)  # noqa: E731

    def check(vals):
        key = key_of(vals)
        ok = verdicts.get(key)
        if ok is None:
            try:
                ok = bool(call(key))
            except Exception:
                ok = False
            if limit is not None and len(verdicts) >= limit:
                verdicts.clear()
            verdicts[key] = ok
        return ok
    return check


def _all_of(checks: list) -> Callable[[list], bool] | None:
    """One check that passes when all of `checks` pass (None: nothing to check)."""
    if not checks:
        return None
    if len(checks) == 1:
        return checks[0]
    first, rest = checks[0], _all_of(checks[1:])
    return lambda vals: first(vals) and rest(vals)


class _NoCache(dict):
    """A cache that keeps nothing (sampling pass rates must call the rule)."""
    def __setitem__(self, key, value):
        pass


def _safe_check(rule: _Rule, cfg: Config, constants: Mapping) -> bool:
    try:
        return rule.check(cfg, constants)
    except Exception:
        return False


def _names(code) -> set[str]:
    """Global names an expression's code reads (comprehensions included)."""
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out |= _names(c) - set(c.co_varnames)
    return out


def _parameters(fn) -> tuple[str, ...] | None:
    """Names of fn's positional parameters without defaults (those with defaults
    keep them), or None when they cannot be read."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind not in kinds for p in sig.parameters.values()):
        return None
    return tuple(n for n, p in sig.parameters.items() if p.default is inspect.Parameter.empty)


def _describe(r: Restriction) -> str:
    """A rule as messages name it: its expression, else its docstring on one line."""
    if isinstance(r, str):
        return repr(r)
    doc = getattr(r, "__doc__", None)
    return " ".join(doc.split()) if doc else getattr(r, "__name__", repr(r))
