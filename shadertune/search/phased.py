"""Phased search (Jiang, "ATLAS for GPU"), driven by `space.phases` (a PhasePlan).

Jiang's order: for each compiler, for each profile, for each unroll: search
np over powers of two; then each mc; then each mrt; evaluate; then
recursively search np on both sides of the best power of two.  A backend
states its plan as

    PhasePlan(outer=("glsl", "fetch", "unroll"), refine="np",
              groups=(("mc",), ("mrt_h", "mrt_w")))

and this module reads it as follows, for each combination of the outer knobs
(first outer knob outermost, domain order):

1. Start point: the best config found so far with this combination's outer
   values put in; if that is not a valid point (or nothing is found yet), the
   plan's optional "start" config (a backend's safe default) with them put
   in; else the first valid config with these outer values in domain order,
   the refine knob varying fastest (so the group knobs start at their first
   values).  Knobs that no phase names stay at the start point's values.
2. Refine knob over its powers of two (integer domain values that are powers
   of two; every value if there are none), the other knobs as the start.
3. Each group in turn, jointly over its knobs (product of their domains),
   with the refine knob at its best value so far and earlier groups at theirs.
4. Recursive refinement of the refine knob at the now best config: keep a
   bracket lo < best < hi (the neighbouring powers of two, or the domain's
   ends); evaluate the accepted domain value nearest the midpoint of
   (lo, best) and of (best, hi); a better one becomes best and the bracket
   closes on it, a worse one becomes the new bracket end; stop when no
   accepted value lies strictly inside either side.

A point the space rejects (cheap membership check) is skipped without being
evaluated; the candidates of steps 2 and 3 are asked for as one batch each
(announced together, so a backend may compile them in parallel).  With
`space.phases` None the generic order is coordinate descent: from the first
valid config, sweep every knob in turn over its domain, moving to the best,
until a full sweep brings no improvement.

A plan with branches (PhasePlan.branch) runs each value of its branch knob in
domain order, with that value's own plan and the value fixed; every step above
then reads the branch's plan.

When the plan is done and budget remains, the search goes on with local.py's
local search from the best config, restarting from the best config of each
other outer combination (best first), then from random draws, until the
convergence rule there ends it.
"""
from __future__ import annotations

import itertools
import random

from ..core.config import Config
from ..core.result import Result
from ..core.space import Space
from .budget import Budget, BudgetExhausted, Tracker, score
from .local import fresh_batches, improve
from .options import SearchOptions
from .random_search import draws


def search(space: Space, evaluate, budget: Budget | None = None,
           options: SearchOptions | None = None) -> list[Result]:
    options = options or SearchOptions()
    run = Tracker(evaluate, budget, canonical=space.canonical)
    try:
        ends = _phased(space, run) if space.phases is not None else _coordinate_descent(space, run)
        # the best of each other outer combination first: other basins, already timed
        others = sorted((c for c in dict.fromkeys(ends) if score(run.get(c)) < float("inf")),
                        key=lambda c: score(run.get(c)))
        restarts = itertools.chain(([c] for c in others),
                                   fresh_batches(draws(space, random.Random(options.seed)),
                                                 options.batch, run))
        improve(space, run, options, restarts)
    except BudgetExhausted:
        pass
    return run.results


# --- the phase plan --------------------------------------------------------

def _phased(space: Space, run: Tracker) -> list[Config]:
    """Run the plan; the best config of each outer combination."""
    return _run_plan(space, run, space.phases, {})


def _run_plan(space: Space, run: Tracker, plan, base: dict) -> list[Config]:
    """`plan` with the knobs of `base` fixed (a branch's value): a plan with branches
    runs each value's own plan in the branch knob's domain order."""
    if plan.branch is not None:
        ends = []
        for value in space.knobs[plan.branch]:
            ends += _run_plan(space, run, plan.plan_for(value), {**base, plan.branch: value})
        return ends
    outer, refine, groups = list(plan.outer), plan.refine, [list(g) for g in plan.groups]
    ends = []
    for values in itertools.product(*(space.knobs[k] for k in outer)):
        fixed = {**base, **dict(zip(outer, values))}
        where = " ".join(f"{k}={v}" for k, v in fixed.items())
        label = (where + ": ") if where else ""
        cur = _start(space, run, fixed, plan)
        if cur is None:
            continue                      # no valid point with these outer values
        if refine is not None:
            run.phase(label + refine)
            cur = _best_of(run, [cur.replace(**{refine: v}) for v in powers_of_two(space.knobs[refine])]
                           + [cur], space)
        for group in groups:
            run.phase(label + " ".join(group))
            combos = itertools.product(*(space.knobs[k] for k in group))
            cur = _best_of(run, [cur.replace(**dict(zip(group, c))) for c in combos] + [cur], space)
        run(cur)                          # step 7: the chosen point is evaluated
        if refine is not None:
            run.phase(label + refine + " refinement")
            cur = refine_recursively(space, run, cur, refine)
        ends.append(cur)
    return ends


def _start(space: Space, run: Tracker, fixed: dict, plan=None) -> Config | None:
    best = run.best()
    if best is not None:
        cand = best.config.replace(**fixed)
        if cand in space:
            return cand
    # A backend may name a start point (its safe default): the np sweep then runs with
    # a sensible mc/mrt instead of the slowest corner of the space.
    if plan is not None and plan.start is not None:
        cand = plan.start.replace(**fixed)
        if cand in space:
            return cand
    # the refine knob varies fastest: the other knobs keep their first (simplest) values
    # when some small refine values need other ones (e.g. np=2 only with mc=2x2)
    refine = plan.refine if plan is not None else None
    rest = [k for k in space.knobs if k not in fixed and k != refine]
    rest += [refine] if refine is not None and refine not in fixed else []
    return space.first(fixed, rest)


def _best_of(run: Tracker, cands: list[Config], space: Space) -> Config:
    """Evaluate the valid candidates (in order, one batch); return the fastest, else
    the last one.

    The last candidate is the current point, kept when nothing valid beats it."""
    best_cfg, best_s = cands[-1], score(run.get(cands[-1]))
    valid = [c for c in cands if c in space]
    for cfg, r in zip(valid, run.many(valid)):
        if score(r) < best_s:
            best_cfg, best_s = cfg, score(r)
    return best_cfg


def powers_of_two(domain) -> list:
    pw = [v for v in domain if _is_int(v) and v > 0 and v & (v - 1) == 0]
    return sorted(pw) if pw else list(domain)


def refine_recursively(space: Space, run: Tracker, cur: Config, knob: str) -> Config:
    """Step 4 above: bisect around cur[knob] among the values the space accepts."""
    dom = sorted(v for v in space.knobs[knob] if _is_int(v))
    b = cur[knob]
    if not _is_int(b) or len(dom) < 2:
        return cur
    pw = powers_of_two(dom)
    lo = max([v for v in pw if v < b], default=dom[0])
    hi = min([v for v in pw if v > b], default=dom[-1])
    best_s = score(run(cur))
    while True:
        moved = False
        for side in ("left", "right"):
            a, c = (lo, b) if side == "left" else (b, hi)
            v = _nearest_inside(space, cur, knob, dom, a, c)
            if v is None:
                continue
            moved = True
            cand = cur.replace(**{knob: v})
            s = score(run(cand))
            if s < best_s:
                # the bracket closes on the new best: the old best becomes an end
                lo, hi = (a, b) if side == "left" else (b, c)
                cur, b, best_s = cand, v, s
                break                     # re-bisect both sides of the new best
            if side == "left":
                lo = v
            else:
                hi = v
        if not moved:
            return cur


def _nearest_inside(space: Space, cur: Config, knob: str, dom: list, a, c):
    """The accepted domain value strictly between a and c nearest their midpoint (lower on ties)."""
    mid = (a + c) / 2
    inside = sorted((v for v in dom if a < v < c), key=lambda v: (abs(v - mid), v))
    for v in inside:
        if cur.replace(**{knob: v}) in space:
            return v
    return None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# --- generic order without a plan -----------------------------------------------

def _coordinate_descent(space: Space, run: Tracker) -> list[Config]:
    cur = _start(space, run, {})
    if cur is None:
        return []
    run.phase("coordinate descent")
    best_s = score(run(cur))
    improved = True
    while improved:
        improved = False
        for knob in space.knobs:
            for cfg in space.neighbours(cur, knob):   # cur fixed during one knob's sweep
                s = score(run(cfg))
                if s < best_s:
                    nxt, best_s, improved = cfg, s, True
            if improved:
                cur = nxt
    return [cur]
