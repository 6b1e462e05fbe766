"""A real, small search-quality study on the GL backend (llvmpipe here), shared by the
landscape and trajectory tests: exhaustive over a 48-config subspace of 16x16x16, phased
and two random seeds with 10 evaluations each; every strategy on a store of its own and
written as a search report, as scripts/study does."""
from __future__ import annotations

import pathlib

import pytest

from shadertune.db import Store
from shadertune.core.problem import Problem
from shadertune.search import Budget, make_report, tune, write_report
from shadertune.search.restrict import RestrictedBackend, parse_fix

PROBLEM = Problem(16, 16, 16)
FIX = ["out=mrt", "glsl=330", "unroll=1", "np=4,8,16", "mc=1x1,1x4", "mrt_h=1,2", "mrt_w=1,2"]
RUNS = (("exhaustive", 0, None), ("phased", 0, 10), ("random", 0, 10), ("random", 1, 10))
_done: dict = {}


def study(backend, folder: pathlib.Path) -> dict:
    """{report stem: report path}, plus 'store': the exhaustive run's store (made once)."""
    if _done:
        return _done
    sub = RestrictedBackend(backend, parse_fix(FIX))
    folder.mkdir(parents=True, exist_ok=True)
    for name, seed, evals in RUNS:
        stem = f"random-seed{seed}" if name == "random" else name
        with Store(folder / f"{stem}.sqlite") as store:
            entry = tune(sub, PROBLEM, strategy=name, budget=Budget(evals), store=store,
                         retune=True, repeats=2, warmup=1, seed=seed)
        write_report(folder / f"{stem}.json", make_report(sub.name, sub.device(), name, [entry]))
        _done[stem] = folder / f"{stem}.json"
    _done["store"] = folder / "exhaustive.sqlite"
    return _done


@pytest.fixture(scope="module")
def runs(gl, tmp_path_factory):
    """The study's report paths (the test modules import this fixture)."""
    return study(gl, tmp_path_factory.getbasetemp() / "small-study")
