"""Plots: GFLOP/s against problem size, with baselines, rooflines and the search itself.

matplotlib is imported only here and only when a plot is asked for; figures
are built with matplotlib.figure.Figure (Agg canvas), never pyplot, so no
global backend state is touched.  Rules that keep a plot readable:
- constrained layout places every label and the legend inside the canvas;
  the canvas is FIGSIZE x DPI pixels whatever it holds;
- tick labels are plain numbers (20, 500, 1,000; never 1.58x10^1); the size
  axis is ticked at the sizes measured;
- GFLOP/s is drawn on a log axis only when the values span a decade or more;
- every config the search timed is drawn as a faint dot at its size, so a
  report of one size shows the spread of its configs, not a lonely point;
  other shapes are categories in a panel of their own; where configs were
  timed one after another, a last panel shows the best so far against configs
  evaluated;
- the file format is the output's extension: .png, .svg or .pdf.
"""
from __future__ import annotations

import math
import pathlib
from collections.abc import Mapping, Sequence

from ..core.optional import optional_import
from ..errors import ShadertuneError
from .rooflines import ceiling_lines, no_roofline, roofline_of
from .schema import ReportError, problem_label

FIGSIZE = (10.0, 5.5)       # inches
DPI = 100                   # -> 1000 x 550 pixels
PIXELS = (int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI))
XLABEL = "square size n (M = N = K)"
SHAPES_XLABEL = "other shapes (M x N x K)"
YLABEL = "GFLOP/s"
PROGRESS_XLABEL = "configs evaluated"
PROGRESS_YLABEL = "best GFLOP/s so far"
FORMATS = ("png", "svg", "pdf")
REPORT_COLORS = ("C0", "C3", "C2", "C1", "C4", "C5", "C9")



class PlotsUnavailable(ShadertuneError, ImportError):
    """matplotlib (the `plot` extra) is not installed: no plot or figure can be drawn.
    Not a bad argument: the command lines exit 1 with it, before any work."""


def require_matplotlib():
    """matplotlib.figure, or PlotsUnavailable saying how to install it."""
    return optional_import("matplotlib.figure", "plots need matplotlib: pip install 'shadertune[plot]'",
                           error=PlotsUnavailable)


# Fixed colours per baseline, so a name looks the same in every plot and never
# takes a report's colour.
_BASE_COLORS = {"cublas": "black", "numpy-cpu": "tab:gray", "handtuned-naive": "tab:olive",
                "handtuned-2x2": "tab:orange", "handtuned-4x4mrt": "tab:green"}
_SPARE = ["tab:purple", "tab:brown", "tab:pink", "tab:cyan"]
_MARKERS = "s^vD<>P*X"


def plot_format(out) -> str:
    """The format named by `out`'s extension; a ReportError for any other."""
    suffix = pathlib.Path(out).suffix
    fmt = suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ReportError(f"{out}: unknown plot format {suffix or '(no extension)'!r}; "
                          f"use {', '.join('.' + f for f in FORMATS)}")
    return fmt


def _save(fig, out) -> None:
    """Through the one output writer (shadertune.core.atomic): a full disk or a Ctrl-C leaves
    no partial PNG; its folder is made as the search's --report does."""
    from ..core.atomic import OutputError, output
    fmt = plot_format(out)
    try:
        with output(out, "wb", stream_ok=False) as f:
            fig.savefig(f, dpi=DPI, format=fmt)          # no bbox_inches: the pixel size stays fixed
    except OutputError as e:
        raise ReportError(f"{out}: cannot write the plot ({e.why})") from None


def plain(v: float) -> str:
    """A tick label as a reader writes it: 0.05, 2.5, 16, 1,000."""
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else ""
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.0f}" if abs(v - round(v)) < 0.05 else f"{v:.1f}"
    return f"{v:.3g}"


def size_of(p: Mapping) -> float:
    return float(p["M"] * p["N"] * p["K"]) ** (1.0 / 3.0)


def _square(p: Mapping) -> bool:
    return p["M"] == p["N"] == p["K"]


def _base_color(name: str) -> str:
    return _BASE_COLORS.get(name) or _SPARE[sum(map(ord, name)) % len(_SPARE)]


def _base_marker(name: str) -> str:
    return _MARKERS[sum(map(ord, name)) % len(_MARKERS)]


def _best(p: Mapping) -> float | None:
    return p["best"]["gflops"] if p.get("best") else None


def _timed(p: Mapping) -> list[float]:
    """GFLOP/s of every verified, timed config of a problem, in evaluation order."""
    return [r["gflops"] for r in p.get("results") or ()
            if r.get("status") == "ok" and isinstance(r.get("gflops"), (int, float)) and r["gflops"] > 0]


class _Panel:
    """Where problems sit on an axis: squares over their size n (joined by lines),
    other shapes as categories, one per shape (a line through them would zig-zag)."""

    def __init__(self, ax, problems, squares: bool):
        self.ax, self.squares = ax, squares
        self.problems = [p for p in problems if _square(p) == squares]
        if not squares:
            names = dict.fromkeys(problem_label(p) for p in
                                  sorted(self.problems, key=lambda p: (size_of(p), problem_label(p))))
            self.slots = {name: i for i, name in enumerate(names)}

    def x(self, p) -> float:
        return size_of(p) if self.squares else float(self.slots[problem_label(p)])

    def mine(self, problems):
        return [p for p in problems if _square(p) == self.squares]


def _plot(panel, problems, value, style, label, **kw) -> list[float]:
    """value(p) for each of the panel's problems: a line over sizes, markers over shapes.
    Returns the values drawn."""
    pts = sorted((panel.x(p), v) for p in panel.mine(problems) if (v := value(p)) is not None)
    if pts:
        if not panel.squares:
            kw = {k: v for k, v in kw.items() if k != "lw"}
            style = "none"
        panel.ax.plot([x for x, _ in pts], [v for _, v in pts], ls=style, label=label, **kw)
    return [v for _, v in pts]


def _draw_spread(panel, problems, color, label) -> list[float]:
    xs, ys = [], []
    for p in panel.mine(problems):
        g = _timed(p)
        xs += [panel.x(p)] * len(g)
        ys += g
    if ys:
        panel.ax.scatter(xs, ys, s=9, color=color, alpha=0.25, linewidths=0, label=label, zorder=2)
    return ys


def _draw_report(panel, report, ceilings, color, *, label, problems=None, baselines=None,
                 spread=True) -> list[float]:
    """One report's best GFLOP/s, the configs it timed, its baselines, its rooflines.
    `baselines`: None for all the report's baselines, else {name: labels of the reports
    that hold it} (a name held by several reports is labelled with the report).
    Returns every value drawn (for the y scale)."""
    import matplotlib.colors as mcolors
    problems = report["problems"] if problems is None else problems
    drawn = _draw_spread(panel, problems, color, f"{label}: configs timed") if spread else []
    drawn += _plot(panel, problems, _best, "-", f"{label} (tuned)", marker="o", color=color,
                   lw=2.2, zorder=5)
    names = dict.fromkeys(n for p in problems for n in (p.get("baselines") or {}))
    for n in names:
        if baselines is not None and n not in baselines:
            continue
        shown = n if baselines is None or len(baselines[n]) < 2 else f"{n} ({label})"
        drawn += _plot(panel, problems, lambda p: ((p.get("baselines") or {}).get(n) or {}).get("gflops"),
                       "--", shown, marker=_base_marker(n), color=_base_color(n), lw=1.2, ms=5)
    drawn += _plot(panel, problems, lambda p: (roofline_of(report, p, ceilings) or {}).get("gflops"), ":",
                   f"{label} roofline (per config)", marker="_", ms=14, color=mcolors.to_rgba(color, 0.6),
                   lw=1.5)
    for i, (text, v) in enumerate(ceiling_lines(report, ceilings)):
        panel.ax.axhline(v, color=color, ls=("-." if i == 0 else (0, (1, 1))), lw=1, alpha=0.8, label=text)
        drawn.append(v)
    return drawn


def _size_axis(panel) -> None:
    from matplotlib import ticker
    ax = panel.ax
    if not panel.squares:
        names = list(panel.slots)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.xaxis.set_major_locator(ticker.FixedLocator(range(len(names))))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
        ax.set_xlabel(SHAPES_XLABEL)
        return
    sizes = sorted({size_of(p) for p in panel.problems})
    ax.set_xlabel(XLABEL)
    if not sizes:                             # a report with no problem (a search stopped early)
        return
    ax.set_xscale("log", base=2)
    ax.set_xlim(sizes[0] / 1.5, sizes[-1] * 1.5)
    ax.xaxis.set_major_locator(ticker.FixedLocator(sizes))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.0f}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.grid(True, which="major", axis="x", alpha=0.3)


def _value_axis(ax, values: Sequence[float], label: str | None) -> None:
    """Log scale only for values spanning a decade or more; plain labels either way."""
    from matplotlib import ticker
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    if vals and max(vals) / min(vals) >= 10:
        ax.set_yscale("log")
        ax.set_ylim(min(vals) / 1.4, max(vals) * 1.4)
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_locator(ticker.LogLocator(base=10, subs=tuple(range(1, 10))))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    else:
        ax.set_ylim(bottom=0, top=max(vals) * 1.15 if vals else 1)
        ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))
    if label:
        ax.set_ylabel(label)
    ax.grid(True, which="major", axis="y", alpha=0.3)


# The search panel is drawn for at most this many problems (more lines do not read).
MAX_PROGRESS = 6


def _draw_progress(ax, problems) -> None:
    """Best GFLOP/s so far against configs evaluated, one line per problem."""
    from matplotlib import ticker
    top = []
    for i, p in enumerate(problems):
        results = p.get("results") or []
        best, xs, ys = 0.0, [], []
        for n, r in enumerate(results, 1):
            g = r.get("gflops")
            if r.get("status") == "ok" and isinstance(g, (int, float)) and g > best:
                best = g
                xs.append(n)
                ys.append(g)
        xs.append(len(results))
        ys.append(best)
        ax.step(xs, ys, where="post", lw=1.5, color=f"C{i % 10}", label=problem_label(p))
        top.append(best)
    ax.set_xlabel(PROGRESS_XLABEL)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=5, integer=True))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))
    ax.set_ylim(bottom=0, top=max(top) * 1.15)
    ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))
    ax.set_ylabel(PROGRESS_YLABEL)
    ax.grid(True, alpha=0.3)
    ax.set_title("the search", fontsize=10)
    ax.legend(loc="lower right", fontsize=7, frameon=True, framealpha=0.8)


def _layout(problems, progress: bool):
    """The figure and its panels: squares, other shapes, the search (each only if it has data)."""
    has_sq = any(_square(p) for p in problems)
    has_other = any(not _square(p) for p in problems)
    kinds = [k for k, on in (("sq", has_sq), ("other", has_other), ("progress", progress)) if on] or ["sq"]
    shapes = len({problem_label(p) for p in problems if not _square(p)})
    # a shapes panel as wide as its categories need: one shape gets a narrow strip
    widths = {"sq": 3, "other": min(3.0, 1.0 + 0.25 * shapes) if has_sq else 4, "progress": 2}
    fig = require_matplotlib().Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(kinds), width_ratios=[widths[k] for k in kinds], squeeze=False)[0]
    panels = [_Panel(ax, problems, squares=(k == "sq")) for k, ax in zip(kinds, axes) if k != "progress"]
    return fig, panels, (axes[-1] if kinds[-1] == "progress" else None)


def _finish(fig, panels, values, title, out):
    for i, panel in enumerate(panels):
        _size_axis(panel)
        _value_axis(panel.ax, values, YLABEL if i == 0 else None)
    fig.suptitle(title, fontsize=11)
    entries = {}
    for panel in panels:
        for h, lab in zip(*panel.ax.get_legend_handles_labels()):
            entries.setdefault(lab, h)
    # Below the panels, in columns: it takes the room it needs and leaves no empty third.
    fig.legend(list(entries.values()), list(entries), loc="outside lower center",
               ncols=min(4, max(1, len(entries))), fontsize=8, frameon=False)
    if out is not None:
        _save(fig, out)
    return fig


def _title(label: str, report: Mapping, ceilings) -> str:
    from .compare import short_device
    dev = report["device"]["renderer"] if label == report["backend"] else short_device(report)
    t = label if dev in label else f"{label} on {dev}"
    return t + (" (software renderer: no roofline)" if no_roofline(report, ceilings) else "")


def plot_report(report: Mapping, out=None, ceilings: Mapping | None = None):
    """Figure of one report; written to `out` (.png/.svg/.pdf) if given. Returns the Figure."""
    if out is not None:
        plot_format(out)                      # refuse a bad name before drawing anything
    problems = report["problems"]
    progress = [p for p in problems if len(_timed(p)) >= 2]
    fig, panels, prog_ax = _layout(problems, 0 < len(progress) <= MAX_PROGRESS)
    values = []
    for panel in panels:
        values += _draw_report(panel, report, ceilings, REPORT_COLORS[0], label=report["backend"])
    if prog_ax is not None:
        _draw_progress(prog_ax, progress)
    return _finish(fig, panels, values, _title(report["backend"], report, ceilings), out)


def plot_compare(reports: Sequence[Mapping], out=None, ceilings=None, sources: Sequence[str] | None = None):
    """Every report on the problems at least two of them hold (refuses what compare refuses):
    each one's tuned line, its roofline and bounds, and the reference library of its own run."""
    from .compare import REFERENCE, per_report, join, labels
    if out is not None:
        plot_format(out)
    sources = list(sources or [f"report {i + 1}" for i in range(len(reports))])
    rows = join(reports, sources)
    labs = labels(reports, sources)
    ceil = per_report(ceilings, len(reports))
    held = [[ps[i] for _, ps in rows if ps[i] is not None] for i in range(len(reports))]
    holders = [lab for lab, probs in zip(labs, held)
               if any(REFERENCE in (p.get("baselines") or {}) for p in probs)]
    fig, panels, _ = _layout([p for probs in held for p in probs], False)
    values = []
    for panel in panels:
        for i, (r, lab) in enumerate(zip(reports, labs)):
            values += _draw_report(panel, r, ceil[i], REPORT_COLORS[i % len(REPORT_COLORS)], label=lab,
                                   problems=held[i], baselines={REFERENCE: holders}, spread=False)
    title = " vs ".join(_title(lab, r, c) for lab, r, c in zip(labs, reports, ceil))
    return _finish(fig, panels, values, title, out)


def labels(fig) -> list[str]:
    """Every label a reader sees: titles, axis labels, legend entries."""
    out = [fig.get_suptitle()] if fig.get_suptitle() else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
    for leg in fig.legends:
        out += [t.get_text() for t in leg.get_texts()]
    return [t for t in out if t]
