"""Plots from stored fixtures (an H200 run and a llvmpipe run): the format from the
extension, the labels a reader needs, plain tick labels, everything inside the canvas,
no empty part of it, one size drawn as the spread of its configs."""
import copy
import pathlib
import re
import struct

import pytest

pytest.importorskip("matplotlib")

from shadertune import report                      # noqa: E402
from shadertune.core import roofline as rl              # noqa: E402
from shadertune.report import plots                # noqa: E402
from shadertune.cli.report import main        # noqa: E402

FIX = pathlib.Path(__file__).parent / "fixtures"
GL, CUDA, CEIL = FIX / "report_gl_h200.json", FIX / "report_cuda_h200.json", FIX / "ceilings_h200.json"
LLVMPIPE = FIX / "report_gl_llvmpipe.json"


def png_size(path) -> tuple[int, int]:
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def agg(fig):
    """Draw `fig` on an Agg canvas (what savefig uses) and return its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def tick_labels(fig) -> list[str]:
    """The tick labels drawn (inside each axis' view limits)."""
    agg(fig)
    out = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                text = tick.label1.get_text()
                if text and tick.label1.get_visible() and lo <= tick.get_loc() <= hi:
                    out.append(text)
    return out


def check_readable(fig):
    """Constrained layout; everything drawn inside the canvas; the panels and the legend
    fill its width (no empty third); tick labels are plain numbers or shape names."""
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    r = agg(fig)
    W, H = fig.bbox.width, fig.bbox.height
    drawn = ([ax.get_tightbbox(r) for ax in fig.axes] + [leg.get_window_extent(r) for leg in fig.legends]
             + [t.get_window_extent(r) for t in fig.texts])
    for bb in drawn:
        assert bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1, f"drawn outside: {bb}"
    boxes = [ax.get_window_extent(r) for ax in fig.axes] + [leg.get_window_extent(r) for leg in fig.legends]
    assert min(b.x0 for b in boxes) < 0.12 * W and max(b.x1 for b in boxes) > 0.9 * W
    labels = tick_labels(fig)
    assert labels
    for label in labels:
        assert re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?|[0-9]+(x[0-9]+){2,3} float(32|64)( [NT]{2})?", label), label


def test_plot_report_png_labels_and_layout(tmp_path):
    out = tmp_path / "gl.png"
    fig = report.plot_report(report.load(GL), out)
    assert png_size(out) == plots.PIXELS == (1000, 550)
    labels = plots.labels(fig)
    for want in ("GFLOP/s", plots.XLABEL, plots.SHAPES_XLABEL, "gl (tuned)", "cublas", "numpy-cpu",
                 "handtuned-4x4mrt", "gl roofline (per config)", "the search"):
        assert want in labels, want
    assert "fragment FMA peak 1,939" in labels
    assert any(l.startswith("fetch roofline") and "21.3 flops/fetch" in l for l in labels)
    check_readable(fig)
    sizes, shapes, search = fig.axes
    assert sizes.get_yscale() == "log"             # 8 to 44,000 GFLOP/s
    assert [t.get_text() for t in sizes.get_xticklabels()] == ["256", "512", "1024", "2048"]
    # The skinny shape is a category of its own panel, not joined into the size line.
    assert [t.get_text() for t in shapes.get_xticklabels()] == ["2560x16x2560 float32"]
    assert len(search.get_lines()) == 4            # best so far, one line per problem with results


def test_one_size_is_the_spread_of_its_configs_and_the_search(tmp_path):
    rep = report.load(LLVMPIPE)
    rep["problems"] = rep["problems"][1:2]         # 64x64x64 only
    out = tmp_path / "one.png"
    fig = report.plot_report(rep, out)
    assert png_size(out) == plots.PIXELS
    check_readable(fig)
    sizes, search = fig.axes
    (spread,) = sizes.collections
    ok = [r for r in rep["problems"][0]["results"] if r["status"] == "ok"]
    assert len(spread.get_offsets()) == len(ok) > 10
    assert search.get_xlabel() == plots.PROGRESS_XLABEL
    labels = plots.labels(fig)
    assert "software renderer: no roofline" in fig.get_suptitle()
    assert not any("roofline (per config)" in l or "peak" in l for l in labels)


def test_close_values_get_a_linear_axis_with_plain_labels():
    rep = copy.deepcopy(report.load(GL))
    rep.pop("ceilings")
    rep["problems"] = rep["problems"][2:4]
    for p in rep["problems"]:
        p.pop("baselines")
        p["results"] = []
    fig = report.plot_report(rep)
    (ax,) = fig.axes
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    check_readable(fig)


@pytest.mark.parametrize("name,magic", [("p.svg", b"<svg"), ("p.pdf", b"%PDF"), ("p.PNG", b"\x89PNG")])
def test_the_format_is_the_extension(tmp_path, name, magic):
    out = tmp_path / name
    report.plot_report(report.load(LLVMPIPE), out)
    head = out.read_bytes()[:400]
    assert magic in head


def test_bad_plot_names_and_folders(tmp_path):
    with pytest.raises(report.ReportError, match=r"x\.jpg: unknown plot format '\.jpg'; use \.png, \.svg, \.pdf"):
        report.plot_report(report.load(LLVMPIPE), tmp_path / "x.jpg")
    deep = tmp_path / "new" / "folder" / "p.svg"          # made, as the search's --report does
    report.plot_report(report.load(LLVMPIPE), deep)
    assert deep.read_bytes().lstrip().startswith(b"<?xml")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(report.ReportError, match="cannot write the plot"):
        report.plot_report(report.load(LLVMPIPE), blocker / "p.png")


def test_plot_compare_draws_every_report(tmp_path):
    out = tmp_path / "cmp.png"
    fig = report.plot_compare([report.load(GL), report.load(CUDA)], out, rl.load(CEIL))
    assert png_size(out) == plots.PIXELS
    check_readable(fig)
    labels = plots.labels(fig)
    assert "gl (tuned)" in labels and "cuda (tuned)" in labels
    # both runs timed cuBLAS: each is drawn, named by its run; other baselines stay out
    assert "cublas (gl)" in labels and "cublas (cuda)" in labels and "numpy-cpu" not in labels
    assert any(l.startswith("CUDA FMA peak") for l in labels)
    assert "vs" in fig.get_suptitle()
    # Only the shared sizes are drawn for the tuned lines.
    tuned = [l for l in fig.axes[0].get_lines() if l.get_label() == "cuda (tuned)"][0]
    assert len(tuned.get_xdata()) == 3


def test_plot_compare_of_two_runs_of_one_backend(tmp_path):
    a = report.load(LLVMPIPE)
    b = copy.deepcopy(a)
    b["strategy"] = "random"
    fig = report.plot_compare([a, b], tmp_path / "runs.svg")
    labels = plots.labels(fig)
    assert "phased (tuned)" in labels and "random (tuned)" in labels
    check_readable(fig)


def test_plot_without_ceilings_has_no_roofline_lines():
    rep = copy.deepcopy(report.load(GL))
    rep.pop("ceilings")
    labels = plots.labels(report.plot_report(rep))
    assert not any("roofline" in l or "peak" in l for l in labels)


def test_plot_compare_refuses_like_compare():
    with pytest.raises(report.CompareError, match="two or more reports"):
        report.plot_compare([report.load(CUDA)])


def test_cli_writes_plots(tmp_path, capsys):
    a, b = tmp_path / "a.svg", tmp_path / "sub" / "b.pdf"
    assert main(["show", str(CUDA), "--ceilings", str(CEIL), "--plot", str(a)]) == 0
    assert main(["compare", str(GL), str(CUDA), "--plot", str(b)]) == 0
    assert b"<svg" in a.read_bytes()[:400] and b.read_bytes().startswith(b"%PDF")
    assert f"plot: {b}" in capsys.readouterr().out


def test_a_report_with_no_problem_or_no_best_still_plots(tmp_path):
    rep = report.load(LLVMPIPE)
    empty = dict(rep, problems=[])                 # a search stopped before a problem finished
    report.plot_report(empty, tmp_path / "empty.png")
    failed = copy.deepcopy(rep)
    for p in failed["problems"]:
        p["best"], p["results"] = None, []
    fig = report.plot_report(failed, tmp_path / "failed.png")
    assert png_size(tmp_path / "failed.png") == plots.PIXELS and len(fig.axes) == 1
