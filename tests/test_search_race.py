"""Racing: a kernel that times its checked run spends timing only on configs that can win."""
import numpy as np

from fake_backend import FakeBackend, FakeKernel

from shadertune.core.config import Config
from shadertune.db import Store
from shadertune.errors import TooSlow
from shadertune.core.problem import Problem
from shadertune.core.result import OK, SLOW
from shadertune.search import Evaluator

P = Problem(8, 8, 256)


class RacingKernel(FakeKernel):
    """Checked run and warm runs take np ms (cold: x cold_factor); time() logs its calls."""

    def checked_run(self, A, B, *, limit_ms=None, cache=None):
        ms = self.config["np"] * self.backend.cold_factor
        self.backend.limits.append(limit_ms)
        if limit_ms is not None and ms > limit_ms:
            raise TooSlow(f"abandoned after 1 of 8 passes: projected {ms} ms > limit {limit_ms} ms", ms)
        return self.run(A, B), ms

    def time(self, repeats=10, warmup=2):
        self.backend.asked.append((self.config["np"], repeats, warmup))
        jitter = self.backend.jitter
        return [self.config["np"] * (1 + jitter * ((len(self.backend.asked) + i) % 2)) for i in range(repeats)]


class RacingBackend(FakeBackend):
    def __init__(self, cold_factor=1.0, jitter=0.0):
        super().__init__()
        self.cold_factor, self.jitter = cold_factor, jitter
        self.asked, self.limits = [], []

    def build(self, problem, config):
        super().build(problem, config)
        return RacingKernel(self, problem, Config(config))


def cfg(np_):
    return Config(glsl="330", fetch="texelFetch", unroll=1, np=np_, mc="1x1", mrt_h=1, mrt_w=1)


def ev(be, **kw):
    return Evaluator(be, P, repeats=10, warmup=2, **kw)


def test_the_first_config_is_timed_warm_until_three_runs_agree():
    be = RacingBackend()
    r = ev(be)(cfg(100))
    assert r.status == OK and r.times_ms == [100.0] * 3 and r.message == ""
    assert be.asked == [(100, 1, 0)] * 3        # the checked run was the warm-up
    assert be.limits == [None]                  # nothing to race against yet


def test_noisy_contenders_get_up_to_repeats_runs():
    be = RacingBackend(jitter=0.05)
    r = ev(be)(cfg(100))
    assert len(r.times_ms) == 10


def test_a_config_over_race_factor_x_best_keeps_its_checked_run_as_its_time():
    be = RacingBackend()
    e = ev(be)
    e(cfg(100))
    be.asked.clear()
    r = e(cfg(120))                             # 1.2x the best: cannot win
    assert r.status == OK and r.times_ms == [120.0] and be.asked == []
    assert "timed once (its checked run)" in r.message and "1.1x" in r.message


def test_a_config_just_over_contend_factor_is_timed_warm_once():
    be = RacingBackend(cold_factor=1.0)
    e = ev(be)
    e(cfg(200))
    be.asked.clear()
    r = e(cfg(210))                             # within 1.1x, but a warm run says 1.05x
    assert r.times_ms == [210.0] and be.asked == [(210, 1, 0)] and "1.02x" in r.message
    r = e(cfg(202))                             # a contender: timed until three runs agree
    assert r.times_ms == [202.0] * 3


def test_a_run_projected_past_abandon_factor_x_best_is_slow_never_ok(tmp_path):
    be = RacingBackend()
    with Store(tmp_path / "s.sqlite") as s:
        e = ev(be, store=s)
        e(cfg(20))
        r = e(cfg(80))                          # 4x the best: abandoned part-way
        assert r.status == SLOW and not r.ok and r.times_ms == []
        assert "abandoned" in r.message and "1.5x the best so far" in r.message
        assert be.limits[-1] == 30.0
        again = ev(RacingBackend(), store=s)(cfg(80))   # a resumed search replays it
        assert again.status == SLOW and again.message == r.message


def test_below_the_noise_floor_configs_get_warmup_and_every_repeat():
    be = RacingBackend()
    e = ev(be, slow_floor_ms=20.0)
    e(cfg(4))
    e(cfg(12))                                  # 3x the best, but under the floor
    assert be.asked == [(4, 10, 2), (12, 10, 2)]
    assert be.limits == [None, 20.0]            # the abandon limit never drops under the floor


def test_the_best_replayed_from_a_store_sets_the_bar(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        ev(RacingBackend(), store=s)(cfg(100))
        be = RacingBackend()
        e = ev(be, store=s)
        e(cfg(100))                             # replayed
        r = e(cfg(150))
        assert r.times_ms == [150.0] and be.asked == []


class SoftwareBackend(RacingBackend):
    def device(self):
        d = super().device()
        d.limits["software_renderer"] = True
        return d


def test_no_racing_where_run_times_swing():
    be = SoftwareBackend()
    e = ev(be)
    assert e.race is False
    e(cfg(20))
    r = e(cfg(26))                              # 1.3x: raced it would keep one run
    assert len(r.times_ms) == 10 and be.limits == [None, None]
    r = e(cfg(80))                              # 4x: not abandoned, timed once by the 3x rule
    assert r.status == OK and len(r.times_ms) == 1 and be.asked[-1] == (80, 1, 0)
    assert "checked run was slow" in r.message
