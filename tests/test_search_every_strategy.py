"""Every strategy x every --fix on the GL union space: each runs to completion.

Two halves.  On llvmpipe, through the search CLI: the default search and every
strategy x --fix combination end with a verified best config at a tiny size
(evaluation budgets: deterministic and short), and a search that reaches local
search does so and resumes over its store.  On the real GL space of this device with
the backend's analytical cost model as the timings (backend.predict_ms; no kernel
runs): every strategy x --fix runs until its own convergence rule ends it, local
search included, which a handful of real evaluations cannot reach.
"""
import json

import pytest

from shadertune.core.config import Config
from shadertune.core.problem import Problem
from shadertune.core.result import OK, Result
from shadertune.search import Budget, SearchOptions, get_strategy
from shadertune.cli.search import main
from shadertune.search.contract import BaseEvaluator
from shadertune.search.restrict import narrow, parse_fix
from shadertune.search.report_json import check_report

STRATEGIES = ("phased", "model", "random", "exhaustive")
# none, each family, both, and a knob value only the fragment family has
FIXES = ((), ("family=compute",), ("family=fragment",), ("family=compute,fragment",), ("mc=2x2",))
SIZE = 4


def _search(tmp_path, *args, db="t.sqlite"):
    rep = tmp_path / "r.json"
    code = main(["--backend", "gl", "--size", str(SIZE), "--db", str(tmp_path / db), "--report", str(rep),
                 "--repeats", "1", "--warmup", "0", "-q", *args])
    return code, (json.loads(rep.read_text()) if rep.exists() else None)


@pytest.mark.parametrize("fix", FIXES, ids=lambda f: ",".join(f) or "none")
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_and_fix_completes_on_gl(gl, tmp_path, strategy, fix):
    args = ["--strategy", strategy, "--budget", "2"] + [a for f in fix for a in ("--fix", f)]
    code, doc = _search(tmp_path, *args)
    assert code == 0, doc
    check_report(doc)
    (p,) = doc["problems"]
    assert p["evaluated"] == 2 and p["best"] is not None and p["best"]["error"] < 1e-5
    fixed = parse_fix(fix)
    for r in p["results"]:
        cfg = r["config"]
        assert set(cfg) == set(gl.space(Problem(SIZE, SIZE, SIZE)).knobs)     # canonical: every knob
        assert all(cfg[k] in v for k, v in fixed.items())


def test_the_default_search_completes_on_gl(gl, tmp_path):
    """python -m shadertune.search --size N: the backend's strategy (phased), the whole
    union space; a time limit instead of llvmpipe's 30 s."""
    code, doc = _search(tmp_path, "--time-limit", "0.5")
    assert code == 0
    (p,) = doc["problems"]
    assert doc["strategy"] == "phased" and p["evaluated"] >= 1 and p["best"] is not None


def test_local_search_on_gl_measures_and_resumes(gl, tmp_path):
    """The model strategy on the fragment family reaches local search after its top
    configs at this size; run again over the same store it replays and goes on."""
    args = ["--strategy", "model", "--fix", "family=fragment"]
    code, doc = _search(tmp_path, *args, "--budget", "6")
    assert code == 0
    from shadertune.report.schema import validate
    validate(doc, "r.json")                                      # the phases as reports read them
    (p,) = doc["problems"]
    local = [ph["at"] for ph in p["phases"] if ph["label"] == "local search"]
    assert local and local[0] < p["evaluated"] == 6          # local search evaluated configs
    code, again = _search(tmp_path, *args, "--budget", "9")
    (q,) = again["problems"]
    assert code == 0 and q["cached"] == 6 and q["measured"] == q["evaluated"] - 6 >= 1
    assert [r["config"] for r in q["results"][:6]] == [r["config"] for r in p["results"]]


# --- the whole search on the real space, the cost model as timings --------------------

class ModelTimings(BaseEvaluator):
    """evaluate(config) -> a Result timed by the backend's analytical model: the
    strategies' logic over the device's real space without running kernels."""

    def __init__(self, backend, problem, space):
        self.backend, self.problem, self.space = backend, problem, space
        self.phases = []
        self.results = []

    def __call__(self, config):
        assert config == self.space.canonical(config), config            # configs enter whole
        assert self.space.why_invalid(config) is None, config
        ms = self.backend.predict_ms(self.problem, [config])[0]
        r = Result("gl", "model", self.problem, config, OK, times_ms=[ms])
        self.results.append(r)
        return r

    def phase(self, label):
        self.phases.append((len(self.results), label))


@pytest.mark.parametrize("fix", FIXES, ids=lambda f: ",".join(f) or "none")
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_and_fix_runs_its_course_on_the_gl_space(gl, strategy, fix):
    run_its_course(gl, Problem(SIZE, SIZE, SIZE), strategy, fix)


@pytest.mark.parametrize("fix", [(), ("family=compute",)], ids=lambda f: ",".join(f) or "none")
@pytest.mark.parametrize("strategy", ["phased", "model"])
def test_local_search_on_an_odd_transposed_shape(gl, strategy, fix):
    run_its_course(gl, Problem(13, 7, 9, trans_a=True, trans_b=True), strategy, fix)


def run_its_course(gl, problem, strategy, fix):
    space = gl.space(problem)
    if fix:
        space = narrow(space, parse_fix(fix))
    ev = ModelTimings(gl, problem, space)
    options = SearchOptions(cost_model=lambda cs: gl.predict_ms(problem, cs),
                            seeds=gl.candidates(problem, SearchOptions.top), patience=2)
    results = get_strategy(strategy)(space, ev, Budget(max_evals=400), options)
    assert results and len({r.config for r in results}) == len(results)      # each config once
    if strategy in ("phased", "model"):
        assert any(label == "local search" for _, label in ev.phases)       # local search ran
        assert any(at < len(results) for at, label in ev.phases if label == "local search")


def test_local_search_reads_a_config_that_leaves_out_held_knobs(gl):
    """A config stored before `lang` existed (or a compute candidate written without
    it) is read in its canonical form: its neighbours are one kernel move away."""
    from shadertune.search.local import neighbourhood
    problem = Problem(SIZE, SIZE, SIZE)
    space = gl.space(problem)
    whole = next(c for c in space.configs() if c["family"] == "compute")
    short = Config({k: v for k, v in whole.items() if k != "lang"})
    assert space.canonical(short) == whole
    near = neighbourhood(space, short)
    assert near and all(set(c) == set(space.knobs) and c in space for c in near)
