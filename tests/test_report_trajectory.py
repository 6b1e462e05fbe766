"""Search trajectories from a real small study on GL (llvmpipe here): best so far is the
running maximum of the stored verified GFLOP/s, the optimum is the complete exhaustive
search's best, seconds run from the search's start, and the space each run timed."""
import json
import math
import pathlib
import sys

import pytest

pytest.importorskip("matplotlib")

from shadertune.report import load                              # noqa: E402
from shadertune.report import trajectory as T                   # noqa: E402
from shadertune.cli.report import main                      # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from md_table import table_lines                                  # noqa: E402
from small_study import runs                                      # noqa: E402,F401

ORDER = ("phased", "random-seed0", "random-seed1", "exhaustive")


def paths(runs):
    return [str(runs[k]) for k in ORDER]


def running_max(values):
    out, best = [], math.nan
    for v in values:
        if v is not None and (math.isnan(best) or v > best):
            best = v
        out.append(best)
    return out


def test_best_so_far_optimum_and_shares_are_the_reports_numbers(runs):
    reps = [load(p) for p in paths(runs)]
    rs = T.runs(reps, paths(runs))
    assert [r.label for r in rs] == list(ORDER) and [r.strategy for r in rs] == [
        "phased", "random", "random", "exhaustive"]
    for r, rep in zip(rs, reps):
        res = rep["problems"][0]["results"]
        want = running_max([x["gflops"] if x["status"] == "ok" else None for x in res])
        assert len(r.best) == len(res) == r.evaluated
        assert [b for b in r.best if not math.isnan(b)] == pytest.approx([w for w in want if not math.isnan(w)])
        assert r.timed == sum(1 for x in res if x["times_ms"])
        assert r.space_size == 48
    ex = rs[-1]
    assert ex.complete_exhaustive and not rs[0].complete_exhaustive
    opt = max(x["gflops"] for x in reps[-1]["problems"][0]["results"] if x["status"] == "ok")
    assert T.optima(rs) == {(16, 16, 16, "float32", False, False): pytest.approx(opt)}
    # the pick of phased, timed by exhaustive's run, against the optimum
    own, ref = T.quality(rs[0], ex)
    pick = json.dumps(reps[0]["problems"][0]["best"]["config"], sort_keys=True)
    ex_times = {json.dumps(x["config"], sort_keys=True): x["gflops"]
                for x in reps[-1]["problems"][0]["results"] if x["status"] == "ok"}
    assert own == pytest.approx(rs[0].final / opt) and ref == pytest.approx(ex_times[pick] / opt)
    table = T.table(rs)
    rows = {r[0]: r for r in table_lines(table)}
    assert rows["exhaustive"][:6] == ["exhaustive", "16x16x16 float32", "exhaustive", "48", "48", "100%"]
    assert rows["exhaustive"][-2:] == ["100.0%", "100.0%"] and "Optimum unknown" not in table


def test_seconds_run_from_the_search_start():
    ts = [100.0, 100.5, 100.4, 103.0]
    assert T.elapsed(ts, 4.0) == [1.0, 1.5, 1.5, 4.0]          # never backwards; ends at the seconds
    assert T.elapsed([100.0, None], 1.0) is None
    assert T.best_so_far([None, 2.0, 1.0, 3.0]) [1:] == [2.0, 2.0, 3.0]
    assert math.isnan(T.best_so_far([None])[0])


def test_the_figure_draws_those_numbers(runs):
    rs = T.runs([load(p) for p in paths(runs)], paths(runs))
    fig = T.plot(rs)
    ax_n, ax_s, ax_f = fig.axes
    lines = [ln for ln in ax_n.lines if ln.get_label() in ORDER]
    assert [ln.get_label() for ln in lines] == list(ORDER)
    for ln, r in zip(lines, rs):
        assert list(ln.get_xdata()) == list(range(1, r.evaluated + 1))
        ys = list(ln.get_ydata())
        assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(ys, r.best))
    opt = [ln for ln in ax_n.lines if ln.get_label().startswith("exhaustive optimum")]
    assert len(opt) == 1 and opt[0].get_ydata()[0] == pytest.approx(rs[-1].final)
    timed = [ln for ln in ax_s.lines if ln.get_label() in ORDER]
    for ln, r in zip(timed, rs):               # each run's last result lands at its search seconds
        assert max(ln.get_xdata()) == pytest.approx(max(r.search_seconds, 0.01), abs=1e-5)  # seconds: 6 decimals
        assert list(ln.get_xdata()) == sorted(ln.get_xdata())
    widths = sorted(round(p.get_width(), 6) for p in ax_f.patches)
    want = sorted(round(100 * n / r.space_size, 6) for r in rs for n in (r.evaluated, r.timed))
    assert widths == want
    assert ax_n.get_xscale() == "log" and "GFLOP/s" in ax_n.get_ylabel()


def test_cli(runs, tmp_path, capsys):
    out = tmp_path / "t.png"
    assert main(["trajectory", *paths(runs), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "phased" in [r[0] for r in table_lines(text)] and f"figure: {out}" in text
    assert main(["trajectory", *paths(runs), "--out", str(tmp_path / "t.txt")]) == 2
    assert "unknown plot format '.txt'" in capsys.readouterr().err
    assert main(["trajectory", *paths(runs), "--problem", "8x8x8"]) == 2
    assert "no results for '8x8x8'" in capsys.readouterr().err


def test_a_report_records_its_phases_and_the_figure_marks_them(runs):
    """Each report carries its strategy's phases with the index of their first result;
    the figure marks the milestones (the plan's parts, local search, the restarts)."""
    reps = [load(p) for p in paths(runs)]
    for rep in reps:
        (p,) = rep["problems"]
        assert p["phases"] and p["phases"][0]["at"] == 0
        assert [ph["at"] for ph in p["phases"]] == sorted(ph["at"] for ph in p["phases"])
        assert all(ph["at"] <= p["evaluated"] for ph in p["phases"])
    assert reps[-1]["problems"][0]["phases"] == [{"at": 0, "label": "exhaustive"}]
    rs = T.runs(reps, paths(runs))
    fig = T.plot(rs)
    ax_n = fig.axes[0]
    marks = [ln for ln in ax_n.lines if ln.get_linestyle() == ":"]
    want = [at + 1 for r in rs for at, _ in T.milestones(r.phases, r.evaluated)]
    assert sorted(ln.get_xdata()[0] for ln in marks) == sorted(want) and want


def test_milestones_are_where_the_search_moved_on():
    phases = [(0, "family=compute: ks"), (0, "family=compute: bm bn"), (7, "family=compute: ks refinement"),
              (9, "family=fragment out=mrt lang=glsl glsl=330 fetch=texture unroll=1: np"),
              (12, "family=fragment out=mrt lang=glsl glsl=330 fetch=texture unroll=1: mc"),
              (20, "local search"), (31, "restart 1: 1 new starting point"), (32, "restart 1: local search"),
              (40, "restart 2: 8 new starting points"), (48, "converged: 3 restarts without a 1% gain")]
    got = T.milestones([{"at": at, "label": label} for at, label in phases], evaluated=48)
    assert got == [(0, "family=compute"), (9, "family=fragment"), (20, "local search"), (31, "restarts")]
    assert T.milestones([{"at": 0, "label": "model: top 24"}, {"at": 24, "label": "local search"}], 24) == [
        (0, "model")]                                       # a phase after the last evaluation: none
