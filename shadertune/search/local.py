"""Local search with restarts: what every strategy does with budget left over.

From a config, a step looks at its neighbourhood (see `neighbourhood`) and
moves to a better neighbour, until none is better (a local optimum), as in
Kernel Tuner's greedy iterated local search and tinygrad's beam search:

- a neighbour already evaluated that beats the current config is moved to at
  once (no evaluation);
- the others are timed in batches of `options.batch`; the first batch with a
  better config moves the search to the best of that batch;
- with a cost model, the neighbours are timed in order of predicted time and
  at most `options.step_evals` per step (the model's best guesses); without
  one, every neighbour may be timed.

Restarts: after the first local optimum the search times a batch of fresh
starting points (the strategy says which: the next-ranked configs of the
model, the best of other phases, random draws) and climbs from the best of
them.  Convergence rule: the search ends when `options.patience` restarts in a
row have not improved the best time by at least `options.min_gain`
(relative), or when the restarts run out; the budget may end it anywhere
(BudgetExhausted).  A budget with `spend_all` and a limit (time or evaluations)
turns the rule off: the restarts go on until the budget is spent or they run
out.  A restart that finds a gain resets the count, so a search that still
improves keeps its budget.  A restart counts only if it timed
something new and some config has passed verification: restarts among
configs already timed are no evidence, and a model whose best guesses all
fail must not end the search.

On several workers each batch names what the search may ask for next, most
likely first (Tracker.many's `ahead`: timed where workers would idle, and on a
cluster run on across the search's next decision):

- a step's batch: the step's later batches; a step's last batch then the
  next restart batch (asked once the climb ends, which a step's last batch
  usually ends: measured, a climb moved after its step's last batch in 1 of 12
  steps), then the next step from the batch's predicted best (its first: the
  step is in predicted order), what the climb times if it moves there
  (next_step);
- a restart batch: the next restart batch (FreshBatches.peek), then the first
  step from the batch's predicted best (restart_ahead says why in that order).

The search asks for the same configs as on one worker (given the same
measurements); on one worker none of this is computed.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

from ..core.config import Config
from ..core.space import Space
from .budget import Tracker, score
from .options import SearchOptions


def neighbourhood(space: Space, cfg: Config) -> list[Config]:
    """Valid configs one move from `cfg`, in this order:

    1. one knob changed, knobs in declaration order: an ordered (numeric)
       domain gives the values 1, 2, 4, 8, ... places away on either side,
       nearest first (large domains stay cheap; far values are a few moves
       away); any other domain gives each other value;
    2. one knob group of the space's phase plan changed jointly (every
       combination of the group's values): coupled knobs, such as a warp's
       TM, TN, WM, WN, rarely stay valid when one changes alone.

    `cfg` is read in the space's canonical form (Space.canonical: every knob of the
    space, a union's part completing what it holds), so every knob can be moved."""
    cfg = space.canonical(cfg)
    moves: list[Config] = []
    for knob, dom in space.knobs.items():
        moves += [cfg.replace(**{knob: v}) for v in _values_near(dom, cfg[knob])]
    plan = space.phases.for_config(cfg) if space.phases is not None else None
    for group in (plan.groups if plan is not None else ()):
        if len(group) > 1:
            for combo in itertools.product(*(space.knobs[k] for k in group)):
                moves.append(cfg.replace(**dict(zip(group, combo))))
    return [c for c in dict.fromkeys(moves) if c != cfg and c in space]


def _values_near(dom: tuple, value) -> list:
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in dom):
        return [v for v in dom if v != value]
    ordered = sorted(dom)
    i = ordered.index(value)
    out, step = [], 1
    while i - step >= 0 or i + step < len(ordered):
        out += [ordered[j] for j in (i - step, i + step) if 0 <= j < len(ordered)]
        step *= 2
    return out


def next_step(space: Space, run: Tracker, cfg: Config, options: SearchOptions,
              skip: Iterable[Config] = (), near: list[Config] | None = None) -> list[Config]:
    """The configs a climb's step at `cfg` times: its neighbours not evaluated yet (nor in
    `skip`: configs being timed now), with a cost model the options.step_evals predicted
    fastest, fastest first; without one every such neighbour, in neighbourhood order.
    climb's own step, and what a search offers ahead where it may move to `cfg` next
    (step_ahead).  `near`: cfg's neighbourhood where the caller has it."""
    skip = {space.canonical(c) for c in skip}
    near = neighbourhood(space, cfg) if near is None else near
    todo = [c for c in near if run.get(c) is None and c not in skip]
    pred = options.predict(todo) if todo else None
    if pred is not None:
        order = sorted(range(len(todo)), key=lambda i: (pred[i], i))
        todo = [todo[i] for i in order[:options.step_evals]]
    return todo


def predicted_best(batch: list[Config], options: SearchOptions) -> Config:
    """The config of `batch` the cost model predicts fastest (the first on a tie), or
    without a model the batch's first: the guess at where a climb goes on from it."""
    pred = options.predict(batch)
    return batch[0] if pred is None else batch[min(range(len(batch)), key=lambda i: (pred[i], i))]


def step_ahead(space: Space, run: Tracker, batch: list[Config], options: SearchOptions,
               best: Config | None = None) -> Iterator[Config]:
    """What a climb from `batch`'s best times first, guessed before the batch is timed:
    next_step from `best` (default: predicted_best), the batch left out.  A generator,
    computed when first read: Tracker.many reads `ahead` only where workers would idle,
    so a search on one worker never pays for it."""
    if not batch:
        return
    yield from next_step(space, run, predicted_best(batch, options) if best is None else best,
                         options, skip=batch)


def climb(space: Space, run: Tracker, start: Config, options: SearchOptions,
          then: Callable[[], list[Config]] | None = None) -> Config:
    """Hill-climb from `start` to a local optimum (see the module docstring).  `then`:
    what the search times after the climb (the next restart batch: FreshBatches.peek),
    offered ahead by a step's last batch before the next step's guess."""
    cur = space.canonical(start)
    cur_s = score(run(cur))
    while True:
        near = neighbourhood(space, cur)
        known = [r for r in map(run.get, near) if r is not None]
        best_known = min(known, key=score, default=None)
        if score(best_known) < cur_s:
            cur, cur_s = best_known.config, score(best_known)
            continue
        todo = next_step(space, run, cur, options, near=near)
        moved = False
        for i in range(0, len(todo), options.batch):
            batch, rest = todo[i:i + options.batch], todo[i + options.batch:]
            # ahead: the step's later batches (asked if this one finds nothing better);
            # after a step's last batch what follows the climb (`then`: asked once the
            # climb ends, which a step's last batch usually does), then the next step
            # from this batch's predicted best (todo is in predicted order: its first),
            # asked only if the climb moves there
            after = then() if then is not None and not rest else ()
            ahead = itertools.chain(rest, after, step_ahead(space, run, batch, options, best=batch[0]))
            b = min(run.many(batch, ahead=ahead), key=score)
            if score(b) < cur_s:
                cur, cur_s, moved = b.config, score(b), True
                break
        if not moved:
            return cur


def improve(space: Space, run: Tracker, options: SearchOptions,
            restarts: Iterable[list[Config]]) -> None:
    """Climb from the best so far, then from restarts until the convergence rule
    (module docstring) or the end of `restarts`.  Restarts with peek() (FreshBatches)
    show their next batch, offered ahead (restart_ahead)."""
    best = run.best()
    restarts = iter(restarts)
    peek = getattr(restarts, "peek", None)
    if best is not None:
        run.phase("local search")
        climb(space, run, best.config, options, then=peek)
    stale = 0
    for i in itertools.count(1):
        if stale >= options.patience and not run.budget.to_spend:
            run.phase(f"converged: {stale} restarts without a {options.min_gain:.0%} gain")
            return
        batch = next(restarts, None)
        if not batch:
            return
        before, evaluated = score(run.best()), len(run.path)
        run.phase(f"restart {i}: {len(batch)} new starting point{'s' if len(batch) > 1 else ''}")
        ok = [r for r in run.many(batch, ahead=restart_ahead(space, run, batch, options, peek)) if r.ok]
        if ok:
            run.phase(f"restart {i}: local search")
            climb(space, run, min(ok, key=score).config, options, then=peek)
        if score(run.best()) < before * (1 - options.min_gain):
            stale = 0
        elif run.best() is not None and len(run.path) > evaluated:
            stale += 1    # (a restart that timed nothing new, or found nothing correct yet, is no evidence)


def restart_ahead(space: Space, run: Tracker, batch: list[Config], options: SearchOptions,
                  peek: Callable[[], list[Config]] | None = None) -> Iterator[Config]:
    """What a search may ask for after the restart `batch`, most likely first: the next
    restart batch (peek()), then the climb's first step from the batch's predicted best
    (step_ahead).  The next restart batch is asked for whatever this one measures (once
    the climb from it ends, unless the search converges or its budget is spent); the step
    only where the model guessed the batch's best, a weak guess among configs ranked next
    to each other (predicted alike).  A generator, as step_ahead."""
    if peek is not None:
        yield from peek()
    yield from step_ahead(space, run, batch, options)


class FreshBatches(Iterator[list[Config]]):
    """Batches of up to `size` configs from `source` that `run` has not evaluated when
    the batch is taken (after the batches `first`, taken as they are).

    peek(): the batch that would come next were nothing more evaluated, without taking
    it: read from source.fork() (an independent copy that yields what the source would
    yield next: Listed, random_search.Draws, model.Starts), never from the source itself
    (draws pass over evaluated configs as they are read, so reading them early could
    change what they yield); [] from a source that cannot fork."""

    def __init__(self, source: Iterator[Config], size: int, run: Tracker,
                 first: Iterable[list[Config]] = ()):
        self._source, self._size, self._run = iter(source), size, run
        self._first = list(first)

    def __next__(self) -> list[Config]:
        if self._first:
            return self._first.pop(0)
        batch = self._fresh(self._source)
        if not batch:
            raise StopIteration
        return batch

    def peek(self) -> list[Config]:
        if self._first:
            return list(self._first[0])
        fork = getattr(self._source, "fork", None)
        return self._fresh(fork()) if fork is not None else []

    def _fresh(self, source: Iterator[Config]) -> list[Config]:
        return list(itertools.islice((c for c in source if self._run.get(c) is None), self._size))


def fresh_batches(source: Iterator[Config], size: int, run: Tracker,
                  first: Iterable[list[Config]] = ()) -> FreshBatches:
    """Batches of up to `size` configs from `source` that `run` has not evaluated
    (FreshBatches)."""
    return FreshBatches(source, size, run, first)


class Listed(Iterator[Config]):
    """An iterator over a list that can fork (FreshBatches.peek)."""

    def __init__(self, items: list, at: int = 0):
        self._items, self._at = items, at

    def __next__(self):
        if self._at >= len(self._items):
            raise StopIteration
        self._at += 1
        return self._items[self._at - 1]

    def fork(self) -> "Listed":
        return Listed(self._items, self._at)
