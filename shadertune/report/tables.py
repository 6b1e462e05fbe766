"""Markdown tables of a report: one row per problem, and the ceilings it was held to."""
from __future__ import annotations

from collections.abc import Mapping

from ..backends import acting, backend_class
from ..core.roofline import unit_of
from ..core.texttable import text_table
from .rooflines import ceilings_of, fraction, no_roofline, roofline_of
from .schema import problem_label



def fmt_gflops(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_ratio(v: float | None) -> str:
    if v is None:
        return "—"
    # Three significant digits down to 0.001x: gl/cublas is often ~0.01x.
    return f"{v:.3f}x" if v < 0.1 else f"{v:.2f}x" if v < 100 else f"{v:.0f}x"


def fmt_pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.0f}%"


def folded_pairs(backend: str) -> tuple:
    """The knob pairs a table shows as one entry for `backend` (its knob_layout.folded:
    GL's mrt_h=4, mrt_w=2 as mrt=4x2); none for a backend not registered here."""
    try:
        return tuple(backend_class(backend).knob_layout.folded)
    except (ValueError, ImportError):
        return ()


def fmt_config(config: Mapping | None, folded: tuple = ()) -> str:
    """'k=v ...' sorted by knob, with each (h, w, name) of `folded` as name=HxW last."""
    if not config:
        return "—"
    d = dict(config)
    parts = []
    for h, w, name in folded:
        if h in d and w in d:
            parts.append(f"{name}={d.pop(h)}x{d.pop(w)}")
    parts = [f"{k}={d[k]}" for k in sorted(d)] + parts
    return " ".join(parts)


def baseline_names(*reports: Mapping) -> list[str]:
    names: dict[str, None] = {}
    for r in reports:
        for p in r["problems"]:
            names.update(dict.fromkeys(p.get("baselines") or {}))
    return list(names)


def baseline_gflops(problem: Mapping, name: str) -> float | None:
    b = (problem.get("baselines") or {}).get(name)
    return b.get("gflops") if b else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def right_from(first: int, columns: int) -> str:
    """text_table's alignment: text up to column `first`, numbers from there on."""
    return "l" * first + "r" * (columns - first)


def roof_cell(gflops, roof) -> str:
    if not roof:
        return "—"
    return f"{fmt_pct(fraction(gflops, roof))} of {fmt_gflops(roof['gflops'])} ({roof.get('bound', '?')})"


def problem_table(report: Mapping, ceilings: Mapping | None = None, *, full_config: bool = False) -> str:
    """One row per problem; no roofline column where none may be claimed (software renderer).
    Each best config shows the knobs that act on it (backends.acting), every knob with
    `full_config`."""
    names = baseline_names(report)
    roofed = no_roofline(report, ceilings) is None
    folded = folded_pairs(report["backend"])
    header = (["problem", "best config", "GFLOP/s"] + (["% of roofline"] if roofed else [])
              + [f"x {n}" for n in names] + ["searched"])
    rows = []
    for p in report["problems"]:
        best = p.get("best")
        g = best["gflops"] if best else None
        roof = [roof_cell(g, roofline_of(report, p, ceilings))] if roofed else []
        searched = f"{p['evaluated']}/{p['space_size']} in {p['seconds']:.0f} s"
        cfg = best["config"] if best else None
        if cfg and not full_config:
            cfg = acting(report["backend"], cfg)
        rows.append([problem_label(p), fmt_config(cfg, folded), fmt_gflops(g)]
                    + roof + [fmt_ratio(ratio(g, baseline_gflops(p, n))) for n in names] + [searched])
    return text_table(header, rows, right_from(2, len(header)))


def ceilings_lines(ceilings: Mapping | None, why_not: str | None = None) -> str:
    if why_not:
        head = f"No roofline: {why_not}."
        if not ceilings:
            return head
        return head + "\nMeasured throughput: " + _ceiling_parts(ceilings) + "."
    if not ceilings:
        return "Ceilings: not measured (run `python -m shadertune.report roofline`)."
    return "Ceilings: " + _ceiling_parts(ceilings) + "."


def _ceiling_parts(ceilings: Mapping) -> str:
    return ", ".join(f"{k} = {fmt_gflops(v)} {unit_of(k)}".rstrip()
                     for k, v in ceilings.items() if isinstance(v, (int, float)) and not isinstance(v, bool))


def show(report: Mapping, ceilings: Mapping | None = None, *, full_config: bool = False) -> str:
    """The whole Markdown of `show`: a heading, the table, the ceilings used."""
    dev = report["device"]
    head = (f"## {report['backend']} on {dev['renderer']} ({dev['driver']})\n\n"
            f"strategy {report['strategy']}, created {report['created']}, "
            f"{len(report['problems'])} problem(s)\n")
    return "\n".join([head, problem_table(report, ceilings, full_config=full_config), "",
                      ceilings_lines(ceilings_of(report, ceilings), no_roofline(report, ceilings))])
