"""Plots: GFLOP/s vs problem size per backend and baseline, with the roofline drawn.

matplotlib is imported only here and only when a plot is asked for; figures
are built with matplotlib.figure.Figure (Agg canvas), never pyplot, so no
global backend state is touched.  Size and dpi are fixed: FIGSIZE x DPI pixels.
"""
from __future__ import annotations

from collections.abc import Mapping

from .annotate import ceilings_of, roofline_of
from .schema import ReportError, problem_key

FIGSIZE = (10.0, 5.5)       # inches
DPI = 100                   # -> 1000 x 550 pixels
PIXELS = (int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI))
XLABEL = "problem size n = (M·N·K)^(1/3)"
YLABEL = "GFLOP/s"

# Horizontal ceilings drawn per backend: (ceiling key, legend label).
_HLINES = {
    "gl": (("fragment_fma_gflops", "fragment FMA peak"),),
    "cuda": (("cuda_fma_gflops", "CUDA FMA peak"),),
}


def _figure():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ReportError("plots need matplotlib: pip install 'shadertune[plot]'") from None
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    return fig, ax


def size_of(p: Mapping) -> float:
    return float(p["M"] * p["N"] * p["K"]) ** (1.0 / 3.0)


def _square(p: Mapping) -> bool:
    return p["M"] == p["N"] == p["K"]


# Fixed colours per baseline, so a name looks the same in every plot and never
# takes a backend's colour (C0 gl, C3 cuda).
_BASE_COLORS = {"cublas": "black", "numpy-cpu": "tab:gray", "handtuned-naive": "tab:olive",
                "handtuned-2x2": "tab:orange", "handtuned-4x4mrt": "tab:green"}
_SPARE = ["tab:purple", "tab:brown", "tab:pink", "tab:cyan"]


_MARKERS = "s^vD<>P*X"


def _base_color(name: str) -> str:
    return _BASE_COLORS.get(name) or _SPARE[sum(map(ord, name)) % len(_SPARE)]


def _base_marker(name: str) -> str:
    return _MARKERS[sum(map(ord, name)) % len(_MARKERS)]


def _plot(ax, problems, value, style, label, annotate=False, **kw):
    """Square problems as a line over n; other shapes as loose markers (a line through
    a skinny shape would zig-zag), labelled with their shape where asked."""
    pts = [(size_of(p), v, p) for p in problems if (v := value(p)) is not None]
    sq = sorted((x, v) for x, v, p in pts if _square(p))
    other = [(x, v, p) for x, v, p in pts if not _square(p)]
    if sq:
        ax.plot([x for x, _ in sq], [v for _, v in sq], style, label=label, **kw)
        label = None
    if other:
        kw = {k: v for k, v in kw.items() if k not in ("lw", "ls")}
        ax.plot([x for x, _, _ in other], [v for _, v, _ in other], "none", label=label, **kw)
        if annotate:
            for x, v, p in other:
                ax.annotate(f"{p['M']}x{p['N']}x{p['K']}", (x, v), textcoords="offset points",
                            xytext=(5, -10), fontsize=7, color=kw.get("color"))
    return bool(pts)


def _draw_report(ax, report, ceilings, color, problems=None, baselines=None):
    """One backend's best GFLOP/s, its baselines, its per-problem and ceiling rooflines."""
    import matplotlib.colors as mcolors
    name = report["backend"]
    problems = report["problems"] if problems is None else problems
    _plot(ax, problems, lambda p: p["best"]["gflops"] if p.get("best") else None, "-",
          f"{name} (tuned)", annotate=True, marker="o", color=color, lw=2.2, zorder=5)
    names = dict.fromkeys(n for p in problems for n in (p.get("baselines") or {}))
    for n in names:
        if baselines is not None and n not in baselines:
            continue
        _plot(ax, problems, lambda p: ((p.get("baselines") or {}).get(n) or {}).get("gflops"), "--",
              n, marker=_base_marker(n), color=_base_color(n), lw=1.2, ms=5)
    _plot(ax, problems, lambda p: (roofline_of(report, p, ceilings) or {}).get("gflops"), ":",
          f"{name} roofline (per config)", marker="_", ms=14, color=mcolors.to_rgba(color, 0.6), lw=1.5)
    flat = ceilings_of(report, ceilings) or {}
    for key, label in _HLINES.get(name, ()):
        v = flat.get(key)
        if v:
            ax.axhline(v, color=color, ls="-.", lw=1, alpha=0.8, label=f"{label} {v:,.0f}")
    if name == "gl" and flat.get("fetch_gtexels"):
        from ..roofline import best_gl_roofline
        try:
            top = best_gl_roofline(flat)
        except KeyError:
            top = None
        if top:
            ax.axhline(top["gflops"], color=color, ls=(0, (1, 1)), lw=1,
                       label=f"fetch roofline {top['gflops']:,.0f} ({top['flops_per_fetch']:.1f} flops/fetch)")


def _finish(fig, ax, title, out):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(XLABEL)
    ax.set_ylabel(YLABEL)
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    # Legend outside the axes: lines cross the whole plot, so no inside corner is free.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.08, right=0.66, top=0.92, bottom=0.11)
    if out is not None:
        fig.savefig(out, dpi=DPI, format="png")      # no bbox_inches: keep the pixel size fixed
    return fig


def plot_report(report: Mapping, out=None, ceilings: Mapping | None = None):
    """Figure of one report; saved as PNG to `out` if given. Returns the Figure."""
    fig, ax = _figure()
    _draw_report(ax, report, ceilings, "C0")
    return _finish(fig, ax, f"{report['backend']} on {report['device']['renderer']}", out)


def plot_compare(a: Mapping, b: Mapping, out=None, ceil_a=None, ceil_b=None,
                 src_a="first report", src_b="second report"):
    """Both backends on the problems they share (refuses what compare refuses)."""
    from .compare import join
    pairs = join(a, b, src_a, src_b)
    keys = {problem_key(pa) for pa, _ in pairs}
    fig, ax = _figure()
    pb = [p for p in b["problems"] if problem_key(p) in keys]
    b_names = {n for p in pb for n in (p.get("baselines") or {})}
    # A baseline both reports hold (cuBLAS, numpy) is drawn once, from the second report.
    _draw_report(ax, a, ceil_a, "C0", problems=[p for p in a["problems"] if problem_key(p) in keys],
                 baselines={n for p in a["problems"] for n in (p.get("baselines") or {})} - b_names)
    _draw_report(ax, b, ceil_b, "C3", problems=pb)
    title = f"{a['backend']} ({a['device']['renderer']}) vs {b['backend']} ({b['device']['renderer']})"
    return _finish(fig, ax, title, out)


def labels(fig) -> list[str]:
    """Every label a reader sees: title, axis labels, legend entries."""
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
    return [t for t in out if t]
