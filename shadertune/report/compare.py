"""Two reports of different backends side by side, on the problems they share."""
from __future__ import annotations

from collections.abc import Mapping

from .annotate import fraction, roofline_of
from .schema import ReportError, problem_key, problem_label
from .tables import _md, baseline_gflops, fmt_gflops, fmt_pct, fmt_ratio, ratio

REFERENCE = "cublas"        # the vendor library every backend is held against


class CompareError(ReportError):
    """The two reports cannot be compared; the message says why in one line."""


def join(a: Mapping, b: Mapping, src_a: str = "first report", src_b: str = "second report"):
    """[(problem_a, problem_b)] in a's order for the problems both reports hold."""
    if a["backend"] == b["backend"]:
        raise CompareError(f"both reports are of backend {a['backend']!r} ({src_a}, {src_b}); "
                           "compare needs two different backends")
    index = {problem_key(p): p for p in b["problems"]}
    pairs = [(p, index[problem_key(p)]) for p in a["problems"] if problem_key(p) in index]
    if not pairs:
        ka = ", ".join(problem_label(p) for p in a["problems"][:4]) or "none"
        kb = ", ".join(problem_label(p) for p in b["problems"][:4]) or "none"
        raise CompareError(f"{src_a} and {src_b} share no problem (M,N,K,dtype,trans): "
                           f"{a['backend']} has {ka}; {b['backend']} has {kb}")
    return pairs


def only_in(a: Mapping, b: Mapping) -> list[str]:
    keys = {problem_key(p) for p in b["problems"]}
    return [problem_label(p) for p in a["problems"] if problem_key(p) not in keys]


def _best(p) -> float | None:
    return p["best"]["gflops"] if p.get("best") else None


def _reference(pa, pb) -> float | None:
    g = baseline_gflops(pb, REFERENCE)
    return g if g is not None else baseline_gflops(pa, REFERENCE)


def compare_table(a: Mapping, b: Mapping, ceil_a=None, ceil_b=None, src_a="first report",
                  src_b="second report") -> str:
    pairs = join(a, b, src_a, src_b)
    na, nb = a["backend"], b["backend"]
    has_ref = any(_reference(pa, pb) is not None for pa, pb in pairs)
    header = ["problem", f"{na} GFLOP/s", f"{nb} GFLOP/s", f"{na}/{nb}",
              f"{na} % roofline", f"{nb} % roofline"]
    if has_ref:
        header += [f"{REFERENCE} GFLOP/s", f"{na}/{REFERENCE}", f"{nb}/{REFERENCE}"]
    rows = []
    for pa, pb in pairs:
        ga, gb = _best(pa), _best(pb)
        row = [problem_label(pa), fmt_gflops(ga), fmt_gflops(gb), fmt_ratio(ratio(ga, gb)),
               fmt_pct(fraction(ga, roofline_of(a, pa, ceil_a))),
               fmt_pct(fraction(gb, roofline_of(b, pb, ceil_b)))]
        if has_ref:
            ref = _reference(pa, pb)
            row += [fmt_gflops(ref), fmt_ratio(ratio(ga, ref)), fmt_ratio(ratio(gb, ref))]
        rows.append(row)
    out = [f"## {na} ({a['device']['renderer']}) vs {nb} ({b['device']['renderer']})", "",
           _md(header, rows, right_from=1)]
    for name, x, y in ((na, a, b), (nb, b, a)):
        left = only_in(x, y)
        if left:
            out += ["", f"Only in {name}: " + ", ".join(left)]
    return "\n".join(out)
