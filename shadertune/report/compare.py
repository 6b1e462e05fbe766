"""Two or more reports side by side: backends, devices, strategies or runs.

Each report gets a short label made of what sets it apart from the others
(backend, device, strategy; the file name when nothing else differs).  The
rows are the problems that at least two reports hold, in the order they first
appear; the first report is the reference of the ratio columns.
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from ..core.texttable import text_table
from .rooflines import fraction, no_roofline, roofline_of
from .schema import ReportError, problem_key, problem_label
from .tables import baseline_gflops, fmt_gflops, fmt_pct, fmt_ratio, ratio, right_from

REFERENCE = "cublas"        # the vendor library every run is held against, where it was timed


class CompareError(ReportError):
    """The reports cannot be compared; the message says why in one line."""


def short_device(report: Mapping) -> str:
    # 'llvmpipe (LLVM 15.0.6, 256 bits)' -> 'llvmpipe', 'NVIDIA H200/PCIe/SSE2' -> 'NVIDIA H200':
    # the detail is in the table's heading
    return str(report["device"]["renderer"]).split(" (")[0].split("/")[0].strip()


def _stem(src: str) -> str:
    name = str(src).replace("\\", "/").rsplit("/", 1)[-1]
    return name[:-5] if name.endswith(".json") else name


_FIELDS = ((lambda r: r["backend"]), short_device, (lambda r: r["strategy"]))


def labels(reports: Sequence[Mapping], sources: Sequence[str]) -> list[str]:
    """A distinct short label per report: the fewest of backend, device, strategy that
    tell the reports apart, else the file name (two runs of one kind)."""
    for fields in itertools.chain.from_iterable(
            itertools.combinations(_FIELDS, k) for k in range(1, len(_FIELDS) + 1)):
        out = [" ".join(f(r) for f in fields) for r in reports]
        if len(set(out)) == len(out):
            return out
    out = [_stem(s) for s in sources]
    if len(set(out)) < len(out):
        out = [f"{s} #{i + 1}" for i, s in enumerate(out)]
    return out


def join(reports: Sequence[Mapping], sources: Sequence[str] | None = None):
    """[(problem_label, [problem entry or None per report])] for the problems that at least
    two reports hold, in order of first appearance."""
    sources = list(sources or [f"report {i + 1}" for i in range(len(reports))])
    if len(reports) < 2:
        raise CompareError(f"compare needs two or more reports, got {len(reports)}")
    index: dict[tuple, list] = {}
    for i, r in enumerate(reports):
        for p in r["problems"]:
            slots = index.setdefault(problem_key(p), [None] * len(reports))
            if slots[i] is None:              # a problem listed twice in one report: the first counts
                slots[i] = p
    rows = [(problem_label(next(p for p in ps if p)), ps) for ps in index.values()
            if sum(p is not None for p in ps) >= 2]
    if not rows:
        held = "; ".join(f"{src} has {', '.join(problem_label(p) for p in r['problems'][:4]) or 'none'}"
                         for src, r in zip(sources, reports))
        raise CompareError(f"the reports share no problem (M,N,K,dtype,trans): {held}")
    return rows


def only_in(reports: Sequence[Mapping], sources: Sequence[str], rows) -> list[str]:
    """'Only in LABEL: problems' lines for problems held by one report alone."""
    shared = {problem_key(p) for _, ps in rows for p in ps if p}
    out = []
    for lab, r in zip(labels(reports, sources), reports):
        alone = [problem_label(p) for p in r["problems"] if problem_key(p) not in shared]
        if alone:
            out.append(f"Only in {lab}: " + ", ".join(dict.fromkeys(alone)))
    return out


def _best(p) -> float | None:
    return p["best"]["gflops"] if p and p.get("best") else None


def per_report(value, n):
    """One value for each of n reports: a sequence as given, anything else repeated."""
    return value if isinstance(value, Sequence) and not isinstance(value, (str, Mapping)) else [value] * n


def compare_table(reports: Sequence[Mapping], ceilings=None, sources: Sequence[str] | None = None) -> str:
    """Markdown: GFLOP/s of each report, each one's ratio to the first, % of its roofline
    where one applies, and each one's ratio to the reference library timed in its own run.

    `ceilings`: one override for every report, or a sequence of one per report (None: the
    reports' own)."""
    n = len(reports)
    sources = list(sources or [f"report {i + 1}" for i in range(n)])
    rows = join(reports, sources)
    labs = labels(reports, sources)
    ceil = per_report(ceilings, n)
    roofs = [[roofline_of(r, ps[i], ceil[i]) if ps[i] else None for _, ps in rows]
             for i, r in enumerate(reports)]
    with_roof = [i for i in range(n) if any(roofs[i])]
    with_ref = [i for i in range(n) if any(baseline_gflops(ps[i], REFERENCE) for _, ps in rows if ps[i])]
    header = (["problem"] + [f"{lab} GFLOP/s" for lab in labs]
              + [f"{lab} / {labs[0]}" for lab in labs[1:]]
              + [f"{labs[i]} % roofline" for i in with_roof]
              + [f"{labs[i]} x {REFERENCE}" for i in with_ref])
    body = []
    for j, (name, ps) in enumerate(rows):
        g = [_best(p) for p in ps]
        body.append([name] + [fmt_gflops(v) for v in g]
                    + [fmt_ratio(ratio(v, g[0])) for v in g[1:]]
                    + [fmt_pct(fraction(g[i], roofs[i][j])) for i in with_roof]
                    + [fmt_ratio(ratio(g[i], baseline_gflops(ps[i], REFERENCE) if ps[i] else None))
                       for i in with_ref])
    title = " vs ".join(f"{lab} ({r['backend']} on {r['device']['renderer']}, {r['strategy']})"
                        for lab, r in zip(labs, reports))
    out = [f"## {title}", "", text_table(header, body, right_from(1, len(header)))]
    notes = only_in(reports, sources, rows)
    notes += [f"No roofline for {lab}: {why}." for lab, r, c in zip(labs, reports, ceil)
              if (why := no_roofline(r, c))]
    if notes:
        out += [""] + notes
    return "\n".join(out)
