"""python -m shadertune.report {show,compare,roofline}

  show RUN.json [--plot OUT.png] [--ceilings C.json]     Markdown table (+ plot)
  compare A.json B.json [--plot OUT.png] [--ceilings C.json]   two backends side by side
  roofline [--quick] [--backend gl|cuda|all] [--out C.json]    measure the ceilings here

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


def cmd_show(args) -> int:
    from .annotate import ceilings_of
    from .tables import show
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
    a, b = load(args.a), load(args.b)
    ceil = _ceilings(args.ceilings)
    print(compare_table(a, b, ceil, ceil, src_a=args.a, src_b=args.b))
    if args.plot:
        from .plots import plot_compare
        plot_compare(a, b, args.plot, ceil, ceil, src_a=args.a, src_b=args.b)
        print(f"\nplot: {args.plot}")
    return 0


def cmd_roofline(args) -> int:
    from .tables import fmt_gflops
    preset = args.preset or ("quick" if args.quick else "full")
    found = []
    if args.backend in ("gl", "all"):
        found.append(rl.measure_gl(None, preset=preset))
    if args.backend in ("cuda", "all"):
        ok, why = rl.cuda_available()
        if ok:
            found.append(rl.measure_cuda(preset=preset))
        elif args.backend == "cuda":
            raise ContextError(f"cannot measure CUDA ceilings: {why}")
        else:
            print(f"cuda: skipped ({why})", file=sys.stderr)
    m = found[0] if len(found) == 1 else rl.merge(*found)
    for one in found:
        d = one["device"]
        print(f"{d['backend']}: {d['renderer']} ({d['driver']})")
    for k, v in m["ceilings"].items():
        print(f"  {k:22s} {fmt_gflops(v):>10s} {rl.UNITS.get(k, '')}")
    if args.out:
        rl.save(args.out, m)
        print(f"saved: {args.out}")
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m shadertune.report", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="Markdown table of one report (and a plot)")
    s.add_argument("report")
    s.add_argument("--plot", metavar="OUT.png")
    s.add_argument("--ceilings", metavar="C.json", help="measured ceilings (overrides the report's)")
    s.set_defaults(fn=cmd_show)
    c = sub.add_parser("compare", help="two reports of different backends side by side")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--plot", metavar="OUT.png")
    c.add_argument("--ceilings", metavar="C.json")
    c.set_defaults(fn=cmd_compare)
    r = sub.add_parser("roofline", help="measure the ceilings of the device at hand")
    r.add_argument("--quick", action="store_true", help="shorter runs (bench-gpu's budget)")
    r.add_argument("--preset", choices=("full", "quick", "tiny"), help=argparse.SUPPRESS)
    r.add_argument("--backend", choices=("gl", "cuda", "all"), default="gl")
    r.add_argument("--out", metavar="C.json")
    r.set_defaults(fn=cmd_roofline)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except (ReportError, rl.CeilingsError, ContextError) as e:
        print(f"shadertune.report: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
