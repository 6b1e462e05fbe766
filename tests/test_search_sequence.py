"""What a search evaluates, config by config, stays what it was: the strategies' CPU
was cut (the model strategy ranks its space when a restart first needs it, the
space enumerates faster) without changing a step.  Each case runs a strategy over
a deterministic fake timing (the backend's own cost model times a CRC jitter, one
config in 16 failing) and compares the configs evaluated, in order, with those
recorded in tests/fixtures/search_sequences.json by the tree before the change.

Regenerate the record (only where a change is meant to change the searches):
    PYTHONPATH=. python tests/test_search_sequence.py --write
"""
import json
import pathlib
import sys
import zlib

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from fake_backend import FakeBackend  # noqa: E402

from shadertune.backends.cuda import CUDABackend  # noqa: E402
from shadertune.core import atomic  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.core.result import OK, RUN_FAILED, Result  # noqa: E402
from shadertune.search import Budget, SearchOptions, get_strategy  # noqa: E402
from shadertune.search.contract import FunctionEvaluator  # noqa: E402

RECORD = pathlib.Path(__file__).parent / "fixtures" / "search_sequences.json"

# The CUDA space of a wide, shallow product narrowed to ~24,000 configs (an
# enumeration of a fifth of a second) that hold 6 of the backend's candidates:
# those fill the model strategy's first batch, so its ranking waits for a restart.
CUDA_PROBLEM = Problem(4096, 4096, 64)
CUDA_NARROW = {"MMA": (0, 4), "KL": (1, 2), "PS": (0, 1), "VEC": (4, 1), "ST": (3, 2, 0)}
GL_PROBLEM = Problem(8, 8, 64)

CASES = {
    "cuda-model": ("cuda", "model", 90),
    "cuda-phased": ("cuda", "phased", 90),
    "fake-model": ("fake", "model", 60),
    "fake-phased": ("fake", "phased", 400),
}


def _cuda():
    be = CUDABackend()
    full = be.space(CUDA_PROBLEM)
    space = full.narrowed(CUDA_NARROW)
    space.phases = full.phases
    seeds = [c for c in be.candidates(CUDA_PROBLEM, 24) if c in space]
    return be, CUDA_PROBLEM, space, SearchOptions(seeds=seeds, top=len(seeds), cost_model=(
        lambda cfgs: be.predict_ms(CUDA_PROBLEM, cfgs)))


def _fake():
    be = FakeBackend(model=True)
    return be, GL_PROBLEM, be.space(GL_PROBLEM), SearchOptions(
        seeds=be.candidates(GL_PROBLEM), cost_model=lambda cfgs: be.predict_ms(GL_PROBLEM, cfgs))


def run_case(name: str) -> tuple[list[str], list[str]]:
    """(the evaluated configs' keys in order, the phase labels)."""
    which, strategy, evals = CASES[name]
    be, problem, space, options = _cuda() if which == "cuda" else _fake()
    order, phases = [], []

    def evaluate(cfg):
        h = zlib.crc32(cfg.key.encode())
        order.append(cfg.key)
        if h % 16 == 0:
            return Result(which, "fake", problem, cfg, RUN_FAILED, message="fake failure")
        ms = be.predict_ms(problem, [cfg])[0] * (0.7 + 0.6 * (h % 1000) / 1000)
        return Result(which, "fake", problem, cfg, OK, times_ms=[ms])

    class Evaluator(FunctionEvaluator):
        def phase(self, label):
            phases.append(label)
    get_strategy(strategy)(space, Evaluator(evaluate), Budget(max_evals=evals), options)
    return order, phases


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_search_evaluates_what_it_did_before(name):
    order, phases = run_case(name)
    assert any(p.startswith("restart") for p in phases)       # the restarts' sources were read
    assert order == json.loads(RECORD.read_text())[name]


def test_the_strategy_cpu_profile_runs(tmp_path, monkeypatch, capsys):
    """tools/profile_strategy_cpu.py (notes/cluster.md's measurement) at a small budget:
    it reports each strategy's CPU per evaluation and writes the configs it evaluated."""
    import runpy
    tool = pathlib.Path(__file__).resolve().parents[1] / "tools" / "profile_strategy_cpu.py"
    trace = tmp_path / "trace.txt"
    monkeypatch.setattr(sys, "argv", [str(tool), "--sizes", "4096x4096x64", "--budget", "6",
                                      "--trace", str(trace)])
    runpy.run_path(str(tool), run_name="__main__")
    out = capsys.readouterr().out
    assert "strategy model: 6 evaluations" in out and "strategy phased: 6 evaluations" in out
    assert "ms per evaluation" in out and "why_invalid" in out
    assert len(trace.read_text().splitlines()) == 12


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    atomic.write_json(RECORD, {name: run_case(name)[0] for name in sorted(CASES)}, indent=0)
