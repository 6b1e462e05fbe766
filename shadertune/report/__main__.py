"""python -m shadertune.report {show,compare,roofline,landscape,trajectory}

  show RUN.json [--plot OUT.png|.svg|.pdf] [--ceilings C.json]     Markdown table (+ plot)
  compare A.json B.json [C.json ...] [--plot OUT] [--ceilings C.json]   reports side by side
  roofline [--quick] [--backend NAME|all] [--out C.json]           measure the ceilings here
  landscape STORE|REPORT --problem MxNxK [--out DIR]               GFLOP/s over the knobs
  trajectory REPORT... [--out T.png]                               best so far per strategy

Errors are one line on stderr and a non-zero exit status.
"""
from __future__ import annotations

import argparse
import sys

from .. import roofline as rl
from ..errors import ContextError
from .schema import ReportError, load


def _ceilings(path):
    return rl.load(path) if path else None


def _check_plot_name(path) -> None:
    if path:
        from .plots import plot_format
        plot_format(path)


def cmd_show(args) -> int:
    from .rooflines import ceilings_of
    from .tables import show
    _check_plot_name(args.plot)
    rep = load(args.report)
    ceil = _ceilings(args.ceilings)
    print(show(rep, ceil))
    if args.plot:
        from .plots import plot_report
        plot_report(rep, args.plot, ceil)
        print(f"\nplot: {args.plot}")
    if ceil is not None and ceilings_of(rep, ceil) is None:
        print("note: the ceilings file holds no ceilings", file=sys.stderr)
    return 0


def cmd_compare(args) -> int:
    from .compare import compare_table
    _check_plot_name(args.plot)
    if len(args.reports) < 2:
        raise ReportError(f"compare needs two or more reports, got {len(args.reports)}")
    reports = [load(p) for p in args.reports]
    ceil = _ceilings(args.ceilings)
    print(compare_table(reports, ceil, sources=args.reports))
    if args.plot:
        from .plots import plot_compare
        plot_compare(reports, args.plot, ceil, sources=args.reports)
        print(f"\nplot: {args.plot}")
    return 0


def measure(name: str, preset: str) -> dict:
    """One backend's ceilings through the Backend contract, flagged when its device
    renders in software (raises ContextError where the backend has no device here)."""
    from ..backends import get_backend
    backend = get_backend(name)
    try:
        m = backend.measure_ceilings(preset)
    except NotImplementedError as e:
        raise ContextError(str(e)) from None
    if backend.device().limits.get("software_renderer"):
        m = rl.mark_software(m)
    return m


def cmd_roofline(args) -> int:
    from ..backends import available
    from .tables import fmt_gflops
    preset = args.preset or ("quick" if args.quick else "full")
    names = available() if args.backend == "all" else [args.backend]
    found, skipped = [], []
    for name in names:
        try:
            found.append(measure(name, preset))
        except ContextError as e:
            if len(names) == 1:
                raise ContextError(f"cannot measure {name} ceilings: {e}") from None
            skipped.append(name)
            print(f"{name}: skipped ({e})", file=sys.stderr)
    if not found:
        raise ContextError(f"no backend could be measured here ({', '.join(skipped)} skipped)")
    for one in found:
        d = one["device"]
        print(f"{d['backend']}: {d['renderer']} ({d['driver']})")
        why = rl.software_reason(one)
        if why:
            print(f"  {why}; reports hold no kernel against these numbers")
        for k, v in one["ceilings"].items():
            print(f"  {k:22s} {fmt_gflops(v):>10s} {rl.unit_of(k)}")
    if args.out:
        rl.save(args.out, found[0] if len(found) == 1 else rl.merge(*found))
        print(f"saved: {args.out}")
    return 0


def cmd_landscape(args) -> int:
    from .landscape import landscape, render, summary
    from .sources import measured
    ls = landscape(measured(args.source, args.problem, backend=args.backend, device=args.device))
    if args.views:
        names = [v.name for v in ls.views]
        want = [n.strip() for n in args.views.split(",") if n.strip()]
        unknown = [n for n in want if n not in names]
        if unknown:
            raise ReportError(f"--views: no view {', '.join(unknown)} in these data; "
                              f"they have {', '.join(names) or 'none'}")
        ls.views = [v for v in ls.views if v.name in want]
    print(summary(ls))
    for path in render(ls, args.out, args.format):
        print(f"figure: {path}")
    return 0


def cmd_trajectory(args) -> int:
    from .trajectory import plot, runs, table
    from .plots import plot_format
    plot_format(args.out)
    reports = [load(p) for p in args.reports]
    rs = runs(reports, args.reports, args.problem)
    if not rs:
        raise ReportError("the reports hold no evaluated config")
    print(table(rs))
    plot(rs, args.out, args.title or _devices(reports))
    print(f"\nfigure: {args.out}")
    return 0


def _devices(reports) -> str:
    from .compare import short_device
    return " / ".join(dict.fromkeys(f"{r['backend']} on {short_device(r)}" for r in reports))


def parser() -> argparse.ArgumentParser:
    from ..backends import available
    ap = argparse.ArgumentParser(prog="python -m shadertune.report", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="Markdown table of one report (and a plot)")
    s.add_argument("report")
    s.add_argument("--plot", metavar="OUT", help="write a plot: .png, .svg or .pdf (by the extension)")
    s.add_argument("--ceilings", metavar="C.json", help="measured ceilings (overrides the report's)")
    s.set_defaults(fn=cmd_show)
    c = sub.add_parser("compare", help="two or more reports side by side (backends, devices, "
                                       "strategies or runs)")
    c.add_argument("reports", nargs="+", metavar="REPORT.json")
    c.add_argument("--plot", metavar="OUT", help="write a plot: .png, .svg or .pdf (by the extension)")
    c.add_argument("--ceilings", metavar="C.json", help="measured ceilings for every report")
    c.set_defaults(fn=cmd_compare)
    r = sub.add_parser("roofline", help="measure the ceilings of the device at hand")
    r.add_argument("--quick", action="store_true", help="shorter runs (bench-gpu's budget)")
    r.add_argument("--preset", choices=("full", "quick", "tiny"), help=argparse.SUPPRESS)
    r.add_argument("--backend", choices=(*available(), "all"), default="gl")
    r.add_argument("--out", metavar="C.json")
    r.set_defaults(fn=cmd_roofline)
    ls = sub.add_parser("landscape", help="figures of GFLOP/s over the knobs of one problem")
    ls.add_argument("source", metavar="STORE|REPORT", help="a store (.sqlite), a search report "
                    "(.json) or a scripts/bench-cuda JSON")
    ls.add_argument("--problem", metavar="MxNxK", help="the problem, e.g. 1024x1024x1024 or "
                    "'2560x16x2560 TN' (needed where the source holds several)")
    ls.add_argument("--backend", help="the backend's results (where a store holds several)")
    ls.add_argument("--device", help="part of the device's name (where a store holds several)")
    ls.add_argument("--out", metavar="DIR", default=".", help="folder for the figures (default .)")
    ls.add_argument("--format", choices=("png", "svg", "pdf"), default="png")
    ls.add_argument("--views", metavar="NAME,...", help="only these views (the names ending the "
                    "figures' file names: np, mrt_h-mrt_w, knobs, KG, BM-BN ...)")
    ls.set_defaults(fn=cmd_landscape)
    t = sub.add_parser("trajectory", help="best GFLOP/s so far against evaluations and seconds, "
                                          "per report (strategy, seed)")
    t.add_argument("reports", nargs="+", metavar="REPORT.json")
    t.add_argument("--problem", metavar="MxNxK", help="only this problem of each report")
    t.add_argument("--out", metavar="OUT", default="trajectory.png",
                   help="the figure: .png, .svg or .pdf (default trajectory.png)")
    t.add_argument("--title", help="the figure's title (default: backends and devices)")
    t.set_defaults(fn=cmd_trajectory)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:             # `... | head`: the reader left; nothing to report
        return 0
    except (ReportError, rl.CeilingsError, ContextError) as e:
        print(f"shadertune.report: error: {e}", file=sys.stderr)
        return 2
    except RecursionError:
        print("shadertune.report: error: the input is nested too deeply to process", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
