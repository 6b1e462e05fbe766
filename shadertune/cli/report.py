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

from . import args as ca
from ..core import roofline as rl
from ..core.atomic import OutputError
from ..errors import ContextError
from ..report.plots import PlotsUnavailable
from ..report.schema import ReportError, load

TOOL = "report"
EPILOG = """\
sizes: --problem SIZE is N, MxNxK or BxMxNxK, optionally followed by the dtype
(f32, f64) and the operation (NN, NT, TN, TT), e.g. '2560x16x2560 TN'.

outputs (--plot, --out): written whole or not at all (a temporary file renamed
into place); a device node, a folder where a file is asked for, or one of the
inputs is refused.

exit status: 0; 2 with one line 'shadertune.report: error: <reason>' on stderr for
bad arguments and unreadable or invalid inputs; 1 when an output cannot be written,
when roofline finds no device to measure (no GPU context, CuPy missing for cuda), or
when matplotlib (pip install 'shadertune[plot]'), which --plot, landscape and trajectory
need, is not installed: checked after the arguments and before any work.
"""


def _ceilings(path):
    return rl.load(path) if path else None


def _check_output(path, inputs=(), plot: bool = True) -> None:
    """Refuse an output's name before any work: a plot's format, and a name that may not
    be written (a device node, a folder, one of the inputs)."""
    if path:
        if plot:
            from ..report.plots import plot_format
            plot_format(path)
        try:
            ca.check_output(path, protect=inputs, stream_ok=not plot, protected="the input")
        except OutputError as e:
            raise ReportError(str(e)) from None


def _needs_matplotlib(wanted=True) -> None:
    """Before any work: a plot asked for where matplotlib is missing stops the tool
    (PlotsUnavailable, exit 1) instead of failing after the table was printed."""
    if wanted:
        from ..report.plots import require_matplotlib
        require_matplotlib()


def cmd_show(args) -> int:
    from ..report.rooflines import ceilings_of
    from ..report.tables import show
    _check_output(args.plot, [args.report, *([args.ceilings] if args.ceilings else [])])
    _needs_matplotlib(args.plot)
    rep = load(args.report)
    ceil = _ceilings(args.ceilings)
    print(show(rep, ceil, full_config=args.full_config))
    if args.plot:
        from ..report.plots import plot_report
        plot_report(rep, args.plot, ceil)
        print(f"\nplot: {args.plot}")
    if ceil is not None and ceilings_of(rep, ceil) is None:
        print("note: the ceilings file holds no ceilings", file=sys.stderr)
    return 0


def cmd_compare(args) -> int:
    from ..report.compare import compare_table
    _check_output(args.plot, [*args.reports, *([args.ceilings] if args.ceilings else [])])
    if len(args.reports) < 2:
        raise ReportError(f"compare needs two or more reports, got {len(args.reports)}")
    _needs_matplotlib(args.plot)
    reports = [load(p) for p in args.reports]
    ceil = _ceilings(args.ceilings)
    print(compare_table(reports, ceil, sources=args.reports))
    if args.plot:
        from ..report.plots import plot_compare
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
    from ..report.tables import fmt_gflops
    _check_output(args.out, plot=False)          # before minutes of measuring
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
    from ..report.landscape import landscape, render, summary
    from ..report.sources import measured
    _needs_matplotlib()                 # every landscape is drawn (--format: png, svg or pdf)
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
    from ..report.trajectory import plot, runs, table
    _check_output(args.out, args.reports)
    _needs_matplotlib()
    reports = [load(p) for p in args.reports]
    rs = runs(reports, args.reports, args.problem)
    if not rs:
        raise ReportError("the reports hold no evaluated config")
    print(table(rs))
    plot(rs, args.out, args.title or _devices(reports))
    print(f"\nfigure: {args.out}")
    return 0


def _devices(reports) -> str:
    from ..report.compare import short_device
    return " / ".join(dict.fromkeys(f"{r['backend']} on {short_device(r)}" for r in reports))


def build_parser() -> argparse.ArgumentParser:
    from ..backends import available
    ap = ca.tool_parser(TOOL, __doc__.split("\n")[0], EPILOG)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    s = sub.add_parser("show", help="Markdown table of one report (and a plot)")
    s.add_argument("report", help="a search report (python -m shadertune.search --report)")
    s.add_argument("--plot", metavar="OUT", help="write a plot: .png, .svg or .pdf (by the extension)")
    s.add_argument("--ceilings", metavar="C.json", help="measured ceilings (overrides the report's)")
    ca.add_full_config(s)
    s.set_defaults(fn=cmd_show)
    c = sub.add_parser("compare", help="two or more reports side by side (backends, devices, "
                                       "strategies or runs)")
    c.add_argument("reports", nargs="+", metavar="REPORT.json", help="the reports, the first the reference")
    c.add_argument("--plot", metavar="OUT", help="write a plot: .png, .svg or .pdf (by the extension)")
    c.add_argument("--ceilings", metavar="C.json", help="measured ceilings for every report")
    c.set_defaults(fn=cmd_compare)
    r = sub.add_parser("roofline", help="measure the ceilings of the device at hand")
    r.add_argument("--quick", action="store_true", help="shorter runs (bench-gpu's budget)")
    r.add_argument("--preset", choices=("full", "quick", "tiny"),
                   help="the runs' length (tiny: the tests'; default full, or quick with --quick)")
    r.add_argument("--backend", choices=(*available(), "all"), default="gl",
                   help="whose ceilings: a backend, or all of those that open here (default gl)")
    r.add_argument("--out", metavar="C.json", help="save the ceilings here (JSON)")
    r.set_defaults(fn=cmd_roofline)
    ls = sub.add_parser("landscape", help="figures of GFLOP/s over the knobs of one problem")
    ls.add_argument("source", metavar="STORE|REPORT", help="a store (.sqlite), a search report "
                    "(.json) or a scripts/bench-cuda JSON")
    ls.add_argument("--problem", metavar="SIZE", help=f"the problem: {ca.SIZE_HELP}, optionally "
                    "with a dtype and an operation, e.g. 1024 or '2560x16x2560 TN' (needed where "
                    "the source holds several)")
    ls.add_argument("--backend", help="the backend's results (where a store holds several)")
    ls.add_argument("--device", help="part of the device's name (where a store holds several)")
    ls.add_argument("--out", metavar="DIR", default=".", help="folder for the figures (default .)")
    ls.add_argument("--format", choices=("png", "svg", "pdf"), default="png",
                    help="the figures' file format (default png)")
    ls.add_argument("--views", metavar="NAME,...", help="only these views (the names ending the "
                    "figures' file names: np, mrt_h-mrt_w, knobs, KG, BM-BN ...)")
    ls.set_defaults(fn=cmd_landscape)
    t = sub.add_parser("trajectory", help="best GFLOP/s so far against evaluations and seconds, "
                                          "per report (strategy, seed)")
    t.add_argument("reports", nargs="+", metavar="REPORT.json", help="search reports (one per run)")
    t.add_argument("--problem", metavar="SIZE", help="only this problem of each report (as landscape's)")
    t.add_argument("--out", metavar="OUT", default="trajectory.png",
                   help="the figure: .png, .svg or .pdf (default trajectory.png)")
    t.add_argument("--title", help="the figure's title (default: backends and devices)")
    t.set_defaults(fn=cmd_trajectory)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:             # `... | head`: the reader left; nothing to report
        return 0
    except (PlotsUnavailable, ContextError) as e:   # a missing package or device is no bad argument
        return ca.fail(TOOL, e, 1)
    except (ReportError, rl.CeilingsError) as e:
        return ca.fail(TOOL, e, 2)
    except RecursionError:
        return ca.fail(TOOL, "the input is nested too deeply to process", 2)
    except OSError as e:                # an output that cannot be written (atomic.OutputError)
        return ca.fail(TOOL, ca.os_error_text(e) if not isinstance(e, OutputError) else e)


if __name__ == "__main__":
    sys.exit(main())
