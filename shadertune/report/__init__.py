"""Reports of tuning runs: load + validate, Markdown tables, plots, two-backend comparison.

    rep = load("gl.json")                      # ReportError names the missing field
    rep = annotate(rep, roofline.load("ceilings.json"))   # per-problem roofline
    print(show(rep))                           # Markdown
    plot_report(rep, "gl.png")                 # needs matplotlib (imported only then)
    print(compare_table(load("gl.json"), load("cuda.json")))

CLI: python -m shadertune.report {show,compare,roofline} ...
"""
from .annotate import annotate, roofline_of
from .compare import CompareError, compare_table, join
from .schema import SCHEMA, ReportError, load, problem_key, problem_label, validate
from .tables import problem_table, show


def plot_report(report, out=None, ceilings=None):
    from .plots import plot_report as _p
    return _p(report, out, ceilings)


def plot_compare(a, b, out=None, ceil_a=None, ceil_b=None, **kw):
    from .plots import plot_compare as _p
    return _p(a, b, out, ceil_a, ceil_b, **kw)


__all__ = ["SCHEMA", "ReportError", "CompareError", "load", "validate", "annotate", "roofline_of",
           "show", "problem_table", "compare_table", "join", "plot_report", "plot_compare",
           "problem_key", "problem_label"]
