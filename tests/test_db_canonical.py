"""One row per kernel: the store keeps configs in their backend's canonical form.

A GL config written without `lang` (a compute candidate before the knob was added to
it, a store from before the assembly languages) and the same config naming lang=glsl
are one kernel.  A store written before (schema version 3) holding both spellings is
migrated: one row per kernel, the newest measurement kept in `results`, every other
row kept whole in `superseded_results`.  Real SQLite files throughout."""
import json
import sqlite3

from shadertune.core.config import Config
from shadertune.db import SCHEMA_VERSION, Store
from shadertune.db.check import check_store
from shadertune.db.exchange import export, merge
from shadertune.core.problem import Problem
from shadertune.core.result import Result

P = Problem(64, 64, 64)
DEV = "llvmpipe (LLVM 15.0.7, 256 bits) | 4.5 (Core Profile) Mesa 23.2.1"
TH = "th-gl"
COMPUTE = {"family": "compute", "out": "buffer", "fetch": "texelFetch", "mc": "1x4", "mrt_h": 1,
           "mrt_w": 1, "block_h": 0, "block_w": 0, "glsl": "450", "lang": "glsl", "unroll": "full",
           "np": 64, "a_src": "ssbo", "b_src": "ssbo", "bm": 64, "bn": 64, "bk": 16, "tm": 4, "tn": 4,
           "lanes_n": 8, "vec": 2, "pad": 4, "a_t": 1, "db": 0, "ks": 1, "shuffle": 0}
FRAGMENT = {"family": "fragment", "out": "mrt", "fetch": "texelFetch", "mc": "1x4", "mrt_h": 2,
            "mrt_w": 2, "block_h": 0, "block_w": 0, "glsl": "330", "lang": "glsl", "unroll": 4,
            "np": 64, "a_src": "texture", "b_src": "texture", "bm": 0, "bn": 0, "bk": 0, "tm": 0,
            "tn": 0, "lanes_n": 0, "vec": 0, "pad": 0, "a_t": 0, "db": 0, "ks": 1, "shuffle": 0}
# Jiang's knobs alone: a fragment config as the first stores wrote it
JIANG = {k: FRAGMENT[k] for k in ("glsl", "fetch", "unroll", "np", "mc", "mrt_h", "mrt_w")}


def without(cfg, *knobs):
    return {k: v for k, v in cfg.items() if k not in knobs}


def result(cfg, ms, at, **kw):
    return Result("gl", DEV, P, Config(cfg), "ok", times_ms=[ms, ms], error=1e-7, timestamp=at, **kw)


def v3_store(path, rows):
    """A store as schema version 3 wrote it (rows: Results, each stored as given)."""
    with Store(path):
        pass
    c = sqlite3.connect(str(path))
    c.execute("DROP TABLE superseded_results")
    for i, r in enumerate(rows):
        row = Store.row_of(r, TH, 1000.0 + i, 0.5, 0)
        row.update(config=r.config.key, result=json.dumps(r.to_dict()), schema=3)   # as written then
        cols = ", ".join(row)
        c.execute(f"INSERT INTO results ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    c.execute("PRAGMA user_version = 3")
    c.commit()
    c.close()


def test_a_store_with_both_spellings_of_one_kernel_is_migrated_to_one_row_each(tmp_path):
    path = tmp_path / "v3.sqlite"
    old_compute = result(without(COMPUTE, "lang"), 2.0, at=100.0)      # the candidate without lang
    new_compute = result(COMPUTE, 1.5, at=200.0)                       # local search's spelling
    jiang = result(JIANG, 3.0, at=300.0)                               # newer than the whole one
    whole = result(FRAGMENT, 4.0, at=150.0)
    alone = result(without(dict(COMPUTE, bm=32), "lang"), 5.0, at=50.0)   # one spelling: rewritten
    v3_store(path, [old_compute, new_compute, jiang, whole, alone])
    with Store(path) as s:
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        rows = list(s.rows())
        assert sorted(json.loads(r["config"])["bm"] for r in rows) == [0, 32, 64]
        assert all(set(json.loads(r["config"])) == set(COMPUTE) for r in rows)    # every knob
        got = {json.loads(r["config"])["bm"]: Result.from_dict(json.loads(r["result"])) for r in rows}
        assert got[64].median_ms == 1.5 and got[64].config == Config(COMPUTE)   # the newer stays
        assert got[0].median_ms == 3.0 and got[0].config == Config(FRAGMENT)
        assert got[32].median_ms == 5.0
        # every measurement kept: the rows merged away, whole, with the key they went to
        gone = s.conn.execute("SELECT config, median_ms, superseded_by FROM superseded_results "
                              "ORDER BY median_ms").fetchall()
        assert [(json.loads(c), ms, json.loads(by)) for c, ms, by in gone] == [
            (without(COMPUTE, "lang"), 2.0, COMPUTE), (FRAGMENT, 4.0, FRAGMENT)]
        # lookups in either spelling find the one row; the best is the canonical config
        assert s.get("gl", DEV, P, Config(without(COMPUTE, "lang")), TH).median_ms == 1.5
        assert s.get("gl", DEV, P, Config(JIANG), TH).median_ms == 3.0
        assert s.best("gl", DEV, P, TH).config == Config(COMPUTE)
    assert check_store(path).findings == []


def test_writes_and_imports_keep_one_row_per_kernel(tmp_path):
    with Store(tmp_path / "t.sqlite") as s:
        s.put(result(without(COMPUTE, "lang"), 2.0, at=100.0), TH)
        s.put(result(COMPUTE, 1.5, at=200.0), TH)
        s.put(result(JIANG, 3.0, at=300.0), TH)
        assert s.count() == 2
        (row,) = s.rows("median_ms = 1.5")
        assert json.loads(row["config"]) == COMPUTE
        assert Result.from_dict(json.loads(row["result"])).config == Config(COMPUTE)
        # an export holding the other spelling of a stored kernel merges into its row
        with open(tmp_path / "e.jsonl", "w") as f:
            export(s, f)
    with open(tmp_path / "e.jsonl") as f:
        lines = [json.loads(x) for x in f]
    older = dict(lines[0], config=without(COMPUTE, "lang"))
    older["result"] = dict(older["result"], config=without(COMPUTE, "lang"), timestamp=50.0,
                           times_ms=[9.0])
    (tmp_path / "old.jsonl").write_text(json.dumps(older) + "\n")
    with Store(tmp_path / "t.sqlite") as s:
        counts = merge(s, [tmp_path / "old.jsonl"])
        assert counts == {"added": 0, "replaced": 0, "kept": 1} and s.count() == 2
        assert s.get("gl", DEV, P, Config(COMPUTE), TH).median_ms == 1.5     # the newer stays
