"""The model on real CUDA measurements (an H200 bench-cuda run kept in benchmarks/), no GPU:
the CUDA space, code generator and derived features are pure Python; only the device is named."""
import json
import pathlib

import pytest

from shadertune.backends.base import DeviceInfo
from shadertune.backends.cuda import CUDABackend
from shadertune.db import Store
from shadertune.perfmodel import model_for
from shadertune.perfmodel.data import results_from_candidates
from shadertune.front.first_use import first_use_configs
from shadertune.core.problem import Problem
from shadertune.selection.chain import select

RUN = pathlib.Path(__file__).resolve().parent.parent / "benchmarks/h200-2026-11-23-s5/cuda-run-v/bench-cuda.json"


class RecordedH200(CUDABackend):
    """The CUDA backend with the device of the recorded run (sm_90 limits, no GPU needed)."""

    def device(self):
        return DeviceInfo("cuda", "NVIDIA", "NVIDIA H200", "run V", self.limits())


@pytest.fixture(scope="module")
def run_v(tmp_path_factory):
    be = RecordedH200()
    path = tmp_path_factory.mktemp("cuda") / "v.sqlite"
    with Store(path) as s:
        for r in results_from_candidates(json.loads(RUN.read_text()), be.device().key):
            s.put(r, be.template_hash())
    return be, path


@pytest.mark.slow
def test_a_model_from_h200_measurements_picks_a_valid_cuda_config(run_v):
    be, path = run_v
    p = Problem(3000, 77, 5000)                 # none of run V's problems (squares, ICA)
    with Store(path) as s:
        model, note = model_for(be, s)
        assert model.meta["rows"] == 336 and len(model.problems) == 7
        assert "derived:log2_model_cycles" in model.featurizer.names and "derived:waves" in model.featurizer.names
        # the guard: validated against the analytical model when trained, both scores kept
        g = model.guard
        assert g["problems"] == 7 and 0 < g["learned"] <= 1 and 0 < g["analytical"] <= 1
        assert g["use"] == ("analytical" if g["learned"] < g["analytical"] else "learned")
        assert g["target"] == "residual" == model.target     # CUDA's default target
        sel = select(be, p, s)
        assert sel.how == ("analytical" if model.prefers_analytical() else "model")
        # candidates: the configs verified on stored problems and the analytical list, valid here
        listed = be.candidates(p, 24)
        assert listed and all(be.space(p).why_invalid(c) is None for c in listed)
        assert sel.config in model.verified_configs("float32") or sel.config in listed
        assert be.space(p).why_invalid(sel.config) is None and be.source(p, sel.config)
        assert sel.predicted_gflops > 0 and sel.guard == g
        picks = first_use_configs(be, p, s, 8)
    assert len(picks) == 8 and picks[0] == sel.config
    assert all(be.space(p).why_invalid(c) is None for c in picks)
