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

On an evaluator that runs several evaluations at once, each step names what it
may ask for next (a sweep: the next sweep's candidates from the current point;
the refinement: the values its bisection can reach after its next one), and
idle workers time those ahead (Tracker.many); the steps and what they ask for
are the same as one evaluation at a time.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, replace

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
        restarts = fresh_batches(draws(space, random.Random(options.seed), skip=run.evaluated),
                                 options.batch, run, first=[[c] for c in others])
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
        # the plan's sweeps, each a function of the current point: its candidates
        steps = ([(refine, lambda c: [c.replace(**{refine: v}) for v in powers_of_two(space.knobs[refine])])]
                 if refine is not None else [])
        steps += [(" ".join(g), lambda c, g=g: [c.replace(**dict(zip(g, combo)))
                                                 for combo in itertools.product(*(space.knobs[k] for k in g))])
                  for g in groups]
        for i, (name, sweep) in enumerate(steps):
            run.phase(label + name)
            # ahead (idle workers only): the next sweep's candidates from this point,
            # what it times if this sweep keeps the point
            after = steps[i + 1][1] if i + 1 < len(steps) else None
            cur = _best_of(run, sweep(cur) + [cur], space,
                           ahead=(lambda c=cur, f=after: f(c)) if after is not None else None)
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


def _best_of(run: Tracker, cands: list[Config], space: Space, ahead=None) -> Config:
    """Evaluate the valid candidates (in order, one batch); return the fastest, else
    the last one.  `ahead`: a function giving configs the search may ask for next,
    called only where idle workers could time them (Tracker.many).

    The last candidate is the current point, kept when nothing valid beats it."""
    best_cfg, best_s = cands[-1], score(run.get(cands[-1]))
    valid = [c for c in cands if c in space]
    later = [c for c in ahead() if c in space] if ahead is not None and run.parallelism > 1 else ()
    for cfg, r in zip(valid, run.many(valid, ahead=later)):
        if score(r) < best_s:
            best_cfg, best_s = cfg, score(r)
    return best_cfg


def powers_of_two(domain) -> list:
    pw = [v for v in domain if _is_int(v) and v > 0 and v & (v - 1) == 0]
    return sorted(pw) if pw else list(domain)


def refine_recursively(space: Space, run: Tracker, cur: Config, knob: str) -> Config:
    """Step 4 above: bisect around cur[knob] among the values the space accepts.

    The bisection is a walk whose next candidate depends only on which earlier
    candidates beat the best (Bisection); on several workers the candidates the walk
    may reach next are timed ahead beside the one it needs (Tracker.many), and the
    walk itself is the same."""
    dom = sorted(v for v in space.knobs[knob] if _is_int(v))
    b = cur[knob]
    if not _is_int(b) or len(dom) < 2:
        return cur
    pw = powers_of_two(dom)
    walk = Bisection(b, max([v for v in pw if v < b], default=dom[0]),
                     min([v for v in pw if v > b], default=dom[-1]))
    # whether the space accepts a value with the other knobs as they are (the walk
    # moves `knob` alone)
    base, accepted = cur, {}

    def accepts(v) -> bool:
        if v not in accepted:
            accepted[v] = base.replace(**{knob: v}) in space
        return accepted[v]
    best_s = score(run(cur))
    while True:
        step = walk.next(dom, accepts)
        if step is None:
            return cur
        cand = cur.replace(**{knob: step[1]})
        ahead = [cur.replace(**{knob: v}) for v in walk.reachable(
            dom, accepts, run.parallelism, known=lambda v: run.get(cur.replace(**{knob: v})) is not None)]
        (r,) = run.many([cand], ahead=ahead)
        better = score(r) < best_s
        if better:
            cur, best_s = cand, score(r)
        walk = walk.after(step, better)


@dataclass(frozen=True)
class Bisection:
    """The state of the recursive refinement of one knob: the best value `b`, the
    bracket lo < b < hi, and where the pass stands (`side` to try next; `moved`:
    this pass tried a candidate).  Each pass tries the accepted value nearest the
    midpoint of (lo, b), then of (b, hi); a better one becomes b and the bracket
    closes on it (a new pass), a worse one becomes that side's end; the walk ends
    when a pass finds no accepted value strictly inside either side."""
    b: int
    lo: int
    hi: int
    side: str = "left"
    moved: bool = False

    def next(self, dom: list, accepts) -> tuple[str, int] | None:
        """The next candidate, (side, value), or None: the walk is over."""
        state = self
        while True:
            if state.side == "left":
                v = _nearest_inside(dom, accepts, state.lo, state.b)
                if v is not None:
                    return "left", v
                state = replace(state, side="right")
            v = _nearest_inside(dom, accepts, state.b, state.hi)
            if v is not None:
                return "right", v
            if not state.moved:
                return None
            state = replace(state, side="left", moved=False)

    def after(self, step: tuple[str, int], better: bool) -> "Bisection":
        """The state once `step`'s candidate was timed, better than b or not."""
        side, v = step
        if better:                  # the bracket closes on the new best; a new pass
            lo, hi = (self.lo, self.b) if side == "left" else (self.b, self.hi)
            return Bisection(v, lo, hi)
        if side == "left":          # its right side next, in this pass
            return replace(self, lo=v, side="right", moved=True)
        return replace(self, hi=v, side="left", moved=False)     # the pass is over

    def reachable(self, dom: list, accepts, n: int, known=lambda v: False) -> list[int]:
        """Up to n - 1 values the walk may try after its next one, none of them `known`
        (timed already): breadth first over both outcomes of each step, the worse
        outcome first (then the other side of the bracket comes next, as one batch
        with the next one)."""
        out: list[int] = []
        step = self.next(dom, accepts)
        if step is None or n <= 1:
            return out
        level, seen = [(self, step)], {step[1]}
        for _ in range(8):                       # a bounded look-ahead
            nxt = []
            for state, st in level:
                for better in (False, True):
                    child = state.after(st, better)
                    cs = child.next(dom, accepts)
                    if cs is None:
                        continue
                    nxt.append((child, cs))
                    if cs[1] not in seen:
                        seen.add(cs[1])
                        if known(cs[1]):
                            continue
                        out.append(cs[1])
                        if len(out) >= n - 1:
                            return out
            level = nxt
            if not level:
                break
        return out


def _nearest_inside(dom: list, accepts, a, c):
    """The accepted domain value strictly between a and c nearest their midpoint (lower on ties)."""
    mid = (a + c) / 2
    inside = sorted((v for v in dom if a < v < c), key=lambda v: (abs(v - mid), v))
    return next((v for v in inside if accepts(v)), None)


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
    knobs = list(space.knobs)
    while improved:
        improved = False
        for i, knob in enumerate(knobs):
            # cur is fixed during one knob's sweep: its configs are one batch (in the
            # order one at a time would take them), the next knob's sweep ahead
            near = space.neighbours(cur, knob)
            after = (space.neighbours(cur, knobs[i + 1])
                     if i + 1 < len(knobs) and run.parallelism > 1 else [])
            for cfg, r in zip(near, run.many(near, ahead=after)):
                if score(r) < best_s:
                    nxt, best_s, improved = cfg, score(r), True
            if improved:
                cur = nxt
    return [cur]
