"""Arguments checked before anything starts, and a time limit that still measures.

- a bad --fix is a bad argument: one line, exit 2, before the store is opened (no
  store file made), checked against the space's domains on the device;
- tune() refuses an infinite time and fails on a backend or device that cannot run
  before it makes a store file;
- a time limit however short lets a search's first evaluation through: the search
  ends with a measurement, and "nothing was measured" is said apart from "no config
  passed verification"."""
import math

import pytest

import shadertune
from shadertune.core.config import Config
from shadertune.errors import ContextError
from shadertune.core.result import OK, Result
from shadertune.search import Budget, BudgetExhausted, Tracker
from shadertune.cli.search import failure, main
from shadertune.core.problem import Problem

P = Problem(4, 4, 4)


def search(tmp_path, *args) -> int:
    """The search CLI's exit status (argparse's errors exit through SystemExit)."""
    try:
        (tmp_path / "s").mkdir(exist_ok=True)
        return main(["--backend", "gl", "--size", "4", "--db", str(tmp_path / "s" / "t.sqlite"), "-q",
                     "--repeats", "1", "--warmup", "0", *args])
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("fix, reason", [
    (["mc=9x9"], "argument --fix: mc: 9x9 is not in its domain 1x1, 1x2, 1x3, 1x4, 2x2 here"),
    (["foo=1"], "argument --fix: names unknown knob 'foo'; the knobs are family, out,"),
    (["np=4096"], "argument --fix: np: 4096 is not in its domain 2, 4 here"),
    (["unroll=4,7"], "argument --fix: unroll: 7 is not in its domain"),
    (["family=compute", "mc=2x2"], "argument --fix: no family is left: family=fragment is not asked "
                                   "for; family=compute holds mc=1x4"),
    (["family=compute", "family=fragment"], "--fix family: family=compute and family=fragment leave no value"),
    (["np=2", "mc=1x4", "family=fragment"], "leaves no valid config for 4x4x4"),
    (["mc"], "argument --fix: takes KNOB=VALUE[,VALUE...], got 'mc'"),
])
def test_a_bad_fix_is_refused_before_the_store_is_opened(gl, tmp_path, capsys, fix, reason):
    code = search(tmp_path, "--budget", "2", *[a for f in fix for a in ("--fix", f)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("shadertune.search: error: ") and reason in err and err.count("\n") == 1
    assert list((tmp_path / "s").iterdir()) == []                 # no store, no file beside it


def test_tune_refuses_an_infinite_time_before_anything(tmp_path):
    with pytest.raises(ValueError, match=r"^tune: seconds must be a positive finite number, got inf$"):
        shadertune.tune(8, seconds=math.inf, db=tmp_path / "t.sqlite")
    assert not (tmp_path / "t.sqlite").exists()


def test_tune_on_a_device_that_is_not_there_makes_no_store(gl, tmp_path):
    with pytest.raises(ContextError, match="device_index=7"):
        shadertune.tune(8, evaluations=1, device_index=7, db=tmp_path / "t.sqlite")
    assert not (tmp_path / "t.sqlite").exists()


def test_tune_on_cuda_without_cupy_makes_no_store(tmp_path):
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed")
    except ImportError:
        pass
    with pytest.raises(ContextError, match="CuPy"):
        shadertune.tune(8, evaluations=1, backend="cuda", db=tmp_path / "t.sqlite")
    assert not (tmp_path / "t.sqlite").exists()


@pytest.mark.parametrize("limit", ["0.001", "1e-300"])
@pytest.mark.parametrize("strategy", ["phased", "model", "random", "exhaustive"])
def test_a_tiny_time_limit_still_measures_the_first_config(gl, tmp_path, capsys, strategy, limit):
    assert search(tmp_path, "--strategy", strategy, "--time-limit", limit) == 0
    out = capsys.readouterr().out
    assert "| 4x4x4 float32 |" in out and "| 1 (1/0) " in out


def test_the_time_limit_lets_the_first_evaluation_through():
    now = [0.0]
    calls = []

    def evaluate(cfg):
        calls.append(cfg)
        now[0] += 5.0                    # every evaluation outlasts the limit
        return Result("t", "d", P, cfg, OK, times_ms=[1.0])
    run = Tracker(evaluate, Budget(seconds=1e-300), clock=lambda: now[0])
    now[0] = 1.0                         # the limit is spent before anything was asked
    with pytest.raises(BudgetExhausted):
        run.many([Config(np=2), Config(np=4)])
    assert calls == [Config(np=2)]
    with pytest.raises(BudgetExhausted):
        run(Config(np=6))
    run = Tracker(evaluate, Budget(seconds=0.0), clock=lambda: now[0])
    assert run(Config(np=8)).ok and calls[-1] == Config(np=8)     # one call alone too
    with pytest.raises(BudgetExhausted):
        run.many([Config(np=10)])
    run = Tracker(evaluate, Budget(max_evals=0, seconds=0.0), clock=lambda: now[0])
    with pytest.raises(BudgetExhausted):                          # a count the caller gave stands
        run(Config(np=12))


def test_nothing_measured_is_said_apart_from_nothing_verified():
    def entry(evaluated, best, size=10):
        return {"M": 4, "N": 4, "K": 4, "evaluated": evaluated, "best": best, "space_size": size}
    assert failure([entry(3, {"gflops": 1.0})]) is None
    assert failure([entry(0, None)]) == "nothing was measured within the time limit for 4x4x4 float32"
    assert failure([entry(2, None)]) == ("no config passed verification for 4x4x4 float32 (see the statuses "
                                         "in the store or --report)")
    assert failure([entry(0, None, size=0)]) == "the space of 4x4x4 float32 has no valid config"
