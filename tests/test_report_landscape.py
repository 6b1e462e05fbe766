"""Landscape figures from a real small search on GL (llvmpipe here) and from the H200's
tuned CUDA candidates: the drawn values are the stored medians' GFLOP/s, places never
evaluated are NaN (gaps, 'not run' cells), unverified configs are markers, never values."""
import json
import math
import pathlib
import sys

import pytest

pytest.importorskip("matplotlib")

from shadertune.backends.gl.space import FRAGMENT_VALUES  # noqa: E402
from shadertune.report import landscape as L                     # noqa: E402
from shadertune.cli.report import main                      # noqa: E402
from shadertune.report.knobs import Knobs                        # noqa: E402
from shadertune.report.schema import ReportError                 # noqa: E402
from shadertune.report.sources import measured, parse_problem    # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from small_study import runs                                      # noqa: E402,F401

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH_CUDA = ROOT / "benchmarks" / "h200-2026-11-23-s5" / "cuda-run-u" / "bench-cuda.json"
SPEC = "16x16x16"


def key(cfg) -> str:
    return json.dumps(cfg, sort_keys=True)


def stored(report_path) -> dict:
    """config key -> GFLOP/s of each verified result of the report, as stored."""
    p = json.loads(pathlib.Path(report_path).read_text())["problems"][0]
    return {key(r["config"]): r["gflops"] for r in p["results"] if r["status"] == "ok"}


def nan_equal(a, b) -> bool:
    return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == pytest.approx(y)
                                    for x, y in zip(a, b))


def view(ls, kind):
    return next(v for v in ls.views if v.kind == kind)


def test_np_lines_are_the_stored_medians_through_each_mc_best(runs):
    ls = L.landscape(measured(runs["exhaustive"], SPEC))
    gf = stored(runs["exhaustive"])
    assert ls.layout.line == "np" and ls.layout.family == ("mc",) and ls.measured.complete
    # Jiang's MRT path: the image path's knobs hold their MRT values
    assert ls.fixed == {"glsl": "330", "unroll": 1, "out": "mrt", "block_h": 0, "block_w": 0,
                        "a_src": "texture", "b_src": "texture", "lang": "glsl",
                        **FRAGMENT_VALUES}   # + the compute knobs' 0s
    line = view(ls, "line")
    assert line.xs == [4, 8, 16] and len(line.series) == 2
    fig = L.draw(ls, line)
    drawn = fig.axes[0].lines
    for i, (mc, s) in enumerate(zip(("1x1", "1x4"), line.series)):
        best = max((json.loads(k) for k in gf if json.loads(k)["mc"] == mc), key=lambda c: gf[key(c)])
        assert s.label.startswith(f"mc={mc} (")
        want = [gf.get(key({**best, "np": x}), math.nan) for x in line.xs]
        assert nan_equal([c.value for c in s.cells], want)
        assert nan_equal(list(drawn[i].get_ydata()), want)
        assert list(drawn[i].get_xdata()) == [4.0, 8.0, 16.0]


def test_mrt_heat_map_and_knob_bars_are_the_stored_values(runs):
    ls = L.landscape(measured(runs["exhaustive"], SPEC))
    gf = stored(runs["exhaustive"])
    grid = view(ls, "grid")
    assert grid.pair == ("mrt_h", "mrt_w") and [p.label.split(" at ")[0] for p in grid.panels] == ["mc=1x1", "mc=1x4"]
    kn = Knobs(ls.measured.points)
    for mc, panel in zip(("1x1", "1x4"), grid.panels):
        base = kn.best(mc=mc).config
        for r, row in zip(panel.rows, panel.cells):
            for c, cell in zip(panel.cols, row):
                assert cell.value == pytest.approx(gf[key({**base, "mrt_h": r, "mrt_w": c})])
    image = L.draw(ls, grid).axes[0].get_images()[0].get_array()
    assert image[0][0] == pytest.approx(grid.panels[0].cells[0][0].value)    # origin lower: row mrt_h=1
    bars = view(ls, "bars")
    assert [p.knob for p in bars.panels] == ["fetch"] and bars.families == ["mc=1x1", "mc=1x4"]
    panel = bars.panels[0]
    fig = L.draw(ls, bars)
    heights = [r.get_height() for r in fig.axes[0].patches]
    for j, mc in enumerate(("1x1", "1x4")):
        base = kn.best(mc=mc).config
        want = [gf[key({**base, "fetch": v})] for v in panel.values]
        assert [row[j].value for row in panel.cells] == pytest.approx(want)
        assert heights[j * len(panel.values):(j + 1) * len(panel.values)] == pytest.approx(want)


def test_a_store_draws_what_its_report_draws(runs):
    from_store = L.landscape(measured(runs["store"], SPEC, backend="gl"))
    from_report = L.landscape(measured(runs["exhaustive"], SPEC))
    assert len(from_store.measured.points) == len(from_report.measured.points) == 48
    a, b = view(from_store, "line"), view(from_report, "line")
    for s, t in zip(a.series, b.series):
        assert nan_equal([c.value for c in s.cells], [c.value for c in t.cells])


def partial(report_path, dropped, path):
    """The report of a search that never reached the configs `dropped` accepts: the
    complete one without them."""
    doc = json.loads(pathlib.Path(report_path).read_text())
    p = doc["problems"][0]
    p["results"] = [r for r in p["results"] if not dropped(r["config"])]
    p["evaluated"] = p["measured"] = len(p["results"])
    path.write_text(json.dumps(doc))
    return path


def test_places_never_evaluated_are_nan_gaps_and_not_run_cells(runs, tmp_path):
    # never reached: fetch=texture, mc=1x4 at np=16, and mc=1x4 on the 2x2 grid
    ls = L.landscape(measured(partial(runs["exhaustive"], lambda c: c["fetch"] == "texture" or (
        c["mc"] == "1x4" and (c["np"] == 16 or (c["mrt_h"], c["mrt_w"]) == (2, 2))),
        tmp_path / "stopped.json"), SPEC))
    assert not ls.measured.complete
    kn = Knobs(ls.measured.points)
    evaluated = {key(p.config) for p in ls.measured.points}
    line = view(ls, "line")
    gaps = 0
    for s in line.series:
        mc = s.label.split(" ")[0].split("=")[1]
        base = kn.best(mc=mc).config
        for x, c in zip(line.xs, s.cells):
            if key({**base, "np": x}) in evaluated:
                assert c.state == "ok" and not math.isnan(c.value)
            else:
                gaps += 1
                assert c.state == "missing" and math.isnan(c.value)
    assert gaps, "mc=1x4 was never evaluated at np=16"
    fig = L.draw(ls, line)
    for s, drawn in zip(line.series, fig.axes[0].lines):
        assert nan_equal(list(drawn.get_ydata()), [c.value for c in s.cells])   # NaN: a gap, no line
    grid = view(ls, "grid")
    missing = [c for p in grid.panels for row in p.cells for c in row if c.state == "missing"]
    assert missing and all(math.isnan(c.value) for c in missing)
    fig = L.draw(ls, grid)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("not run") == len(missing)
    for ax, panel in zip(fig.axes, grid.panels):
        arr = ax.get_images()[0].get_array()
        for i, row in enumerate(panel.cells):
            for j, c in enumerate(row):
                assert bool(arr.mask[i][j]) == (c.state != "ok")
    # fetch=texture was never reached: the data hold one fetch, a fixed knob, no bars
    assert ls.fixed["fetch"] == "texelFetch" and not [v for v in ls.views if v.kind == "bars"]


def test_unverified_configs_are_markers_never_values(runs, tmp_path):
    doc = json.loads(pathlib.Path(runs["exhaustive"]).read_text())
    results = doc["problems"][0]["results"]
    fastest = max((r for r in results if r["status"] == "ok"), key=lambda r: r["gflops"])
    # the fastest kernel computed a wrong result: it must not be the landscape's best
    fastest["status"] = "wrong"
    path = tmp_path / "marked.json"
    path.write_text(json.dumps(doc))
    m = measured(path, SPEC)
    assert [p.gflops for p in m.points if p.status == "wrong"] == [None]
    kn = Knobs(m.points)
    assert kn.best().config != fastest["config"]
    # and the np=4 point on the 1x1 line was abandoned as slow (never timed to the end)
    slowed = {**kn.best(mc="1x1").config, "np": 4}
    next(r for r in results if r["config"] == slowed).update(status="slow", times_ms=[],
                                                             median_ms=None, gflops=None)
    path.write_text(json.dumps(doc))
    ls = L.landscape(measured(path, SPEC))
    line = view(ls, "line")
    cell = line.series[0].cells[line.xs.index(4)]
    assert line.series[0].label.startswith("mc=1x1") and cell.state == "slow" and math.isnan(cell.value)
    fig = L.draw(ls, line)
    assert math.isnan(fig.axes[0].lines[0].get_ydata()[line.xs.index(4)])
    marked = [float(x) for c in fig.axes[0].collections for x, _ in c.get_offsets()]
    assert 4.0 in marked
    assert any("not verified" in t.get_text() for leg in fig.legends for t in leg.get_texts())


def test_cuda_views_from_tuned_candidates_are_best_per_place():
    if not BENCH_CUDA.exists():
        pytest.skip("benchmarks/ not in this checkout")
    m = measured(BENCH_CUDA, "256x256x60000")
    assert m.backend == "cuda" and m.problem["trans_b"] and len(m.points) == 48
    ls = L.landscape(m)
    assert ls.layout.line == "KG" and ls.layout.family == ("MMA",) and ls.layout.hold == "best"
    assert ("BM", "BN") in ls.layout.pairs and ("WM", "WN") in ls.layout.pairs
    line = view(ls, "line")
    assert [s.label for s in line.series] == ["FFMA", "3xTF32 mma.sync", "3xTF32 wgmma"]
    row = next(r for r in json.loads(BENCH_CUDA.read_text())["rows"] if r["key"] == "256x256x60000:float32:NT")
    for mma, s in zip((0, 3, 4), line.series):
        for kg, c in zip(line.xs, s.cells):
            ms = [t["median_ms"] for t in row["trials"] if t["config"]["MMA"] == mma and t["config"]["KG"] == kg]
            want = row["flops"] / (min(ms) * 1e-3) / 1e9 if ms else math.nan
            assert nan_equal([c.value], [want])
    knobs = [p.knob for p in view(ls, "bars").panels]
    assert "BK" in knobs and "ST" in knobs and "KG" not in knobs and "MMA" not in knobs


def test_layout_follows_the_knobs_present():
    gl_new = ["out", "glsl", "fetch", "unroll", "np", "mc", "mrt_h", "mrt_w", "block_h", "block_w",
              "a_src", "b_src"]
    lay = L.choose_layout(gl_new, gl_new)
    assert lay.line == "np" and lay.family == ("out", "mc") and lay.hold == "slice"
    assert lay.pairs == (("mrt_h", "mrt_w"), ("block_h", "block_w"))
    # a knob with one value is not drawn; an unknown *_h/*_w pair gets its heat map
    lay = L.choose_layout(gl_new + ["tile_h", "tile_w"], ["np", "mrt_h", "mrt_w", "tile_h", "tile_w"])
    assert lay.family == () and lay.pairs == (("mrt_h", "mrt_w"), ("tile_h", "tile_w"))
    assert L.choose_layout(["x", "y"], ["x", "y"]) == L.Layout(None, (), (), "best")


def test_problem_names():
    assert parse_problem("2560x16x2560 TN") == {"M": 2560, "N": 16, "K": 2560, "trans_a": True,
                                                "trans_b": False}
    assert parse_problem("64x64x60000:f64:nt")["dtype"] == "float64"
    for bad in ("16x16", "16x16x16 XX", ""):
        with pytest.raises(ReportError, match="MxNxK|neither"):
            parse_problem(bad)


def test_cli_writes_readable_figures_and_refuses_in_one_line(runs, tmp_path, capsys):
    out = tmp_path / "figs"
    assert main(["landscape", str(runs["store"]), "--problem", SPEC, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert names == ["landscape-gl-16x16x16-knobs.png", "landscape-gl-16x16x16-mrt_h-mrt_w.png",
                     "landscape-gl-16x16x16-np.png"]
    assert "48 configs" in text and "figure: " in text
    only = tmp_path / "only"
    assert main(["landscape", str(runs["store"]), "--views", "np", "--out", str(only)]) == 0
    assert [p.name for p in only.iterdir()] == ["landscape-gl-16x16x16-np.png"]
    capsys.readouterr()
    ls = L.landscape(measured(runs["exhaustive"], SPEC))
    for v in ls.views:
        check_readable(L.draw(ls, v))
    for argv, msg in (
            (["landscape", str(runs["store"]), "--problem", "8x8x8"], "no results for '8x8x8'; it holds 16x16x16"),
            (["landscape", str(tmp_path / "none.json")], "no such file"),
            (["landscape", str(runs["exhaustive"]), "--problem", "16x16"], "expected MxNxK"),
            (["landscape", str(runs["store"]), "--backend", "cuda"], "holds no results for backend cuda"),
            (["landscape", str(runs["store"]), "--views", "np,KG"], "no view KG in these data; they have np")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err


def check_readable(fig):
    """Titles and GFLOP/s labels present; every text inside the canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    assert fig.get_suptitle()
    boxes = [ax.get_tightbbox(r) for ax in fig.axes if ax.get_visible()]
    boxes += [leg.get_window_extent(r) for leg in fig.legends] + [t.get_window_extent(r) for t in fig.texts]
    for bb in boxes:
        assert bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1, f"drawn outside: {bb}"
    assert any("GFLOP/s" in (ax.get_ylabel() + ax.get_xlabel()) for ax in fig.axes)
    return fig
