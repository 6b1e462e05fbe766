"""The evaluator times clearly slower configs once: slow corners must not eat a search."""
import time

from fake_backend import FakeBackend

from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import OK
from shadertune.search import Evaluator


class SlowRunBackend(FakeBackend):
    """FakeBackend whose kernels take np milliseconds per checked run."""

    def build(self, problem, config):
        k = super().build(problem, config)
        run = k.run

        def slow_run(A, B, C=None, **kw):
            time.sleep(config["np"] / 1000.0)
            return run(A, B, C, **kw)
        k.run = slow_run
        time_ = k.time

        def timed(repeats=10, warmup=2):
            self.asked.append((config["np"], repeats, warmup))
            return time_(repeats, warmup)
        k.time = timed
        return k


def cfg(np_):
    return Config(glsl="330", fetch="texelFetch", unroll=1, np=np_, mc="1x1", mrt_h=1, mrt_w=1)


def test_configs_far_slower_than_the_best_so_far_are_timed_once():
    be = SlowRunBackend()
    be.asked = []
    ev = Evaluator(be, Problem(8, 8, 256), repeats=5, warmup=2, slow_floor_ms=20.0)
    fast = ev(cfg(20))               # 20 ms: the first correct config sets the pace
    close = ev(cfg(26))              # 26 ms: well within 3x, fully timed
    slow = ev(cfg(150))              # 150 ms: over 3x the best checked run, timed once
    assert all(r.status == OK for r in (fast, close, slow))
    assert be.asked == [(20, 5, 2), (26, 5, 2), (150, 1, 0)]
    assert len(slow.times_ms) == 1 and len(close.times_ms) == 5


def test_below_the_noise_floor_every_config_is_fully_timed():
    be = SlowRunBackend()
    be.asked = []
    ev = Evaluator(be, Problem(8, 8, 256), repeats=5, warmup=2, slow_floor_ms=20.0)
    ev(cfg(2))
    ev(cfg(10))                      # 5x the best, but 10 ms is under the floor: timing noise
    assert be.asked == [(2, 5, 2), (10, 5, 2)]


def test_absolute_slow_threshold_still_applies():
    be = SlowRunBackend()
    be.asked = []
    ev = Evaluator(be, Problem(8, 8, 256), repeats=5, warmup=2, slow_ms=10.0)
    ev(cfg(20))                      # the very first config, 20 ms > slow_ms
    assert be.asked == [(20, 1, 0)]
