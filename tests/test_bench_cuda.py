"""scripts/bench-cuda without a GPU: its command line and the report it writes from rows."""
import pathlib

import pytest
from subproc import run_python
from script_module import load_script

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "bench-cuda"


@pytest.fixture(scope="module")
def bench():
    return load_script("bench-cuda")


def test_help_names_the_search_options():
    out = run_python(None, SCRIPT, "--help")
    assert out.returncode == 0
    for opt in ("--time-limit", "--store", "--strategy", "--budget", "--unheld"):
        assert opt in out.stdout


def _row(bench, ok=True):
    cfg = dict(BM=128, BN=128, BK=16, TM=4, TN=4, WM=64, WN=128, trans=1, VEC=4, PAD=4, DB=1, ST=3,
               KG=1, KL=1, KR=0, MMA=4)
    row = {"group": "square", "problem": {"M": 4096, "N": 4096, "K": 4096, "trans_a": False,
                                          "trans_b": True}, "strategy": "model", "evaluated": 310,
           "measured": 300, "seconds": 60.2}
    if ok:
        row.update(ours_tflops=52.0, cublas_tflops=40.0, ratio=1.3, ratio_ffma=0.97, ratio_wgmma=1.3,
                   ours_ms=2.6, cublas_ms=3.4, best_error=2e-7, cublas_error=1e-6, tolerance=1e-5,
                   best_config=cfg, ratio_unheld=1.2, ours_unheld_ms=2.7, cublas_unheld_ms=3.3,
                   curve_ratio={"10": 1.1, "20": 1.25, "30": None, "60": 1.3})
    return row


@pytest.mark.parametrize("unheld", [False, True])
def test_markdown_rows_have_the_header_s_columns(bench, unheld):
    import argparse
    md = bench.markdown([_row(bench), _row(bench, ok=False)], {"renderer": "H200", "driver": "x"},
                        "cmd", argparse.Namespace(unheld=unheld))
    table = [line for line in md.splitlines() if line.startswith("|")]
    widths = {line.count("|") for line in table}
    assert len(table) == 4 and len(widths) == 1, table
    assert "3xTF32 wgmma" in table[2] and "| 1.30 |" in table[2] and "| - |" in table[2]
    assert "none passed" in table[3]
    assert ("unheld" in table[0]) == unheld


def test_best_so_far_at_a_time(bench):
    curve = [{"evals": 1, "seconds": 0.5, "best_ms": 3.0}, {"evals": 9, "seconds": 12.0, "best_ms": 2.0}]
    assert bench._best_at(curve, 10) == 3.0 and bench._best_at(curve, 60) == 2.0
    assert bench._best_at(curve, 0.1) is None
