"""scripts/bench-shape-classes without a GPU: the rows it writes (the shapes and
their classes, the search driven through tune() into the store, the tuned config
taken from the store and run through shadertune.matmul, the errors against
float64), the files rewritten atomically after each row, the time budget that
skips rows, a failing row kept apart, and argument errors before anything runs.
The device side is a host stand-in (numpy arrays, a fixed timer) and the backend
the fake one (tests/fake_backend.py) with its cost model; the GPU run is the
lead's (BENCHMARKS.md)."""
import json

import numpy as np
import pytest
from fake_backend import FakeBackend
from script_module import load_script

from shadertune.db import Store
from shadertune.core.problem import Problem


@pytest.fixture(scope="module")
def sc():
    return load_script("bench-shape-classes")


class HostGpu:
    """The script's Gpu on the host: numpy arrays, numpy as the baseline, a timer
    that counts what it timed."""
    kind = "numpy"

    def __init__(self):
        self.timed = []

    def operands(self, p, seed):
        rng = np.random.default_rng(seed)
        shape = (p.batch,) if p.batch > 1 else ()
        return (rng.uniform(-1, 1, shape + (p.M, p.K)).astype(p.dtype),
                rng.uniform(-1, 1, shape + (p.K, p.N)).astype(p.dtype))

    def reference(self, A, B):
        return A.astype(np.float64) @ B.astype(np.float64)

    def baseline(self, A, B, out):
        return np.matmul(A, B, out=out)

    def empty_like_result(self, A, B):
        return np.empty(A.shape[:-1] + B.shape[-1:], A.dtype)

    def rel_err(self, out, ref):
        return float(np.linalg.norm(np.asarray(out, np.float64) - ref) / np.linalg.norm(ref))

    def held_ms(self, fn, repeats):
        fn()
        self.timed.append(("held", repeats))
        return 0.5

    def loop_ms(self, fn, calls):
        fn()
        self.timed.append(("loop", calls))
        return 0.75

    def call_ms(self, fn, repeats):
        fn()
        self.timed.append(("call", repeats))
        return 0.625

    def host_kinds(self):
        return ["numpy"]

    def host_operands(self, kind, p, seed):
        A, B = self.operands(p, seed)
        return {"A": A, "B": B, "out": self.empty_like_result(A, B)}

    def host_baselines(self, ops, with_out):
        return {"repeated": (2.0, 3.0), "single": (4.0, 5.0)}

    def host_us(self, fn, mode):
        fn()
        self.timed.append(("host", mode))
        return 1.0 if mode == "repeated" else 3.0

    def tolerance(self, p, seed):
        return 1e-5

    def release(self):
        pass


def test_shapes_parse_and_classify(sc):
    assert sc.parse_shape("700x900x1100") == Problem(700, 900, 1100)
    assert sc.parse_shape("256x128x128x128") == Problem(128, 128, 128, batch=256)
    assert sc.parse_shape("1000x1000x1000:float64") == Problem(1000, 1000, 1000, "float64")
    for bad in ("12x3", "0x4x4", "4x4xK", "4x4x4:float16", "1x2x3x4x5"):
        with pytest.raises(ValueError):
            sc.parse_shape(bad)
    got = {s: sc.classify(sc.parse_shape(s)) for _, s in sc.DEFAULT_SHAPES}
    assert [got[s] for _, s in sc.DEFAULT_SHAPES] == [c for c, _ in sc.DEFAULT_SHAPES]
    assert len(sc.DEFAULT_SHAPES) >= 14 and {c for c, _ in sc.DEFAULT_SHAPES} == set(sc.CLASSES)
    for cls, s in sc.DEFAULT_SHAPES:        # issue 38's bounds of each class
        p = sc.parse_shape(s)
        if cls == "mid-size odd":
            assert all(500 <= x <= 2000 and x % 64 for x in (p.M, p.N, p.K))
        elif cls == "skinny":
            assert min(p.M, p.N) <= 64
        elif cls == "batched":
            assert p.batch >= 32 and max(p.M, p.N, p.K) <= 384
        elif cls == "float64":
            assert p.dtype == "float64" and 800 <= min(p.M, p.N, p.K) and 1000 <= max(p.M, p.N, p.K) <= 5000
    assert sum(sc.parse_shape(s).batch >= 64 and max(sc.parse_shape(s).M, sc.parse_shape(s).N) <= 128
               for c, s in sc.DEFAULT_SHAPES if c == "batched") >= 2
    assert sc.shape_text(Problem(128, 128, 128, batch=256)) == "256x128x128x128"


def test_a_run_writes_every_row_through_tune_and_matmul(sc, tmp_path):
    be = FakeBackend(model=True)
    gpu = HostGpu()
    plan = [("mid-size odd", Problem(40, 24, 30)), ("skinny", Problem(8, 64, 48))]
    lines = []
    with Store(tmp_path / "t.sqlite") as store:
        rows = sc.run(plan, out=tmp_path, gpu=gpu, backend=be, store=store, tune_seconds=0.3,
                      max_seconds=1e6, seed=0, head="head", log=lambda m, echo=True: lines.append(m))
        best = {p.key: store.best("fake", be.device().key, p, be.template_hash(), tolerance=1e-5)
                for _, p in plan}
    doc = json.loads((tmp_path / "shape-classes.json").read_text())["rows"]
    assert doc == json.loads(json.dumps(rows)) and len(doc) == 2
    for row, (cls, p) in zip(doc, plan):
        for k in ("shape", "dtype", "class", "cublas_ms", "untuned_ms", "tuned_ms", "search_ms", "tune_seconds",
                  "cublas_error", "untuned_error", "tuned_error", "cublas_loop_ms", "untuned_loop_ms",
                  "tuned_loop_ms", "untuned_config", "tuned_config", "search_config", "cublas_call_ms",
                  "untuned_call_ms", "tuned_call_ms"):
            assert row[k] is not None, k
        assert row["class"] == cls and row["shape"] == sc.shape_text(p) and row["dtype"] == p.dtype
        assert row["untuned_config"] == be.default_config(p).to_dict()
        # the tuned config is the store's best, the search's own: its median is search_ms
        assert row["tuned_config"] == row["search_config"] == best[p.key].config.to_dict()
        assert row["search_ms"] == best[p.key].median_ms and row["auto_takes_it"]
        assert row["tune_seconds"] > 0 and row["evaluated"] >= 1
        # the fake's kernels compute A @ B (its traps are wrong on purpose, never picked here)
        assert row["cublas_error"] < 1e-6 and row["untuned_error"] < 1e-6 and row["tuned_error"] < 1e-6
    assert [t[0] for t in gpu.timed] == ["held", "call", "loop"] * 6      # cuBLAS, untuned, tuned per row
    md = (tmp_path / "shape-classes.md").read_text()
    assert md.startswith("head\n") and md.count("\n| mid-size odd | 40x24x30 | float32 |") == 1
    for row in doc:                                                   # tuned call / search, from the two times
        assert f"| {row['search_ms']:.4f} | {0.625 / row['search_ms']:.2f} |" in md
    assert not list(tmp_path.glob("*.tmp"))                           # written whole


def test_rows_past_the_time_budget_are_skipped_and_a_failing_row_is_kept(sc, tmp_path, monkeypatch):
    be = FakeBackend(model=True)
    now = [0.0]
    plan = [("skinny", Problem(8, 64, 48)), ("skinny", Problem(8, 64, 50)), ("skinny", Problem(8, 64, 52))]

    def row(cls, p, **kw):
        now[0] += 50.0
        if p.K == 48:
            raise RuntimeError("out of memory")
        return {"class": cls, "shape": sc.shape_text(p), "dtype": p.dtype}
    monkeypatch.setattr(sc, "bench_row", row)
    with Store(tmp_path / "t.sqlite") as store:
        rows = sc.run(plan, out=tmp_path, gpu=HostGpu(), backend=be, store=store, tune_seconds=30,
                      max_seconds=120, seed=0, head="h", log=lambda m, echo=True: None, clock=lambda: now[0])
    assert "failed" in rows[0] and "out of memory" in rows[0]["failed"]
    assert "failed" not in rows[1] and "skipped" not in rows[1]
    assert rows[2]["skipped"] == "20 s left of --max-seconds 120"
    doc = json.loads((tmp_path / "shape-classes.json").read_text())["rows"]
    assert [r.get("skipped") is not None for r in doc] == [False, False, True]
    assert "| skinny | 8x64x52 | float32 | skipped: 20 s left" in (tmp_path / "shape-classes.md").read_text()


def test_large_rows_are_timed_untuned_only(sc, tmp_path):
    be = FakeBackend(model=True)
    gpu = HostGpu()
    with Store(tmp_path / "t.sqlite") as store:
        (row,) = sc.run([("large", Problem(48, 40, 32))], out=tmp_path, gpu=gpu, backend=be, store=store,
                        tune_seconds=30, max_seconds=20, seed=0, head="h", log=lambda m, echo=True: None)
        assert store.best("fake", be.device().key, Problem(48, 40, 32), be.template_hash()) is None   # no tune
    assert row["untuned_ms"] == 0.5 and row["untuned_call_ms"] == 0.625 and row["tuned_ms"] is None
    assert row["tune_seconds"] == 0 and [t[0] for t in gpu.timed] == ["held", "call", "loop"] * 2


def test_the_host_table_rows(sc, tmp_path):
    """Every operand kind x config source x out x mode, ours beside the baselines;
    'auto' reads a store holding the size's verified default, through a path, a
    Store object and the default store (SHADERTUNE_DB, restored after)."""
    import os
    be = FakeBackend(model=True)
    gpu = HostGpu()
    env = os.environ.get("SHADERTUNE_DB")
    rows = sc.host_table(gpu, be, [Problem(16, 12, 8)], store_path=tmp_path / "h.sqlite", seed=0,
                         log=lambda m, echo=True: None, name=be)
    assert os.environ.get("SHADERTUNE_DB") == env
    assert len(rows) == len(sc.DB_KINDS) * 2 * 2
    assert {(r["db"], r["out"], r["mode"]) for r in rows} == {(d, o, m) for d in sc.DB_KINDS for o in (False, True)
                                                              for m in ("repeated", "single")}
    for r in rows:
        assert r["operands"] == "numpy" and r["size"] == "16x12x8" and "error" not in r
        assert r["ours_us"] == (1.0 if r["mode"] == "repeated" else 3.0)
        assert (r["torch_us"], r["cupy_us"]) == ((2.0, 3.0) if r["mode"] == "repeated" else (4.0, 5.0))
    with Store(tmp_path / "h.sqlite") as s:
        assert s.best("fake", be.device().key, Problem(16, 12, 8), be.template_hash()) is not None
    md = sc.markdown([], "h", rows)
    assert "| numpy | store | 16x12x8 | out= | single | 3.0 | 4.0 | 5.0 | **0.75** |" in md


def test_bad_arguments_stop_before_anything_runs(sc, tmp_path, capsys):
    for argv, msg in [(["--shapes", "700x900"], "--shapes: a shape is MxNxK"),
                      (["--shapes", "700x900x1100:float16"], "dtype must be float32 or float64"),
                      (["--classes", "huge"], "--classes: unknown 'huge'"),
                      (["--host-sizes", "64,12x3"], "--host-sizes: a shape is MxNxK"),
                      (["--seconds", "0"], "must be > 0"), (["--tune-seconds", "0"], "must be > 0")]:
        with pytest.raises(SystemExit) as e:
            sc.main(["--out", str(tmp_path / "o")] + argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
