"""scripts/model-quality on the fake backend: training on an earlier template's results
(--template-hash, relabelled in a scratch store), offline scores, and replay (what
auto takes today for the problems of an earlier heldout run's eval store)."""
import json
import pathlib

import pytest
from md_table import table_lines
from script_module import load_script
from fake_backend import FakeBackend
from perfmodel_synthetic import DEVICE, TEMPLATES, TRAIN, fill, put

from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.perfmodel import saved
from shadertune.core.problem import Problem
from shadertune.core.result import Result

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "model-quality"
OLD = "fake-templates-0"          # an earlier template's hash


@pytest.fixture(scope="module")
def mq():
    return load_script("model-quality")


@pytest.fixture
def old_store(tmp_path):
    """TRAIN's synthetic results stored under an earlier template hash, and one
    result of today's templates for another device (never copied)."""
    path = tmp_path / "old.sqlite"
    with Store(path) as s:
        fill(s, TRAIN, per_problem=25)
        s.conn.execute("UPDATE results SET template_hash = ?", [OLD])
        cfg = FakeBackend().space(TRAIN[0]).configs()[0]
        s.put(Result("fake", "other gpu | 2.0", TRAIN[0], cfg, "ok", times_ms=[1.0], error=1e-7), TEMPLATES)
    saved.forget()
    return path


def test_relabelled_store_copies_one_group_as_todays(mq, old_store, tmp_path):
    dst = tmp_path / "new.sqlite"
    n = mq.relabelled_store(old_store, dst, "fake", OLD, TEMPLATES, DEVICE, "fake renderer | 2.0")
    assert n == 25 * len(TRAIN)
    with Store(dst) as s:
        rows = list(s.rows())
        assert len(rows) == n and {r["template_hash"] for r in rows} == {TEMPLATES}
        assert {r["device"] for r in rows} == {"fake renderer | 2.0"}
        assert {json.loads(r["result"])["device"] for r in rows} == {"fake renderer | 2.0"}
        assert len(s.tuned_problems("fake", "fake renderer | 2.0", TEMPLATES)) == len(TRAIN)
    with Store(old_store) as s:           # the source is left as it was
        assert s.count_rows("template_hash = ?", [OLD]) == n


def _heldout(mq, train, out, *more):
    return mq.main(["heldout", "--backend", "fake_backend:FakeBackend", "--train-db", str(train),
                    "--out", str(out), "--heldout", "150x20x40,30x90x24:TN", "--tune-budget", "6",
                    "--tune-time", "20", "--repeats", "1", "--rounds", "1",
                    "--json", str(out / "q.json"), *more])


@pytest.mark.slow
def test_heldout_trains_on_an_earlier_templates_results_only_when_asked(mq, old_store, tmp_path, capsys):
    assert _heldout(mq, old_store, tmp_path / "a") == 1            # today's templates: nothing stored
    assert "no learned model" in capsys.readouterr().err
    assert _heldout(mq, old_store, tmp_path / "b", "--template-hash", OLD) == 0
    doc = json.loads((tmp_path / "b" / "q.json").read_text())
    assert doc["training_relabelled"]["results"] == 25 * len(TRAIN)
    assert doc["training_relabelled"]["template_hash"] == OLD and doc["training_relabelled"]["as"] == TEMPLATES
    assert [r["problem"] for r in doc["rows"]] == ["150x20x40:float32:NN", "30x90x24:float32:TN"]
    assert all(r["auto_how"] == "model" and r["auto_reason"] for r in doc["rows"])
    assert (tmp_path / "b" / "train-relabelled.sqlite").exists()
    assert "auto's rule per shape" in (tmp_path / "b" / "model-quality.md").read_text()
    assert "relabelled as today's templates" in capsys.readouterr().out
    # another GPU's results are refused; --train-device alone is refused
    assert _heldout(mq, old_store, tmp_path / "c", "--template-hash", OLD,
                    "--train-device", "other gpu | 2.0") == 2
    assert "is not this GPU" in capsys.readouterr().err
    assert _heldout(mq, old_store, tmp_path / "d", "--train-device", DEVICE) == 2
    # a template hash the store does not hold: what it holds is listed
    assert _heldout(mq, old_store, tmp_path / "e", "--template-hash", "nothing") == 1
    err = capsys.readouterr().err
    assert "has no fake results of templates nothing" in err and f"templates {OLD}: " in err


def test_offline_scores_the_group_asked_for(mq, old_store, tmp_path, capsys):
    out = tmp_path / "o.json"
    assert mq.main(["offline", str(old_store), "--backend", "fake", "--template-hash", OLD,
                    "--learners", "extratrees", "--targets", "log_gflops,log_ms", "--seeds", "2",
                    "--folds", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"(templates {OLD}): {25 * len(TRAIN)} verified results of {len(TRAIN)} problems" in text
    rows = json.loads(out.read_text())
    assert sorted((r["target"], r["seed"]) for r in rows) == [("log_gflops", 0), ("log_gflops", 1),
                                                              ("log_ms", 0), ("log_ms", 1)]
    assert ["extratrees", "log_ms", "mean"] in [r[:3] for r in table_lines(text)]
    assert mq.main(["offline", str(old_store), "--template-hash", "nothing"]) == 1


def test_replay_reports_where_the_pick_was_measured(mq, old_store, tmp_path, capsys):
    be = FakeBackend()
    ev = tmp_path / "eval.sqlite"
    p, q = Problem(150, 20, 40), Problem(30, 90, 24)
    with Store(ev) as s:
        for prob in (p, q):          # 30 configs each, measured under the old templates
            for c in be.space(prob).configs()[::400][:30]:
                put(s, prob, c)
        s.conn.execute("UPDATE results SET template_hash = ?", [OLD])
    out = tmp_path / "r"
    assert mq.main(["replay", "--backend", "fake_backend:FakeBackend", "--train-db", str(old_store),
                    "--eval-db", str(ev), "--out", str(out)]) == 0
    doc = json.loads((out / "replay.json").read_text())
    assert doc["template_hash"] == OLD and doc["device"] == DEVICE
    (target, res), = doc["targets"].items()
    assert target == "log_gflops" and len(res["rows"]) == 2
    with Store(ev) as s:
        for r in res["rows"]:
            prob = Problem(150, 20, 40) if r["problem"].startswith("150") else Problem(30, 90, 24)
            measured = {c: x.gflops for x in s.ranked("fake", DEVICE, prob, OLD) for c in [x.config]}
            best = max(measured.values())
            for k, cfg in r["picks"].items():
                c = Config(cfg)
                want = measured[c] / best if c in measured else None
                assert r["share"].get(k) == (pytest.approx(want) if want is not None else None)
            assert r["best_measured_gflops"] == pytest.approx(best)
            assert r["candidates"]["union"] >= r["candidates"]["verified"]
    text = (out / "replay.md").read_text()
    assert "| problem | auto (how) |" in text
    unmeasured = any(r["share"].get(k) is None for r in res["rows"] for k in r["picks"])
    assert ("not measured" in text) == unmeasured
    assert not (old_store.parent / "old.sqlite.models").exists()     # trained beside a copy


@pytest.mark.slow
def test_same_kernels_compares_the_rendered_cuda_sources(mq, tmp_path, capsys):
    """Results of an H200 run (run V) under the templates of a copy of today's tree:
    identical kernels pass; a template edited in the copy (stored under the copy's
    new hash) renders other kernels and fails."""
    import shutil
    import sqlite3

    from shadertune.backends.cuda import codegen
    from shadertune.perfmodel.data import results_from_candidates
    root = SCRIPT.parent.parent
    tree = tmp_path / "tree"
    for d in ("shadertune", "shaders"):
        shutil.copytree(root / d, tree / d, ignore=shutil.ignore_patterns("__pycache__"))
    db = tmp_path / "v.sqlite"
    run = json.loads((root / "benchmarks/h200-2026-11-23-s5/cuda-run-v/bench-cuda.json").read_text())
    with Store(db) as s:
        for r in results_from_candidates(run, "NVIDIA H200 | run V"):
            s.put(r, codegen.template_hash())
    args = ["same-kernels", str(db), "--tree", str(tree), "--template-hash"]
    assert mq.main(args + [codegen.template_hash()]) == 0
    out = capsys.readouterr().out
    assert "336 stored configs" in out and "336 render the same kernels" in out and "0 do not" in out
    sig = tree / "shaders/cuda/signature.cu"
    sig.write_text(sig.read_text() + "// edited\n")
    edited = mq.kernel_digests(tree, db, "none")["template_hash"]
    assert edited != codegen.template_hash()
    assert mq.main(args + [codegen.template_hash()]) == 1          # the copy's hash is another
    assert f"has templates {edited}" in capsys.readouterr().err
    with sqlite3.connect(db) as c:
        c.execute("UPDATE results SET template_hash = ?", [edited])
    assert mq.main(args + [edited]) == 1
    assert "0 render the same kernels" in capsys.readouterr().out


@pytest.mark.slow
def test_same_kernels_samples_every_family_byte_for_byte(mq, tmp_path, capsys):
    """--sample: configs of every kernel family drawn from the earlier tree's spaces
    (here a copy of today's), compared byte for byte; an edit of the reduce kernel
    in the copy shows in the reduce family only."""
    import shutil
    root = SCRIPT.parent.parent
    tree = tmp_path / "tree"
    for d in ("shadertune", "shaders"):
        shutil.copytree(root / d, tree / d, ignore=shutil.ignore_patterns("__pycache__"))
    args = ["same-kernels", "--sample", "2", "--exact", "--tree", str(tree),
            "--problems", "64x64x256:float32:TN:b1,64x64x64:float32:NN:b2,45x37x3001:float64:NT:b1"]
    assert mq.main(args) == 0
    out = capsys.readouterr().out
    assert "16 sampled configs (ffma 2, mma.sync 2, dmma 2, wgmma 2, wgmma pre-split + pack 2, " in out
    assert "16 render the same kernels" in out and "(byte-identical sources), 0 do not" in out
    red = tree / "shaders/cuda/splitk_reduce.cu"
    red.write_text(red.read_text().replace("C[e] = alpha * s", "C[e] = alpha * (s)"))
    assert mq.main(args) == 1
    differ = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  differs: ")]
    assert len(differ) >= 2                 # the reduce family's two, and any other that drew one
    assert all('"KR":0' in line and '"KG":1,' not in line for line in differ)
    assert mq.main(["same-kernels", "--tree", str(tree)]) == 2               # a store or --sample
