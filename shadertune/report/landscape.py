"""The knob landscape of one problem: how GFLOP/s varies over the search space.

    python -m shadertune.report landscape STORE|REPORT --problem 1024x1024x1024 --out DIR

The views are chosen from the knobs present in the data (a knob with one value
is listed as fixed, not drawn):
- a line view: GFLOP/s against the layout's line knob (log axis), one line
  per family (the values of the layout's family knobs);
- a heat map per pair of knobs that shape a block, one panel per family;
- grouped bars for every other knob that varies, a bar per family.

The layout is the backend's (Backend.knob_layout, in backends/<name>/knob_layout.py);
how the knobs a view does not show are held (its `hold`):
- "slice": at the family's best config (Jiang's landscape: the MRT grid at mc's
  best np and unroll); read off a dense, exhaustively searched subspace;
- "best": the best config with the values shown, whatever its other knobs (a
  tuned candidate list is too sparse for slices to hold anything).
Each view's title says which.  Places never evaluated are NaN (gaps in lines,
"not run" cells, no bar) and never interpolated; only verified, timed configs
have values; slow, wrong and failed ones are markers (knobs.Cell).
"""
from __future__ import annotations

import functools
import math
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..backends import KnobLayout, backend_class, registered_classes
from .knobs import Cell, Knobs, finite, ordered
from .schema import problem_label
from .sources import Measured


@dataclass(frozen=True)
class Layout:
    line: str | None                        # the x knob of the line view
    family: tuple[str, ...]                 # lines, panels and bars per value of these
    pairs: tuple[tuple[str, str], ...]      # heat maps: rows x columns
    hold: str                               # "slice" | "best"


# The layouts are the backends' (Backend.knob_layout): a report's backend gives its
# own; data of a backend not registered here is matched to the registered layout
# whose knobs it holds most of.  Data holding none of them gets the generic layout:
# no line view, no family, heat maps for *_h/*_w pairs, bars for the rest.
GENERIC = Layout(None, (), (), "best")


def _as_layout(k: KnobLayout) -> Layout:
    return Layout(k.line, tuple(k.family), tuple(tuple(p) for p in k.pairs), k.hold)


@functools.lru_cache(maxsize=None)
def _registered() -> tuple[KnobLayout, ...]:
    """The knob layouts of the registered backends that say how to draw their knobs."""
    return tuple(cls.knob_layout for cls in registered_classes()
                 if cls.knob_layout.line or cls.knob_layout.family or cls.knob_layout.pairs)


def layouts_for(backend: str | None = None) -> tuple[Layout, ...]:
    """The layouts to choose from: the registered backend's own, else every registered one."""
    try:
        own = backend_class(backend).knob_layout if backend else None
    except (ValueError, ImportError):
        own = None
    return (_as_layout(own),) if own is not None and own in _registered() \
        else tuple(_as_layout(k) for k in _registered())


def _names(attr: str) -> dict:
    names: dict = {}
    for k in _registered():
        names.update(getattr(k, attr))
    return names


def knob_name(k: str) -> str:
    return _names("knob_names").get(k, k)


def pair_name(pair: tuple[str, str]) -> str:
    return _names("pair_names").get(tuple(pair), f"{pair[0]} x {pair[1]}")


def value_name(k: str, v) -> str:
    return _names("value_names").get(k, {}).get(v, str(v))


# --- the views, as data -------------------------------------------------------

@dataclass
class Series:
    label: str
    cells: list[Cell]                       # one per LineView.xs


@dataclass
class LineView:
    name: str
    title: str
    knob: str
    xs: list
    series: list[Series]
    kind: str = "line"


@dataclass
class GridPanel:
    label: str
    rows: list
    cols: list
    cells: list[list[Cell]]                 # [row][col]


@dataclass
class GridView:
    name: str
    title: str
    pair: tuple[str, str]
    panels: list[GridPanel]
    kind: str = "grid"


@dataclass
class BarPanel:
    knob: str
    values: list
    cells: list[list[Cell]]                 # [value][family]


@dataclass
class BarView:
    name: str
    title: str
    families: list[str]
    panels: list[BarPanel]
    kind: str = "bars"


@dataclass
class Landscape:
    measured: Measured
    layout: Layout
    fixed: dict
    views: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)     # families without a verified config

    @property
    def title(self) -> str:
        m = self.measured
        return f"{m.backend} on {m.device}: {problem_label(m.problem)}"


def choose_layout(names: Sequence[str], varying: Sequence[str],
                  layouts: Sequence[Layout] | None = None) -> Layout:
    """The layout (of `layouts`; None: every registered backend's) whose knobs the data
    holds most of, narrowed to the knobs that vary; *_h/*_w pairs it does not name are
    added."""
    def score(lay):
        return sum(k in names for k in ([lay.line] if lay.line else []) + list(lay.family)
                   + [k for p in lay.pairs for k in p])
    layouts = layouts_for() if layouts is None else layouts
    best = max(layouts, key=score, default=GENERIC)
    lay = best if score(best) else GENERIC
    pairs = [p for p in lay.pairs if p[0] in varying and p[1] in varying]
    pairs += [(h, h[:-2] + "_w") for h in varying if h.endswith("_h") and h[:-2] + "_w" in varying
              and (h, h[:-2] + "_w") not in pairs]
    return Layout(lay.line if lay.line in varying else None,
                  tuple(k for k in lay.family if k in varying), tuple(pairs), lay.hold)


def describe(config: Mapping, knobs: Sequence[str], pairs: Sequence[tuple[str, str]] = ()) -> str:
    """'mrt 4x2, unroll 4, glsl 330' for the named knobs of a config (pairs folded)."""
    parts, done = [], set()
    for k in knobs:
        if k in done:
            continue
        pair = next((p for p in pairs if k in p and p[0] in knobs and p[1] in knobs), None)
        if pair:
            name = pair[0][:-2] if pair[0].endswith("_h") else f"{pair[0]}x{pair[1]}"
            parts.append(f"{name} {config.get(pair[0])}x{config.get(pair[1])}")
            done.update(pair)
        else:
            parts.append(f"{k} {value_name(k, config.get(k))}")
            done.add(k)
    return ", ".join(parts)


def landscape(m: Measured) -> Landscape:
    """The views of one problem's points (see the module's docstring)."""
    kn = Knobs(m.points)
    varying = kn.varying()
    lay = choose_layout(kn.names, varying, layouts_for(m.backend))
    out = Landscape(m, lay, kn.fixed(), notes=list(m.notes))
    if not any(p.gflops is not None for p in m.points):
        out.notes.append("no verified config: nothing to draw")
        return out
    families = _families(kn, lay)
    bases = [kn.best(**f) for f in families]
    lost = [_family_label(f) for f, b in zip(families, bases) if b is None]
    if lost:
        out.unverified = lost
        if lay.hold == "slice":             # a slice needs a verified config to pass through
            families = [f for f, b in zip(families, bases) if b is not None]
            bases = [b for b in bases if b is not None]
    labels = [_family_label(f) for f in families]
    shown = {lay.line, *lay.family, *(k for p in lay.pairs for k in p)}
    others = [k for k in varying if k not in shown]
    pairs = list(lay.pairs)
    if lay.line:
        out.views.append(_line_view(kn, lay, families, labels, bases, varying, pairs))
    for pair in lay.pairs:
        v = _grid_view(kn, lay, pair, families, labels, bases, varying, pairs)
        if v.panels:
            out.views.append(v)
    if others:
        out.views.append(_bar_view(kn, lay, others, families, labels, bases))
    return out


def _families(kn: Knobs, lay: Layout) -> list[dict]:
    if not lay.family:
        return [{}]
    seen = dict.fromkeys(tuple(p.config.get(k) for k in lay.family) for p in kn.points.values())
    combos = sorted(seen, key=lambda c: tuple(kn.values[k].index(v) for k, v in zip(lay.family, c)))
    return [dict(zip(lay.family, c)) for c in combos]


def _family_label(f: Mapping) -> str:
    if not f:
        return "all configs"
    if len(f) == 1:                       # a family of one named knob: its values' names
        (k, v), = f.items()
        if value_name(k, v) != str(v):
            return value_name(k, v)
    return " ".join(f"{k}={value_name(k, v)}" for k, v in f.items())


def _family_words(lay: Layout) -> str:
    """'mc', 'output path and mc', 'kernel family'; '' where there is no family."""
    return " and ".join(knob_name(x).split(" (")[0] for x in lay.family)


def _held(lay: Layout, varying, exclude) -> list[str]:
    return [k for k in varying if k not in exclude and k not in lay.family]


def _line_view(kn, lay, families, labels, bases, varying, pairs) -> LineView:
    k = lay.line
    xs = kn.values[k]
    series = []
    for f, lab, base in zip(families, labels, bases):
        if lay.hold == "slice":
            if base is None:
                continue
            cells = kn.slice(base.config, [k], [xs])
            lab = f"{lab} ({describe(base.config, _held(lay, varying, {k}), pairs)})"
        else:
            cells = kn.best_over(f, [k], [xs])
        series.append(Series(lab, [cells[(x,)] for x in xs]))
    fam = _family_words(lay)
    if lay.hold == "slice":
        title = (f"GFLOP/s against {knob_name(k)}: one line per {fam}, the other knobs at that "
                 f"{fam}'s best config" if fam else
                 f"GFLOP/s against {knob_name(k)}, the other knobs at the best config")
    else:
        per = f", per {fam}" if fam else ""
        title = f"Best GFLOP/s against {knob_name(k)}{per} (the other knobs at their best)"
    return LineView(k, title, k, xs, series)


def _grid_view(kn, lay, pair, families, labels, bases, varying, pairs) -> GridView:
    a, b = pair
    # The panels share the values the families take.  A family where the pair takes one
    # value outside them gets no panel: the pair is not its knob (on GL's MRT path the
    # image block is 0 x 0); one inside them (a sparse candidate list) does.
    combos = [{(p.config.get(a), p.config.get(b)) for p in kn.where(**f)} for f in families]
    rows = ordered(r for c in combos if len(c) > 1 for r, _ in c)
    cols = ordered(k for c in combos if len(c) > 1 for _, k in c)
    drawn = [(f, lab, base) for f, lab, base, c in zip(families, labels, bases, combos)
             if len(c) > 1 or all(r in rows and k in cols for r, k in c)]
    panels = []
    for f, lab, base in drawn:
        if lay.hold == "slice":
            if base is None:
                continue
            cells = kn.slice(base.config, [a, b], [rows, cols])
            held = _held(lay, varying, {a, b})
            lab = f"{lab} at {describe(base.config, held, pairs)}" if held else lab
        else:
            cells = kn.best_over(f, [a, b], [rows, cols])
        panels.append(GridPanel(lab, rows, cols, [[cells[(r, c)] for c in cols] for r in rows]))
    fam = _family_words(lay)
    how = ((f"the other knobs at each {fam}'s best config" if fam else "the other knobs at the best config")
           if lay.hold == "slice" else "best config of each cell")
    title = f"{pair_name(pair)} ({a} x {b}){' per ' + fam if fam else ''}: GFLOP/s, {how}"
    return GridView(f"{a}-{b}", title, pair, panels)


def _bar_view(kn, lay, others, families, labels, bases) -> BarView:
    panels = []
    for k in others:
        values = kn.values[k]
        cells = []
        for v in values:
            row = []
            for f, base in zip(families, bases):
                if lay.hold == "slice":
                    row.append(kn.at({**base.config, k: v}))
                else:
                    row.append(kn.best_over({**f, k: v}, [], [])[()])
            cells.append(row)
        panels.append(BarPanel(k, values, cells))
    fam = _family_words(lay)
    how = ((f"the other knobs at each {fam}'s best config" if fam else "the other knobs at the best config")
           if lay.hold == "slice" else "the best config with each value")
    title = f"Each other knob's effect{' per ' + fam if fam else ''}: GFLOP/s, {how}"
    return BarView("knobs", title, labels, panels)


# --- drawing ------------------------------------------------------------------

FORMAT = "png"


def render(ls: Landscape, out_dir, fmt: str = FORMAT, prefix: str | None = None) -> list[pathlib.Path]:
    """Write each view as OUT_DIR/PREFIX-VIEW.FMT; returns the files written."""
    from . import figures as F
    F.plot_format(f"x.{fmt}")
    out_dir = pathlib.Path(out_dir)
    prefix = prefix or default_prefix(ls)
    written = []
    for view in ls.views:
        fig = draw(ls, view)
        path = out_dir / f"{prefix}-{view.name}.{fmt}"
        F.save(fig, path)
        written.append(path)
    return written


def default_prefix(ls: Landscape) -> str:
    p = ls.measured.problem
    t = ("T" if p["trans_a"] else "N") + ("T" if p["trans_b"] else "N")
    dt = "" if p["dtype"] == "float32" else f"-{p['dtype']}"
    return f"landscape-{ls.measured.backend}-{p['M']}x{p['N']}x{p['K']}{dt}" + ("" if t == "NN" else f"-{t}")


def draw(ls: Landscape, view):
    return {"line": _draw_line, "grid": _draw_grid, "bars": _draw_bars}[view.kind](ls, view)


def _suptitle(fig, ls: Landscape, view) -> None:
    from . import figures as F
    fixed = ", ".join(f"{k}={value_name(k, v)}" for k, v in ls.fixed.items())
    head = ls.title + (f"   (fixed: {fixed})" if fixed else "")
    # lines no wider than the figure: ~11 characters of 10-point text an inch
    width = max(40, min(120, int(fig.get_figwidth() * 11)))
    lines = [F.wrap(head, width), F.wrap(view.title, width)]
    if ls.measured.complete:
        lines.append("exhaustive search of the pruned space: a place without a value is outside it")
    elif ls.measured.candidates:
        lines.append(f"{len(ls.measured.points)} model-ranked candidates tuned by a candidate-list "
                     f"run, not a search: most places were never tried")
    if ls.unverified:
        lines.append(F.wrap("no verified config (every one slow, wrong or failed): "
                            + ", ".join(ls.unverified), width))
    fig.suptitle("\n".join(lines), fontsize=10)


_MARKERS = "os^Dv<>P"


def _draw_line(ls: Landscape, view: LineView):
    from . import figures as F
    fig = F.figure(10.0, 5.5)
    ax = fig.subplots()
    xs = [float(x) for x in view.xs]
    drawn, unverified = [], []
    for i, s in enumerate(view.series):
        ys = [c.value for c in s.cells]
        # a marker shape per line: lines that coincide (two packings at equal speed) stay visible
        ax.plot(xs, ys, marker=_MARKERS[i % len(_MARKERS)], ms=5, lw=1.6, alpha=0.85,
                color=f"C{i % 10}", label=s.label)
        drawn += finite(ys)
        unverified += [x for x, c in zip(xs, s.cells) if c.state not in ("ok", "missing")]
    F.log2_axis(ax, xs)
    F.value_axis(ax, drawn, "GFLOP/s")
    ax.set_xlabel(knob_name(view.knob) + ", log scale")
    F.mark_unverified(ax, sorted(set(unverified)))
    ax.grid(True, which="major", axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    extra = F.legend_handles(bool(unverified), False)
    F.bottom_legend(fig, handles + extra, labels + [h.get_label() for h in extra])
    _suptitle(fig, ls, view)
    return fig


def _draw_grid(ls: Landscape, view: GridView):
    import numpy as np
    from matplotlib import colors
    from . import figures as F
    nrows, ncols = _grid_of(len(view.panels))
    n = len(view.panels)
    width = 10.0 if ncols > 1 else 6.5
    fig = F.figure(width, 1.2 + 3.3 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    vals = finite(c.value for p in view.panels for row in p.cells for c in row)
    norm = colors.Normalize(vmin=0, vmax=max(vals) if vals else 1)
    cmap = _cmap()
    image = None
    a, b = view.pair
    for ax, panel in zip(axes.flat, view.panels):
        Z = np.array([[c.value for c in row] for row in panel.cells], dtype=float)
        image = ax.imshow(np.ma.masked_invalid(Z), cmap=cmap, norm=norm, origin="lower", aspect="auto")
        for i, row in enumerate(panel.cells):
            for j, c in enumerate(row):
                if c.state == "ok":
                    r, g, bb, _ = cmap(norm(c.value))
                    dark = 0.299 * r + 0.587 * g + 0.114 * bb < 0.55
                    ax.text(j, i, F.plain(c.value), ha="center", va="center", fontsize=8,
                            color="white" if dark else "black")
                else:
                    word = ls.measured.missing[0] if c.state == "missing" else F.STATE_TEXT[c.state]
                    ax.text(j, i, word, ha="center", va="center", fontsize=7,
                            color="tab:red" if c.state != "missing" else "0.45",
                            style="italic")
        ax.set_xticks(range(len(panel.cols)), [str(v) for v in panel.cols])
        ax.set_yticks(range(len(panel.rows)), [str(v) for v in panel.rows])
        ax.set_xlabel(b)
        ax.set_ylabel(a)
        ax.set_title(F.wrap(panel.label, 44), fontsize=8)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    if image is not None:
        from matplotlib import ticker
        fig.colorbar(image, ax=axes.ravel().tolist(), label="GFLOP/s", shrink=0.9,
                     format=ticker.FuncFormatter(lambda v, _: F.plain(v)))
    _suptitle(fig, ls, view)
    return fig


def _grid_of(n: int) -> tuple[int, int]:
    """Rows and columns for n small multiples: at most 3 a row, rows filled evenly
    (4 panels are 2 x 2, not 3 and 1)."""
    rows = math.ceil(n / 3)
    return rows, math.ceil(n / rows)


def _cmap():
    from matplotlib import colormaps
    # not run, or not verified: a pale cell with its word
    return colormaps["viridis"].with_extremes(bad="0.93")


def _draw_bars(ls: Landscape, view: BarView):
    from . import figures as F
    nrows, ncols = _grid_of(len(view.panels))
    n = len(view.panels)
    fig = F.figure(10.0, 1.6 + 2.9 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    nf = len(view.families)
    width = 0.8 / nf
    top = finite(c.value for p in view.panels for row in p.cells for c in row)
    flags = {"unverified": False, "missing": False}
    for ax, panel in zip(axes.flat, view.panels):
        for j, fam in enumerate(view.families):
            xs = [i - 0.4 + width * (j + 0.5) for i in range(len(panel.values))]
            ys = [row[j].value for row in panel.cells]
            ax.bar(xs, [0 if math.isnan(y) else y for y in ys], width=width * 0.95,
                   color=f"C{j % 10}", label=fam)
            bad = [x for x, row in zip(xs, panel.cells) if row[j].state not in ("ok", "missing")]
            gone = [x for x, row in zip(xs, panel.cells) if row[j].state == "missing"]
            F.mark_unverified(ax, bad)
            F.mark_unverified(ax, gone, missing=True)
            flags["unverified"] |= bool(bad)
            flags["missing"] |= bool(gone)
        ax.set_xticks(range(len(panel.values)), [value_name(panel.knob, v) for v in panel.values],
                      fontsize=8)
        ax.set_xlabel(knob_name(panel.knob))
        ax.set_xlim(-0.6, len(panel.values) - 0.4)
        _linear_gflops(ax, top)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    extra = F.legend_handles(flags["unverified"], flags["missing"], ls.measured.missing[1])
    F.bottom_legend(fig, handles + extra, labels + [h.get_label() for h in extra])
    _suptitle(fig, ls, view)
    return fig


def _linear_gflops(ax, values) -> None:
    """Bars start at zero: a linear GFLOP/s axis with plain labels."""
    from matplotlib import ticker
    from . import figures as F
    ax.set_ylim(0, max(values) * 1.12 if values else 1)
    ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=6))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: F.plain(v)))
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, axis="y", alpha=0.3)


def summary(ls: Landscape) -> str:
    """Lines for the terminal: what the data held and which views were drawn."""
    from collections import Counter
    pts = ls.measured.points
    states = Counter(p.status for p in pts)
    ok = [p for p in pts if p.gflops is not None]
    best = max(ok, key=lambda p: p.gflops) if ok else None
    lines = [f"## {ls.title}", "",
             f"{len(pts)} configs from {ls.measured.source}: "
             + ", ".join(f"{n} {s}" for s, n in states.most_common())]
    if best:
        lines.append(f"best {best.gflops:,.1f} GFLOP/s: "
                     + " ".join(f"{k}={v}" for k, v in sorted(best.config.items())))
    if ls.fixed:
        lines.append("fixed: " + ", ".join(f"{k}={v}" for k, v in ls.fixed.items()))
    for v in ls.views:
        lines.append(f"view {v.name}: {v.title}")
    lines += [f"note: {n}" for n in ls.notes]
    return "\n".join(lines)
