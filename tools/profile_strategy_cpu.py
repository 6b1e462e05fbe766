"""CPU a search strategy spends per evaluation on the CUDA space, without a GPU.

    PYTHONPATH=TREE python tools/profile_strategy_cpu.py [--strategy model,phased]
        [--sizes 2048,2048x2048x2040,2040x2048x2048,2048x2040x2048] [--budget 32]
        [--profile] [--top 25] [--trace FILE]

Each problem is tuned as `python -m shadertune.search --backend cuda --sizes ...
--budget N` tunes it (tune(): the backend's space, its candidate list as seeds, its
predict_ms as the cost model), but the evaluations are replaced by a deterministic
cost: the backend's own predict_ms times a jitter of up to +-30% from a CRC of the
config's key (and one config in 16 failing), so only the strategy's CPU is
measured.  The CUDA space needs no GPU here (the sm_90 limits without CuPy).

Per strategy and problem it prints the setup (space and candidate list, made once
per problem and kept by the backend), the strategy's CPU in ms per evaluation
(process time of the search less the fake evaluations' own), and the space's
membership checks (why_invalid calls) and rule verdicts computed.  --profile adds
cProfile's top functions by cumulative time; --trace writes the evaluated configs,
in order, one JSON key a line (to compare two trees' searches).
"""
from __future__ import annotations

import argparse
import cProfile
import inspect
import pstats
import sys
import time
import zlib

from shadertune.backends.cuda import CUDABackend
from shadertune.backends.cuda import space as cuda_space
from shadertune.core import atomic
from shadertune.core.problem import Problem
from shadertune.core.result import OK, RUN_FAILED, Result
from shadertune.search.budget import Budget
from shadertune.search.contract import BaseEvaluator
from shadertune.search.options import SearchOptions
from shadertune.search.registry import get_strategy


class FakeTimed(BaseEvaluator):
    """predict_ms x a CRC jitter; one config in 16 fails (a search must pass over them)."""

    def __init__(self, backend, problem):
        self.backend, self.problem = backend, problem
        self.order: list = []
        self.cpu = 0.0              # its own process time, taken off the strategy's

    def __call__(self, config):
        t0 = time.process_time()
        h = zlib.crc32(config.key.encode())
        self.order.append(config)
        if h % 16 == 0:
            r = Result("cuda", "fake", self.problem, config, RUN_FAILED, message="fake failure")
        else:
            ms = self.backend.predict_ms(self.problem, [config])[0] * (0.7 + 0.6 * (h % 1000) / 1000)
            r = Result("cuda", "fake", self.problem, config, OK, times_ms=[ms])
        self.cpu += time.process_time() - t0
        return r


class Counts:
    """why_invalid calls on the CUDA space, and the rules' calls (verdicts computed)."""

    def __init__(self):
        self.checks = 0
        self.rule_calls = 0


def _counting(counts: Counts):
    """Patch the CUDA space's membership check and rules to count their calls."""
    orig_why = cuda_space.CUDASpace.why_invalid
    orig_rules = cuda_space._restrictions

    def why_invalid(self, cfg):
        counts.checks += 1
        return orig_why(self, cfg)

    def restrictions(problem, limits):
        def counted(fn):
            def rule(*a):
                counts.rule_calls += 1
                return fn(*a)
            rule.__signature__ = inspect.signature(fn)
            rule.__doc__, rule.__name__ = fn.__doc__, fn.__name__
            return rule
        return [counted(fn) for fn in orig_rules(problem, limits)]
    cuda_space.CUDASpace.why_invalid = why_invalid
    cuda_space._restrictions = restrictions
    return lambda: (setattr(cuda_space.CUDASpace, "why_invalid", orig_why),
                    setattr(cuda_space, "_restrictions", orig_rules))


def run_one(strategy: str, problem: Problem, budget: int, counts: Counts, profiler=None) -> dict:
    backend = CUDABackend()
    t0 = time.process_time()
    space = backend.space(problem)
    seeds = backend.candidates(problem, SearchOptions.top)
    setup = time.process_time() - t0
    ev = FakeTimed(backend, problem)
    options = SearchOptions(seed=0, cost_model=lambda cfgs: backend.predict_ms(problem, cfgs), seeds=seeds)
    c0, r0 = counts.checks, counts.rule_calls
    t0 = time.process_time()
    if profiler is not None:
        profiler.enable()
    results = get_strategy(strategy)(space, ev, Budget(max_evals=budget), options)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - t0 - ev.cpu
    n = len(results)
    return {"problem": problem.label, "evals": n, "setup_s": setup, "cpu_s": cpu,
            "ms_per_eval": 1e3 * cpu / max(n, 1), "checks": counts.checks - c0,
            "rule_calls": counts.rule_calls - r0, "order": [c.key for c in ev.order]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strategy", default="model,phased")
    ap.add_argument("--sizes", default="2048,2048x2048x2040,2040x2048x2048,2048x2040x2048")
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--profile", action="store_true", help="cProfile's top functions too")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--trace", help="write the evaluated configs' keys, in order, to this file")
    a = ap.parse_args(argv)
    problems = [Problem.parse(s) for s in a.sizes.split(",")]
    counts = Counts()
    restore = _counting(counts)
    trace = []
    try:
        for strategy in a.strategy.split(","):
            prof = cProfile.Profile() if a.profile else None
            rows = [run_one(strategy, p, a.budget, counts, prof) for p in problems]
            evals = sum(r["evals"] for r in rows)
            cpu = sum(r["cpu_s"] for r in rows)
            print(f"strategy {strategy}: {evals} evaluations, strategy CPU {cpu:.2f} s = "
                  f"{1e3 * cpu / max(evals, 1):.1f} ms per evaluation")
            for r in rows:
                print(f"  {r['problem']:<20} {r['evals']:>4} evals  setup {r['setup_s']:6.2f} s  "
                      f"strategy {r['cpu_s']:6.2f} s  {r['ms_per_eval']:7.1f} ms/eval  "
                      f"why_invalid {r['checks']:>8}  rule calls {r['rule_calls']:>8}")
                trace += [f"{strategy} {r['problem']} {k}" for k in r["order"]]
            if prof is not None:
                pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(a.top)
    finally:
        restore()
    if a.trace:
        atomic.write_text(a.trace, "\n".join(trace) + "\n")


if __name__ == "__main__":
    main()
