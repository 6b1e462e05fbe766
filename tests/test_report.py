"""Reports: schema validation, Markdown tables, compare, the CLI (no GPU needed)."""
import copy
import json
import pathlib
import sys

import pytest
from md_table import cells, table_lines
from subproc import run_python

from shadertune import report
from shadertune.core import roofline as rl
from shadertune.backends.gl import roofline as glr
from shadertune.backends.gl.mrt import roofline as mrt_roofline
from shadertune.core.problem import Problem
from shadertune.cli.report import main

FIX = pathlib.Path(__file__).parent / "fixtures"
GL, CUDA, CEIL = FIX / "report_gl_h200.json", FIX / "report_cuda_h200.json", FIX / "ceilings_h200.json"
LLVMPIPE = FIX / "report_gl_llvmpipe.json"   # a real phased search on llvmpipe, 16 results kept a size


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
    return table_lines(md)[1:]


# --- schema -------------------------------------------------------------------

def test_fixtures_are_valid_and_extra_fields_are_tolerated(gl, tmp_path):
    assert gl["backend"] == "gl" and len(gl["problems"]) == 5
    d = copy.deepcopy(gl)
    d["something_new"] = {"x": 1}
    d["problems"][0]["results"][0]["extra"] = [1, 2]
    d["problems"][0]["phases"] = [{"at": 0, "label": "exhaustive"}]         # optional, as searches write
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
    (lambda d: d["problems"][0].update(phases=[{"at": 0}]), "problems[0].phases[0].label: missing"),
    (lambda d: d["problems"][0].update(phases=[{"at": "0", "label": "x"}]), "problems[0].phases[0].at: expected int"),
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


def test_published_schema_is_valid_and_matches_the_code(gl, cuda):
    """The schema file is a valid draft 2020-12 schema; its version and status names are the
    code's; a plain jsonschema validator (no shadertune code) accepts the fixtures."""
    import jsonschema

    from shadertune.report import schema
    from shadertune.core.result import STATUSES
    doc = schema.schema_document()
    jsonschema.Draft202012Validator.check_schema(doc)
    assert doc["properties"]["schema"]["const"] == schema.SCHEMA
    assert tuple(doc["$defs"]["result"]["properties"]["status"]["enum"]) == STATUSES
    for rep in (gl, cuda, report.load(LLVMPIPE)):
        jsonschema.validate(rep, doc)


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["problems"][0].update(seconds=float("nan")), "problems[0].seconds: expected a finite number"),
    (lambda d: d["problems"][1]["best"].update(gflops=float("inf")), "problems[1].best.gflops: expected a finite"),
    (lambda d: d["problems"][0].update(M=64.0), "problems[0].M: expected int, got number"),
    (lambda d: d.update(schema="1"), "schema: expected int, got string"),
    (lambda d: d["problems"].append([]), "problems[5]: expected object, got array"),
])
def test_validation_is_stricter_than_json_types(gl, mutate, field):
    """Numbers are finite and integers have no fraction (the schema's description says so)."""
    d = copy.deepcopy(gl)
    mutate(d)
    with pytest.raises(report.ReportError) as e:
        report.validate(d, "r.json")
    assert str(e.value).startswith("r.json: ") and field in str(e.value) and "\n" not in str(e.value)


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
    r = rows["1024x1024x1024 float32"]
    p = gl["problems"][2]
    assert "mc=1x4" in r[1] and "mrt=4x2" in r[1] and "np=64" in r[1]
    assert r[2] == "298"
    roof = glr.gl_config_roofline(p["best"]["config"], gl["ceilings"], Problem(1024, 1024, 1024))
    assert roof["bound"] == "fetch"
    assert r[3] == f"{100 * 298.0 / roof['gflops']:.0f}% of {roof['gflops']:.0f} (fetch)"
    names = cells(header)
    assert r[names.index("x cublas")] == f"{298.0 / 27800.0:.3f}x"
    assert r[names.index("x handtuned-4x4mrt")] == f"{298.0 / 262.0:.2f}x"
    assert rows["256x256x256 float32"][names.index("x cublas")] == "—"   # no cuBLAS run there
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

def _header(md: str) -> list[str]:
    line = [l for l in md.splitlines() if l.startswith("| problem")][0]
    return cells(line)


def test_compare_joins_shared_problems_in_order(gl, cuda):
    rows = report.join([gl, cuda])
    assert [name for name, _ in rows] == [f"{n}x{n}x{n} float32" for n in (512, 1024, 2048)]
    assert all(report.problem_key(a) == report.problem_key(b) for _, (a, b) in rows)
    md = report.compare_table([gl, cuda], rl.load(CEIL))
    head = _header(md)
    assert head == ["problem", "gl GFLOP/s", "cuda GFLOP/s", "cuda / gl", "gl % roofline",
                    "cuda % roofline", "gl x cublas", "cuda x cublas"]
    r = {row[0]: row for row in _rows(md)}["2048x2048x2048 float32"]
    assert r[1:4] == ["336", "31500", f"{31500 / 336:.2f}x"]
    # each run against the cuBLAS timed in its own run
    gl_ref = gl["problems"][3]["baselines"]["cublas"]["gflops"]
    assert r[6] == f"{336 / gl_ref:.3f}x" and r[7] == f"{31500 / 44100:.2f}x"
    assert "Only in gl: 256x256x256 float32, 2560x16x2560 float32" in md
    assert "Only in cuda: 4096x4096x4096 float32, 64x64x60000 float32" in md


def test_compare_join_ignores_problems_differing_only_in_trans_or_dtype(gl, cuda):
    c = copy.deepcopy(cuda)
    c["problems"][0]["trans_b"] = True
    c["problems"][1]["dtype"] = "float64"
    assert [ps[0]["M"] for _, ps in report.join([gl, c])] == [2048]


def test_compare_two_runs_strategies_and_devices_of_one_backend(gl, tmp_path):
    again = copy.deepcopy(gl)
    again["problems"][2]["best"]["gflops"] = 149.0
    # two runs of the same kind: told apart by their file names
    md = report.compare_table([gl, again], sources=["runs/monday.json", "runs/tuesday.json"])
    assert _header(md)[1:4] == ["monday GFLOP/s", "tuesday GFLOP/s", "tuesday / monday"]
    assert {r[0]: r for r in _rows(md)}["1024x1024x1024 float32"][3] == "0.50x"
    # two strategies
    again["strategy"] = "random"
    assert _header(report.compare_table([gl, again]))[1:3] == ["phased GFLOP/s", "random GFLOP/s"]
    # two devices
    again["strategy"] = "phased"
    again["device"] = dict(again["device"], renderer="NVIDIA H100 80GB HBM3/PCIe/SSE2")
    assert _header(report.compare_table([gl, again]))[1:3] == ["NVIDIA H200 GFLOP/s", "NVIDIA H100 80GB HBM3 GFLOP/s"]


def test_compare_three_reports_rows_held_by_any_two(gl, cuda):
    third = copy.deepcopy(gl)
    third["strategy"] = "random"
    third["problems"] = [p for p in third["problems"] if p["M"] in (256, 2560)]
    md = report.compare_table([gl, cuda, third])
    head = _header(md)
    assert head[1:4] == ["gl phased GFLOP/s", "cuda random GFLOP/s", "gl random GFLOP/s"]
    rows = {r[0]: r for r in _rows(md)}
    # 256 and the skinny shape are held by gl and its random run; 512-2048 by gl and cuda
    assert set(rows) == {"256x256x256 float32", "512x512x512 float32", "1024x1024x1024 float32",
                         "2048x2048x2048 float32", "2560x16x2560 float32"}
    assert rows["256x256x256 float32"][2] == "—" and rows["256x256x256 float32"][5] == "1.00x"
    assert "Only in cuda random: 4096x4096x4096 float32, 64x64x60000 float32" in md


def test_compare_refuses_one_report_and_disjoint_problems(gl, cuda):
    with pytest.raises(report.CompareError, match="two or more reports"):
        report.join([gl])
    c = copy.deepcopy(cuda)
    c["problems"] = [p for p in c["problems"] if p["M"] in (4096, 64)]
    with pytest.raises(report.CompareError, match="share no problem"):
        report.join([gl, c])


# --- rooflines through the backend's hooks ---------------------------------------

def test_report_asks_the_backend_for_its_roofline(gl, monkeypatch):
    """A backend named in a report is asked for its model; report/ knows no backend names."""
    from shadertune import backends
    from shadertune.report import rooflines

    monkeypatch.setitem(backends._REGISTRY, "made-up", "fake_backend:FakeBackend")
    from fake_backend import FakeBackend
    seen = []

    def roofline(self, problem, config, ceilings):
        seen.append((problem.M, dict(config)))
        return {"gflops": 4.0 * problem.M, "bound": "invented"}
    monkeypatch.setattr(FakeBackend, "roofline", roofline, raising=False)
    monkeypatch.setattr(FakeBackend, "ceiling_lines", lambda self, c: [("made-up peak", 9999.0)],
                        raising=False)
    rooflines.backend_model.cache_clear()
    try:
        rep = copy.deepcopy(gl)
        rep["backend"] = "made-up"
        for p in rep["problems"]:
            p.pop("roofline", None)
        row = {r[0]: r for r in _rows(report.show(rep))}["1024x1024x1024 float32"]
        assert row[3] == f"{100 * 298.0 / 4096:.0f}% of 4096 (invented)"
        assert (1024, gl["problems"][2]["best"]["config"]) in seen
        assert rooflines.ceiling_lines(rep) == [("made-up peak", 9999.0)]
    finally:
        rooflines.backend_model.cache_clear()


def test_reports_of_unknown_backends_keep_their_own_rooflines_and_baselines(gl):
    rep = copy.deepcopy(gl)
    rep["backend"] = "os:system"
    rep.pop("ceilings")
    rep["problems"][2]["roofline"] = {"gflops": 596.0, "bound": "stored"}
    rows = {r[0]: r for r in _rows(report.show(rep))}
    assert rows["1024x1024x1024 float32"][3] == "50% of 596 (stored)"
    assert rows["512x512x512 float32"][3] == "—"
    assert "x numpy-cpu" in report.show(rep)


# --- software renderers: no roofline is claimed ----------------------------------

def test_no_roofline_on_a_software_renderer():
    rep = report.load(LLVMPIPE)
    ceil = {"schema": 1, "kind": "roofline", "created": "x", "device": {"renderer": "llvmpipe"},
            "ceilings": {"fragment_fma_gflops": 0.9, "fetch_gtexels": 0.01}, "details": {}}
    md = report.show(rep, ceil)
    assert "% of roofline" not in md and "609%" not in md
    assert "No roofline: llvmpipe (LLVM 15.0.6, 256 bits) is a software renderer" in md
    assert "Measured throughput: fragment_fma_gflops = 0.90 GFLOP/s" in md
    other = copy.deepcopy(rep)
    other["strategy"] = "random"
    cmp = report.compare_table([rep, other], ceil)
    assert "% roofline" not in cmp and "No roofline for random: llvmpipe (LLVM" in cmp
    out = report.annotate(rep, ceil)
    assert not any("roofline" in p for p in out["problems"])
    assert report.no_roofline(out)


def test_ceilings_measured_in_software_are_no_roofline_for_any_report(gl, tmp_path):
    flagged = rl.mark_software(rl.store.new({"backend": "gl", "renderer": "llvmpipe"},
                                            rl.load(CEIL)["ceilings"]))
    rl.save(tmp_path / "c.json", flagged)
    md = report.show(gl, rl.load(tmp_path / "c.json"))
    assert "% of roofline" not in md and "No roofline: measured on a software renderer" in md
    assert "Measured throughput:" in md
    assert "% of roofline" in report.show(gl, rl.load(CEIL))


# --- the CLI ------------------------------------------------------------------

def test_cli_show_prints_markdown(capsys):
    assert main(["show", str(GL)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## gl on NVIDIA H200") and ["1024x1024x1024 float32"] == [r[0] for r in table_lines(out) if r[0].startswith("1024x")]


def test_cli_compare_of_one_backend_and_three_reports(tmp_path, capsys, gl):
    other = copy.deepcopy(gl)
    other["strategy"] = "random"
    b = _write(tmp_path, other, "b.json")
    assert main(["compare", str(GL), str(b), str(CUDA)]) == 0
    out = capsys.readouterr().out
    assert table_lines(out)[0][:4] == ["problem", "gl phased GFLOP/s", "gl random GFLOP/s", "cuda random GFLOP/s"]


def _deep(n: int) -> str:
    return '{"schema": 1, "x": ' + "[" * n + "]" * n + "}"


@pytest.mark.parametrize("make,match", [
    (lambda d: d.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary"), "not UTF-8 text (a binary file?)"),
    (lambda d: d.write_text(_deep(200_000)), "nested too deeply"),
    (lambda d: d.mkdir(), "cannot read"),
])
def test_cli_bad_files_are_one_line(tmp_path, capsys, make, match):
    bad = tmp_path / "bad.json"
    make(bad)
    for argv in (["show", str(bad)], ["compare", str(GL), str(bad)], ["show", str(GL), "--ceilings", str(bad)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert match in err and err.count("\n") == 0 and err.startswith("shadertune.report: error:"), err


@pytest.mark.parametrize("argv,match", [
    (["compare", str(GL), str(CEIL)], "not a report"),
    (["compare", str(GL)], "two or more reports, got 1"),
    (["show", "nope.json"], "nope.json: no such file"),
    (["show", str(GL), "--ceilings", str(GL)], "this is a run report, not a ceilings file"),
    (["show", str(GL), "--plot", "out.jpg"], "out.jpg: unknown plot format '.jpg'; use .png, .svg, .pdf"),
    (["show", str(GL), "--plot", "out"], "unknown plot format '(no extension)'"),
])
def test_cli_refuses_with_one_line_and_nonzero_exit(capsys, argv, match):
    assert main(argv) != 0
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert match in err and err.count("\n") == 0 and err.startswith("shadertune.report: error:")
    assert captured.out == ""           # refused before anything was printed


def test_cli_compare_disjoint(tmp_path, capsys, cuda):
    c = copy.deepcopy(cuda)
    c["problems"] = c["problems"][3:]
    assert main(["compare", str(GL), str(_write(tmp_path, c))]) == 2
    assert "share no problem" in capsys.readouterr().err


def test_cli_roofline_tiny_says_when_it_is_no_roofline(tmp_path, capsys):
    from shadertune.backends import get_backend
    from shadertune.errors import ContextError
    try:
        software = get_backend("gl").device().limits["software_renderer"]
    except ContextError as e:
        pytest.skip(f"no GL: {e}")
    out = tmp_path / "ceil.json"
    assert main(["roofline", "--preset", "tiny", "--backend", "all", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fragment_fma_gflops" in text and "fetch_gtexels" in text
    saved = rl.load(out)
    assert saved["ceilings"]["fragment_fma_gflops"] > 0
    # llvmpipe: flagged, said, and no report holds a kernel against it
    assert saved["device"].get("software_renderer", False) is software
    assert ("not a roofline" in text) is software
    assert ("% of roofline" in report.show(report.load(GL), saved)) is not software


def test_cli_roofline_without_the_device_is_a_failure_not_a_bad_argument(tmp_path, capsys):
    """No CuPy for --backend cuda: exit 1 (as a missing matplotlib), not 2, and no file."""
    pytest.importorskip("shadertune.backends.cuda")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed here")
    except ImportError:
        pass
    out = tmp_path / "c.json"
    assert main(["roofline", "--preset", "tiny", "--backend", "cuda", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shadertune.report: error: cannot measure cuda ceilings: ") and err.count("\n") == 1
    assert not out.exists()


def test_report_package_imports_without_matplotlib():
    code = ("import sys, shadertune.report as r; r.show(r.load(sys.argv[1])); "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'")
    r = run_python(code, GL)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("argv", [
    ["show", str(GL), "--plot", "{tmp}/p.png"],
    ["compare", str(GL), str(CUDA), "--plot", "{tmp}/p.svg"],
    ["trajectory", str(LLVMPIPE), "--out", "{tmp}/p.png"],
    ["landscape", str(LLVMPIPE), "--problem", "64", "--out", "{tmp}"],
])
def test_plots_without_matplotlib_stop_before_any_work(argv, tmp_path, capsys, monkeypatch):
    """A missing optional package is no bad argument: exit 1 and one line naming the extra,
    before the table is printed or anything is written."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main([a.format(tmp=tmp_path) for a in argv]) == 1
    out, err = capsys.readouterr()
    assert out == "" and list(tmp_path.iterdir()) == []
    assert err.count("\n") == 1 and "plots need matplotlib: pip install 'shadertune[plot]'" in err
    # a bad argument still comes first, with its own status
    if argv[0] == "show":
        assert main(["show", str(GL), "--plot", str(tmp_path / "p.jpg")]) == 2


def test_reports_written_by_the_search_validate():
    rj = pytest.importorskip("shadertune.search.report_json")
    from shadertune.backends.base import DeviceInfo
    from shadertune.core.config import Config
    from shadertune.core.problem import Problem
    from shadertune.core.result import Result
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
    assert roof["bound"] == "fetch" and roof["gflops"] == pytest.approx(0.2 * mrt_roofline.flops_per_fetch(
        {"mc": "1x4", "mrt_h": 2, "mrt_w": 2, "np": 16}, K=64))
