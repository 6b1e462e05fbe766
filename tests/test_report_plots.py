"""Plots from stored fixtures: valid PNG of the fixed size, the labels a reader needs."""
import copy
import pathlib
import struct

import pytest

pytest.importorskip("matplotlib")

from shadertune import report                      # noqa: E402
from shadertune import roofline as rl              # noqa: E402
from shadertune.report import plots                # noqa: E402
from shadertune.report.__main__ import main        # noqa: E402

FIX = pathlib.Path(__file__).parent / "fixtures"
GL, CUDA, CEIL = FIX / "report_gl_h200.json", FIX / "report_cuda_h200.json", FIX / "ceilings_h200.json"


def png_size(path) -> tuple[int, int]:
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_report_png_and_labels(tmp_path):
    out = tmp_path / "gl.png"
    fig = report.plot_report(report.load(GL), out)
    assert png_size(out) == plots.PIXELS == (1000, 550)
    labels = plots.labels(fig)
    for want in ("GFLOP/s", plots.XLABEL, "gl (tuned)", "cublas", "numpy-cpu", "handtuned-4x4mrt",
                 "gl roofline (per config)"):
        assert want in labels, want
    assert any(l.startswith("fragment FMA peak 1,939") for l in labels)
    assert any(l.startswith("fetch roofline") and "21.3 flops/fetch" in l for l in labels)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    # The skinny shape is marked with its shape, not joined into the square-size line.
    assert "2560x16x2560" in [t.get_text() for t in ax.texts]


def test_plot_compare_draws_both_backends_once_each(tmp_path):
    out = tmp_path / "cmp.png"
    ceil = rl.load(CEIL)
    fig = report.plot_compare(report.load(GL), report.load(CUDA), out, ceil, ceil)
    assert png_size(out) == plots.PIXELS
    labels = plots.labels(fig)
    assert "gl (tuned)" in labels and "cuda (tuned)" in labels
    assert labels.count("cublas") == 1 and labels.count("numpy-cpu") == 1
    assert any(l.startswith("CUDA FMA peak") for l in labels)
    assert "vs" in fig.axes[0].get_title()
    # Only the shared sizes are drawn for the tuned lines.
    tuned = [l for l in fig.axes[0].get_lines() if l.get_label() == "cuda (tuned)"][0]
    assert len(tuned.get_xdata()) == 3


def test_plot_without_ceilings_has_no_roofline_lines():
    rep = copy.deepcopy(report.load(GL))
    rep.pop("ceilings")
    labels = plots.labels(report.plot_report(rep))
    assert not any("roofline" in l or "peak" in l for l in labels)


def test_plot_compare_refuses_like_compare():
    with pytest.raises(report.CompareError, match="both reports"):
        report.plot_compare(report.load(CUDA), report.load(CUDA))


def test_cli_writes_plots(tmp_path, capsys):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    assert main(["show", str(CUDA), "--ceilings", str(CEIL), "--plot", str(a)]) == 0
    assert main(["compare", str(GL), str(CUDA), "--plot", str(b)]) == 0
    assert png_size(a) == png_size(b) == plots.PIXELS
    assert f"plot: {b}" in capsys.readouterr().out
