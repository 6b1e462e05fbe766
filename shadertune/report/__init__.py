"""Reports of tuning runs: load + validate, Markdown tables, plots, comparisons.

    rep = load("gl.json")                      # ReportError names the missing field
    rep = annotate(rep, roofline.load("ceilings.json"))   # per-problem roofline
    print(show(rep))                           # Markdown
    plot_report(rep, "gl.png")                 # .png/.svg/.pdf; needs matplotlib (imported only then)
    print(compare_table([load("a.json"), load("b.json"), ...]))   # any two or more reports

CLI: python -m shadertune.report {show,compare,roofline} ...
"""
from .rooflines import annotate, no_roofline, roofline_of
from .compare import CompareError, compare_table, join
from .schema import SCHEMA, ReportError, load, problem_key, problem_label, validate
from .tables import problem_table, show


def plot_report(report, out=None, ceilings=None):
    from .plots import plot_report as _p
    return _p(report, out, ceilings)


def plot_compare(reports, out=None, ceilings=None, sources=None):
    from .plots import plot_compare as _p
    return _p(reports, out, ceilings, sources)


__all__ = ["SCHEMA", "ReportError", "CompareError", "load", "validate", "annotate", "roofline_of",
           "no_roofline", "show", "problem_table", "compare_table", "join", "plot_report",
           "plot_compare", "problem_key", "problem_label"]
