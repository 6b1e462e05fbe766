"""Reports: schema validation, Markdown tables, compare, the CLI (no GPU needed)."""
import copy
import json
import pathlib
import subprocess
import sys

import pytest

from shadertune import report
from shadertune import roofline as rl
from shadertune.report.__main__ import main

FIX = pathlib.Path(__file__).parent / "fixtures"
GL, CUDA, CEIL = FIX / "report_gl_h200.json", FIX / "report_cuda_h200.json", FIX / "ceilings_h200.json"


@pytest.fixture
def gl():
    return report.load(GL)


@pytest.fixture
def cuda():
    return report.load(CUDA)


def _write(tmp_path, d, name="r.json"):
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p


def _rows(md: str) -> list[list[str]]:
    lines = [l for l in md.splitlines() if l.startswith("| ")]
    return [[c.strip() for c in l.strip("|").split(" | ")] for l in lines[2:]]


# --- schema -------------------------------------------------------------------

def test_fixtures_are_valid_and_extra_fields_are_tolerated(gl, tmp_path):
    assert gl["backend"] == "gl" and len(gl["problems"]) == 5
    d = copy.deepcopy(gl)
    d["something_new"] = {"x": 1}
    d["problems"][0]["results"][0]["extra"] = [1, 2]
    report.load(_write(tmp_path, d))


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d.pop("strategy"), "strategy: missing required field"),
    (lambda d: d["device"].pop("renderer"), "device.renderer: missing required field"),
    (lambda d: d["problems"][1]["best"].pop("gflops"), "problems[1].best.gflops: missing required field"),
    (lambda d: d["problems"][2].update(M="1024"), "problems[2].M: expected int, got string"),
    (lambda d: d["problems"][0].update(evaluated=True), "problems[0].evaluated: expected int, got bool"),
    (lambda d: d["problems"][0]["results"][1].pop("times_ms"), "problems[0].results[1].times_ms: missing"),
    (lambda d: d["problems"][0]["results"][0]["problem"].pop("K"), "problems[0].results[0].problem.K: missing"),
    (lambda d: d["problems"][0]["results"][0].update(status="great"), "results[0].status: 'great' is not one of"),
    (lambda d: d["problems"][3]["baselines"]["cublas"].pop("gflops"), "problems[3].baselines.cublas.gflops"),
    (lambda d: d["problems"][3].update(roofline={"gflops": 1.0}), "problems[3].roofline.bound: missing"),
    (lambda d: d.update(schema=2), "schema: version 2 is not supported"),
    (lambda d: d.update(problems={}), "problems: expected array, got object"),
])
def test_validation_names_file_and_field(gl, tmp_path, mutate, field):
    d = copy.deepcopy(gl)
    mutate(d)
    p = _write(tmp_path, d, "broken.json")
    with pytest.raises(report.ReportError) as e:
        report.load(p)
    msg = str(e.value)
    assert field in msg and str(p) in msg and "\n" not in msg


def test_not_a_report(tmp_path):
    for text, why in (("[1, 2]", "expected a JSON object"), ("{", "invalid JSON at line 1"),
                      ('{"M": 3}', "missing required field 'schema'"),
                      (CEIL.read_text(), "not a report: this is a ceilings file")):
        p = tmp_path / "raw.json"
        p.write_text(text)
        with pytest.raises(report.ReportError, match=why):
            report.load(p)
    with pytest.raises(report.ReportError, match="no such file"):
        report.load(tmp_path / "missing.json")


def test_best_may_be_null(gl, tmp_path):
    d = copy.deepcopy(gl)
    d["problems"][0]["best"] = None
    rep = report.load(_write(tmp_path, d))
    row = _rows(report.show(rep))[0]
    assert row[1] == "—" and row[2] == "—" and row[3] == "—"


# --- tables -------------------------------------------------------------------

def test_show_table_rows_configs_ratios_and_roofline(gl):
    md = report.show(gl)
    header = [l for l in md.splitlines() if l.startswith("| problem")][0]
    for col in ("best config", "GFLOP/s", "% of roofline", "x cublas", "x numpy-cpu", "x handtuned-4x4mrt"):
        assert col in header
    rows = {r[0]: r for r in _rows(md)}
    assert list(rows) == [report.problem_label(p) for p in gl["problems"]]
    r = rows["1024x1024x1024 f32 NN"]
    p = gl["problems"][2]
    assert "mc=1x4" in r[1] and "mrt=4x2" in r[1] and "np=64" in r[1]
    assert r[2] == "298"
    roof = rl.gl_config_roofline(p["best"]["config"], gl["ceilings"], K=1024)
    assert roof["bound"] == "fetch"
    assert r[3] == f"{100 * 298.0 / roof['gflops']:.0f}% of {roof['gflops']:.0f} (fetch)"
    names = [c.strip() for c in header.strip("|").split(" | ")]
    assert r[names.index("x cublas")] == f"{298.0 / 27800.0:.3f}x"
    assert r[names.index("x handtuned-4x4mrt")] == f"{298.0 / 262.0:.2f}x"
    assert rows["256x256x256 f32 NN"][names.index("x cublas")] == "—"   # no cuBLAS run there
    assert "fragment_fma_gflops = 1939 GFLOP/s" in md and "fetch_gtexels = 31.7 G texel fetches/s" in md


def test_explicit_ceilings_override_and_cuda_roofline(cuda):
    no_ceil = _rows(report.show(cuda))
    assert all(r[3] == "—" for r in no_ceil)
    ceil = rl.load(CEIL)
    peak = ceil["ceilings"]["cuda_fma_gflops"]
    rows = _rows(report.show(cuda, ceil))
    assert rows[0][3] == f"{100 * cuda['problems'][0]['best']['gflops'] / peak:.0f}% of {peak:.0f} (alu)"


def test_annotate_stores_rooflines_that_validate(gl, cuda, tmp_path):
    ceil = rl.load(CEIL)
    for rep in (gl, cuda):
        out = report.annotate(rep, ceil)
        assert "roofline" not in rep["problems"][0] or rep is gl       # input untouched
        assert all(p["roofline"]["gflops"] > 0 for p in out["problems"] if p["best"])
        report.load(_write(tmp_path, out))
    assert report.annotate(cuda, ceil)["problems"][-1]["roofline"]["bound"] in ("alu", "memory")


# --- compare ------------------------------------------------------------------

def test_compare_joins_shared_problems_in_order(gl, cuda):
    pairs = report.join(gl, cuda)
    assert [report.problem_key(a) for a, _ in pairs] == [(n, n, n, "float32", False, False) for n in (512, 1024, 2048)]
    assert all(report.problem_key(a) == report.problem_key(b) for a, b in pairs)
    md = report.compare_table(gl, cuda, rl.load(CEIL), rl.load(CEIL))
    rows = {r[0]: r for r in _rows(md)}
    assert set(rows) == {"512x512x512 f32 NN", "1024x1024x1024 f32 NN", "2048x2048x2048 f32 NN"}
    r = rows["2048x2048x2048 f32 NN"]
    assert r[1:4] == ["336", "31500", f"{336 / 31500:.3f}x"]
    assert r[6] == "44100" and r[8] == f"{31500 / 44100:.2f}x"        # cuBLAS from the CUDA run
    assert "Only in gl: 256x256x256 f32 NN, 2560x16x2560 f32 NN" in md
    assert "Only in cuda: 4096x4096x4096 f32 NN, 64x64x60000 f32 NN" in md


def test_compare_join_ignores_problems_differing_only_in_trans_or_dtype(gl, cuda):
    c = copy.deepcopy(cuda)
    c["problems"][0]["trans_b"] = True
    c["problems"][1]["dtype"] = "float64"
    assert [a["M"] for a, _ in report.join(gl, c)] == [2048]


def test_compare_refuses_same_backend_and_disjoint_problems(gl, cuda):
    with pytest.raises(report.CompareError, match="both reports are of backend 'gl'"):
        report.join(gl, gl)
    c = copy.deepcopy(cuda)
    c["problems"] = [p for p in c["problems"] if p["M"] in (4096, 64)]
    with pytest.raises(report.CompareError, match="share no problem"):
        report.join(gl, c)


# --- the CLI ------------------------------------------------------------------

def test_cli_show_prints_markdown(capsys):
    assert main(["show", str(GL)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## gl on NVIDIA H200") and "| 1024x1024x1024 f32 NN |" in out


@pytest.mark.parametrize("argv,match", [
    (["compare", str(GL), str(GL)], "both reports are of backend 'gl'"),
    (["compare", str(GL), str(CEIL)], "not a report"),
    (["show", "nope.json"], "nope.json: no such file"),
    (["show", str(GL), "--ceilings", str(GL)], "this is a run report, not a ceilings file"),
])
def test_cli_refuses_with_one_line_and_nonzero_exit(capsys, argv, match):
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert match in err and err.count("\n") == 0 and err.startswith("shadertune.report: error:")


def test_cli_compare_disjoint(tmp_path, capsys, cuda):
    c = copy.deepcopy(cuda)
    c["problems"] = c["problems"][3:]
    assert main(["compare", str(GL), str(_write(tmp_path, c))]) == 2
    assert "share no problem" in capsys.readouterr().err


def test_cli_roofline_tiny_on_llvmpipe(tmp_path, capsys):
    from shadertune.errors import ContextError
    from shadertune.roofline import gl as rgl
    try:
        rgl.context()
    except ContextError as e:
        pytest.skip(f"no GL: {e}")
    out = tmp_path / "ceil.json"
    assert main(["roofline", "--preset", "tiny", "--backend", "all", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fragment_fma_gflops" in text and "fetch_gtexels" in text
    assert rl.load(out)["ceilings"]["fragment_fma_gflops"] > 0


def test_report_package_imports_without_matplotlib():
    code = ("import sys, shadertune.report as r; r.show(r.load(sys.argv[1])); "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'")
    subprocess.run([sys.executable, "-c", code, str(GL)], check=True)


def test_reports_written_by_the_search_validate():
    rj = pytest.importorskip("shadertune.search.report_json")
    from shadertune.backends.base import DeviceInfo
    from shadertune.config import Config
    from shadertune.problem import Problem
    from shadertune.result import Result
    p = Problem(64, 64, 64)
    results = [Result("gl", "llvmpipe", p, Config(mc="1x4", mrt_h=2, mrt_w=2, np=16), "ok", [0.5, 0.6], 3.0, 1e-7),
               Result("gl", "llvmpipe", p, Config(mc="2x2", mrt_h=1, mrt_w=1, np=8), "compile_failed",
                      message="boom")]
    entry = rj.problem_entry(p, results, space_size=10, full_space_size=40, measured=2, cached=0, seconds=1.5)
    doc = rj.make_report("gl", DeviceInfo("gl", "Mesa", "llvmpipe", "4.5 Mesa", {"max_draw_buffers": 8}),
                         "phased", [entry])
    rep = report.validate(json.loads(json.dumps(doc)), "search-output")
    ceil = {"fragment_fma_gflops": 10.0, "fetch_gtexels": 0.2}
    roof = report.roofline_of(rep, rep["problems"][0], ceil)
    assert roof["bound"] == "fetch" and roof["gflops"] == pytest.approx(0.2 * rl.flops_per_fetch(
        {"mc": "1x4", "mrt_h": 2, "mrt_w": 2, "np": 16}, K=64))
