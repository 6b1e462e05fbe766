"""Drawing helpers shared by the landscape and trajectory figures.

The rules of plots.py hold here too: matplotlib.figure.Figure with constrained
layout (never pyplot), plain tick labels, the format from the extension.
Unverified configs are drawn as markers on the axis, never as values: a grey
x for a place never evaluated where the figure needs to say so, a red
triangle for slow, wrong or failed configs.
"""
from __future__ import annotations

import textwrap
from collections.abc import Sequence

from .plots import DPI, _save, _value_axis, plain, plot_format, require_matplotlib

__all__ = ["figure", "save", "plot_format", "plain", "value_axis", "log2_axis", "wrap", "bottom_legend",
           "legend_handles", "UNVERIFIED", "MISSING_STYLE", "MISSING_LABEL", "mark_unverified", "STATE_TEXT"]

save = _save
value_axis = _value_axis

# How each unverified state is written in a heat-map cell and in a legend.
STATE_TEXT = {"slow": "slow", "wrong": "wrong", "failed": "failed"}
UNVERIFIED = dict(marker="v", color="tab:red", s=28, zorder=6, clip_on=False)
MISSING_STYLE = dict(marker="x", color="0.55", s=22, zorder=6, clip_on=False)
UNVERIFIED_LABEL = "evaluated, not verified (slow, wrong or failed)"
MISSING_LABEL = "never evaluated"


def figure(width: float, height: float):
    return require_matplotlib().Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def log2_axis(ax, values: Sequence[float], axis: str = "x") -> None:
    """A log2 axis ticked at the values measured: labels at the powers of two among
    them when there are many (others get an unlabelled tick), else at every value."""
    from matplotlib import ticker
    vals = sorted({float(v) for v in values if v and v > 0})
    if not vals:
        return
    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    (ax.set_xlim if axis == "x" else ax.set_ylim)(vals[0] / 1.3, vals[-1] * 1.3)
    pow2 = [v for v in vals if v == int(v) and int(v) & (int(v) - 1) == 0]
    major = pow2 if len(vals) > 10 and len(pow2) >= 3 else vals
    a.set_major_locator(ticker.FixedLocator(major))
    a.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))
    a.set_minor_locator(ticker.FixedLocator([v for v in vals if v not in major]))
    a.set_minor_formatter(ticker.NullFormatter())


def mark_unverified(ax, xs: Sequence[float], *, missing: bool = False) -> None:
    """Markers on the x axis (just below the plotting area's bottom edge) at `xs`."""
    if not xs:
        return
    from matplotlib import transforms
    tr = transforms.blended_transform_factory(ax.transData, ax.transAxes)
    style = MISSING_STYLE if missing else UNVERIFIED
    ax.scatter(list(xs), [0.0] * len(xs), transform=tr, **style)


def legend_handles(unverified: bool, missing: bool, missing_label: str = MISSING_LABEL) -> list:
    from matplotlib.lines import Line2D
    out = []
    if unverified:
        out.append(Line2D([], [], ls="none", marker=UNVERIFIED["marker"], color=UNVERIFIED["color"],
                          label=UNVERIFIED_LABEL))
    if missing:
        out.append(Line2D([], [], ls="none", marker=MISSING_STYLE["marker"], color=MISSING_STYLE["color"],
                          label=missing_label))
    return out


def bottom_legend(fig, handles, labels, fontsize: int = 8) -> None:
    """A legend below the panels, in as many columns as its longest entry leaves room for
    (about 6 pixels a character at font size 8, plus the marker)."""
    if not labels:
        return
    room = fig.bbox.width / (6.0 * fontsize / 8)
    longest = max(len(str(t)) for t in labels) + 8
    ncols = max(1, min(len(labels), int(room // longest), 5))
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=fontsize, frameon=False)
