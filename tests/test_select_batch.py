"""config='auto' for batched problems: stored, found exactly and ranked by
nearness with their batch count."""
import pytest
from fake_backend import FakeBackend

from shadertune.selection import chain as select
from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.core.result import Result


def put(path, be, problem, cfg, ms):
    with Store(path) as s:
        s.put(Result("fake", be.device().key, problem, cfg, "ok", times_ms=[ms], error=1e-7),
              be.template_hash())


def some_configs(be, p, n):
    return [c for _, c in zip(range(n), be.space(p))]


def test_batched_problems_are_stored_found_and_near(tmp_path):
    be, path = FakeBackend(), tmp_path / "t.sqlite"
    one, b64 = Problem(8, 8, 64), Problem(8, 8, 64, batch=64)
    c1, c2, c3 = some_configs(be, one, 3)
    put(path, be, one, c1, 1.0)
    put(path, be, b64, c2, 1.0)
    with Store(path) as s:
        assert s.tuned_problems("fake", be.device().key, be.template_hash()) == [one, b64]
        assert s.best("fake", be.device().key, b64, be.template_hash()).config == c2
    assert select.select_config(be, b64, path) == (c2, "exact")
    assert select.select_config(be, one, path) == (c1, "exact")
    assert select.select_config(be, Problem(8, 8, 64, batch=32), path) == (c2, "nearest")
    assert select.select_config(be, Problem(8, 8, 64, batch=2), path) == (c1, "nearest")
    assert select.shape_distance(b64, Problem(8, 8, 64, batch=16)) == pytest.approx(2.0)


def test_batch_of_key():
    for p in (Problem(3, 4, 5), Problem(3, 4, 5, "float64", True, False, batch=12)):
        assert Problem.batch_of_key(p.key) == p.batch


def test_the_search_cli_takes_a_batch():
    from shadertune.cli.search import build_parser, problems_from
    parser = build_parser()
    args = parser.parse_args(["--sizes", "64x512x256x128,8x8x8,8", "--dtype", "float64"])
    assert problems_from(args, parser) == [Problem(512, 256, 128, "float64", batch=64),
                                           Problem(8, 8, 8, "float64")]


def test_a_backend_without_batches_refuses_to_tune_one(tmp_path):
    from shadertune.search import Budget, tune
    with pytest.raises(ValueError, match="fake backend tunes single products, not a batch of 4"):
        tune(FakeBackend(), Problem(8, 8, 8, batch=4), budget=Budget(max_evals=2))
