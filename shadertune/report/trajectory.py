"""How searches moved through the space: best-so-far against evaluations and seconds.

    python -m shadertune.report trajectory phased.json random-seed*.json exhaustive.json --out t.png

One line per report and problem (strategies and seeds are separate reports, as
scripts/study writes them).  A report carries every Result in evaluation order
with its timestamp (search/report_json.py): the best verified GFLOP/s so far is
read after each evaluation, and its time from the search's start, which is the
last result's timestamp less the search's own seconds (run_seconds where a
resumed search's report has it).  Results replayed from a store carry their
old timestamps and count at the start.

A report that records its search's phases (search/report_json.py: each with the
index of its first evaluation) gets them marked on both axes: where the plan moved
to another part of the space (GL's phased search: each family; a branch or outer
knob's value), where local search began and where the restarts began
(`milestones`).

The exhaustive optimum of a problem is known where a report searched its
whole pruned space exhaustively (evaluated == space_size); it is drawn as a
line and is what "best / optimum" is measured against.  The fraction of the
pruned space each run evaluated and timed (a slow config is evaluated but
abandoned untimed) is the third panel.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
import json
from dataclasses import dataclass, field

from .compare import labels as report_labels
from .schema import problem_key, problem_label
from .sources import pick_problem, result_point

NAN = float("nan")


@dataclass
class Run:
    label: str
    strategy: str
    problem: dict
    best: list[float]               # best verified GFLOP/s after evaluation 1..n (NaN before one)
    seconds: list[float] | None     # seconds from the search's start at evaluation 1..n
    evaluated: int
    timed: int
    space_size: int
    search_seconds: float
    best_config: dict | None
    name: str = ""                  # the label, with the problem where runs differ in it
    measured: dict = field(default_factory=dict)    # config key -> GFLOP/s of its verified configs
    phases: list = field(default_factory=list)      # the report's phases: {"at", "label"}

    def __post_init__(self):
        self.name = self.name or self.label

    @property
    def final(self) -> float | None:
        vals = [v for v in self.best if not math.isnan(v)]
        return vals[-1] if vals else None

    @property
    def complete_exhaustive(self) -> bool:
        return self.strategy == "exhaustive" and self.space_size > 0 and self.evaluated >= self.space_size

    def fraction(self, n: int) -> float | None:
        return n / self.space_size if self.space_size else None


def best_so_far(gflops: Sequence[float | None]) -> list[float]:
    out, best = [], NAN
    for g in gflops:
        if g is not None and (math.isnan(best) or g > best):
            best = g
        out.append(best)
    return out


def elapsed(timestamps: Sequence[float | None], search_seconds: float) -> list[float] | None:
    """Seconds from the search's start at each result (never decreasing), or None
    where a result has no usable timestamp."""
    if not timestamps or any(t is None for t in timestamps):
        return None
    t0 = max(timestamps) - search_seconds
    out, last = [], 0.0
    for t in timestamps:
        last = max(last, t - t0)
        out.append(last)
    return out


def runs(reports: Sequence[Mapping], sources: Sequence[str], problem: str | None = None) -> list[Run]:
    """A Run per report and problem (only the problem `problem` names, when given)."""
    labs = report_labels(reports, sources)
    out = []
    for rep, src, lab in zip(reports, sources, labs):
        probs = [p for p in rep["problems"] if p["results"]]
        if problem is not None:
            probs = [pick_problem(probs, problem, src)]
        for p in probs:
            flops = 2 * p["M"] * p["N"] * p["K"]
            pts = [result_point(r, flops) for r in p["results"]]
            secs = float(p.get("run_seconds", p["seconds"]))
            out.append(Run(label=lab, strategy=rep["strategy"], problem=dict(p),
                           best=best_so_far([q.gflops for q in pts]),
                           seconds=elapsed([q.timestamp for q in pts], secs),
                           evaluated=len(pts), timed=sum(q.timed for q in pts),
                           space_size=int(p["space_size"]), search_seconds=secs,
                           best_config=(p.get("best") or {}).get("config"),
                           measured={config_key(q.config): q.gflops for q in pts if q.gflops is not None},
                           phases=list(p.get("phases") or ())))
    if len({problem_key(r.problem) for r in out}) > 1:
        for r in out:
            r.name = f"{r.label} {problem_label(r.problem)}"
    return out


def milestones(phases, evaluated: int) -> list[tuple[int, str]]:
    """(index of its first evaluation, name) of each phase a figure marks: the first,
    and each where the search moved on, by the label's lead (up to its first colon,
    first word; 'family=compute ...: np' -> 'family=compute'): another value of the
    plan's branch or outer knob, 'local search', the restarts (one mark where they
    began: 'restart N: ...' -> 'restarts').  The step phases within one lead, the
    convergence note and phases that began after the last evaluation are left out."""
    out: list[tuple[int, str]] = []
    for ph in phases:
        at, label = int(ph["at"]), str(ph["label"])
        head = label.split(":")[0].strip()
        name = ("restarts" if head.startswith("restart ") else head if head == "local search"
                else (head.split() or [""])[0])
        if not name or name == "converged" or at >= evaluated:
            continue
        if not out or out[-1][1] != name:
            out.append((at, name))
    return out


def config_key(config) -> str:
    return json.dumps(config, sort_keys=True)


def exhaustive_runs(rs: Sequence[Run]) -> dict[tuple, Run]:
    """{problem key: the complete exhaustive run of it with the best optimum}."""
    out: dict[tuple, Run] = {}
    for r in rs:
        k = problem_key(r.problem)
        if r.complete_exhaustive and r.final is not None and (k not in out or r.final > out[k].final):
            out[k] = r
    return out


def optima(rs: Sequence[Run]) -> dict[tuple, float]:
    """{problem key: the best GFLOP/s of a complete exhaustive search of it}."""
    return {k: r.final for k, r in exhaustive_runs(rs).items()}


def quality(r: Run, ex: Run | None) -> tuple[float | None, float | None]:
    """best / optimum twice: by the run's own timing of its pick, and by the exhaustive
    run's timing of the same config (one run's timing on both sides: noise between runs
    can neither flatter nor hurt the pick)."""
    if ex is None or r.final is None:
        return None, None
    ref = ex.measured.get(config_key(r.best_config)) if r.best_config else None
    return r.final / ex.final, (ref / ex.final if ref else None)


def share(f: float | None) -> str:
    """A fraction of the space as a percentage a reader can compare: 0.52%, 3.9%, 100%."""
    if f is None:
        return "—"
    p = 100 * f
    return f"{p:.0f}%" if p >= 10 else f"{p:.1f}%" if p >= 1 else f"{p:.2g}%"


def pct1(f: float | None) -> str:
    return "—" if f is None else f"{100 * f:.1f}%"


def table(rs: Sequence[Run]) -> str:
    """Markdown: each run's cost and the quality of what it found."""
    from ..core.texttable import text_table
    from .tables import fmt_gflops, right_from
    exs = exhaustive_runs(rs)
    header = ["run", "problem", "strategy", "evaluated", "timed", "% of pruned space timed",
              "search s", "best GFLOP/s", "best / optimum (own timing)",
              "best / optimum (exhaustive's timing)"]
    body = []
    for r in rs:
        own, ref = quality(r, exs.get(problem_key(r.problem)))
        body.append([r.label, problem_label(r.problem), r.strategy, str(r.evaluated), str(r.timed),
                     share(r.fraction(r.timed)), f"{r.search_seconds:.1f}",
                     fmt_gflops(r.final), pct1(own), pct1(ref)])
    lines = [text_table(header, body, right_from(3, len(header)))]
    if not exs:
        why = ("its exhaustive search verified no config" if any(r.complete_exhaustive for r in rs)
               else "no report searched its whole pruned space exhaustively")
        lines += ["", f"Optimum unknown: {why}."]
    return "\n".join(lines)


# --- drawing ------------------------------------------------------------------

_STRATEGY_COLORS = {"phased": "C0", "random": "C1", "exhaustive": "C2"}
_STYLES = ("-", "--", "-.", ":")


def styles(rs: Sequence[Run]) -> list[dict]:
    """Colour per strategy (linestyles tell runs of one strategy apart); where every run
    has one strategy, a colour per run."""
    if len({r.strategy for r in rs}) == 1:
        return [dict(color=f"C{i % 10}", ls="-") for i in range(len(rs))]
    spare = iter(f"C{i}" for i in range(3, 10))
    colors = {s: _STRATEGY_COLORS.get(s) or next(spare, "C9") for s in dict.fromkeys(r.strategy for r in rs)}
    seen: dict[str, int] = {}
    out = []
    for r in rs:
        i = seen[r.strategy] = seen.get(r.strategy, -1) + 1
        out.append(dict(color=colors[r.strategy], ls=_STYLES[i % len(_STYLES)]))
    return out


def plot(rs: Sequence[Run], out=None, title: str | None = None):
    """The figure: best so far against evaluations and seconds, and the share of the space."""
    from . import figures as F
    if out is not None:
        F.plot_format(out)
    fig = F.figure(12.0, 6.0)
    ax_n, ax_s, ax_f = fig.subplots(1, 3, width_ratios=[3, 3, 2])
    sty = styles(rs)
    opt = optima(rs)
    tops = []
    for r, st in zip(rs, sty):
        n = list(range(1, len(r.best) + 1))
        ax_n.step(n, r.best, where="post", lw=1.8, label=r.name, **st)
        if r.seconds is not None:
            # a log axis has no 0: what the first second held is drawn from 0.01 s
            ax_s.step([max(s, 0.01) for s in r.seconds], r.best, where="post", lw=1.8, label=r.name, **st)
        tops += [v for v in r.best if not math.isnan(v)]
        _mark_phases(ax_n, ax_s, r, st)
    for k, v in opt.items():
        lab = f"exhaustive optimum {F.plain(v)} GFLOP/s" + (f" ({problem_label(_problem(k))})"
                                                           if len(opt) > 1 else "")
        for ax in (ax_n, ax_s):
            ax.axhline(v, color="black", ls=(0, (4, 3)), lw=1.1, label=lab if ax is ax_n else None)
        tops.append(v)
    _count_axis(ax_n, [1] + [len(r.best) for r in rs], "configs evaluated")
    _count_axis(ax_s, [min((s for s in r.seconds if s > 0), default=0.01) for r in rs if r.seconds]
                + [r.seconds[-1] for r in rs if r.seconds], "seconds from the search's start")
    for ax in (ax_n, ax_s):
        ax.set_ylim(0, max(tops) * 1.1 if tops else 1)
        _plain_y(ax)
        ax.grid(True, alpha=0.3)
    ax_n.set_ylabel("best GFLOP/s so far")
    ax_n.set_title("against evaluations", fontsize=10)
    ax_s.set_title("against time" + ("" if all(r.seconds for r in rs) else
                                     " (reports without timestamps left out)"), fontsize=10)
    _fractions(ax_f, rs, sty)
    handles, labels = ax_n.get_legend_handles_labels()
    F.bottom_legend(fig, handles, labels)
    dev = title or "search trajectories"
    probs = list(dict.fromkeys(problem_label(r.problem) for r in rs))
    fig.suptitle(F.wrap(f"{dev}: " + ", ".join(probs), 130), fontsize=11)
    if out is not None:
        F.save(fig, out)
    return fig


def _mark_phases(ax_n, ax_s, r: Run, st: dict) -> None:
    """A dotted line in the run's colour where each milestone's first evaluation lies
    (evaluation number; seconds from the start), named at the top of the axes."""
    for at, name in milestones(r.phases, len(r.best)):
        spots = [(ax_n, at + 1)] + ([(ax_s, max(r.seconds[at], 0.01))] if r.seconds else [])
        for ax, x in spots:
            ax.axvline(x, color=st["color"], ls=":", lw=1.0, alpha=0.7)
            ax.text(x, 1.0, f" {name}", transform=ax.get_xaxis_transform(), rotation=90,
                    va="top", ha="right", fontsize=7, color=st["color"], clip_on=True)


def _problem(key: tuple) -> dict:
    return dict(zip(("M", "N", "K", "dtype", "trans_a", "trans_b"), key))


def _plain_y(ax) -> None:
    from matplotlib import ticker
    from . import figures as F
    ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: F.plain(v)))


def _count_axis(ax, extents, label: str) -> None:
    """A log axis: searches find most of their best in their first evaluations and
    seconds, and runs of 18 and of 456 evaluations share the axis.  Plain labels, at
    1, 2, 5 per decade where the axis spans two decades at most, else at 1 per decade."""
    from matplotlib import ticker
    from . import figures as F
    vals = [v for v in extents if v and v > 0]
    wide = bool(vals) and max(vals) / min(vals) > 100
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    ax.xaxis.set_minor_locator(ticker.LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: F.plain(v)))
    ax.set_xlabel(label + ", log scale")


def _fractions(ax, rs: Sequence[Run], sty) -> None:
    """Horizontal bars: % of the pruned space evaluated (pale) and timed (solid)."""
    from matplotlib import ticker
    from . import figures as F
    ys = list(range(len(rs)))[::-1]
    fr = []
    for y, r, st in zip(ys, rs, sty):
        ev, ti = r.fraction(r.evaluated), r.fraction(r.timed)
        if ev is None:
            continue
        ax.barh(y, 100 * ev, height=0.7, color=st["color"], alpha=0.3)
        ax.barh(y, 100 * ti, height=0.7, color=st["color"])
        ax.text(100 * ev, y, f" {F.plain(100 * ti)}%", va="center", fontsize=8)
        fr += [100 * ev, 100 * ti]
    ax.set_yticks(ys, [F.wrap(r.name, 24) for r in rs], fontsize=8)
    vals = [v for v in fr if v > 0]
    if vals and max(vals) / min(vals) >= 10:
        ax.set_xscale("log")
        ax.set_xlim(min(vals) / 2, max(vals) * 8)
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    else:
        ax.set_xlim(0, max(vals) * 1.35 if vals else 100)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: F.plain(v)))
    ax.set_xlabel("% of the pruned space" + (", log scale" if ax.get_xscale() == "log" else ""))
    ax.set_title("share of the pruned space\ntimed (pale: evaluated)", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
