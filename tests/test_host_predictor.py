"""A backend's host predictor (Backend.host_predictor) answers as its predict_ms does,
from another process: what a cluster worker ranks a space with, off its GPU thread's
interpreter lock."""
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from shadertune.backends.cuda import CUDABackend
from shadertune.core.problem import Problem

cloudpickle = pytest.importorskip("cloudpickle")

P = Problem(96, 80, 200)


def _run(payload):
    import cloudpickle
    predictor, problem, configs = cloudpickle.loads(payload)
    return predictor(problem, configs)


def test_the_host_predictors_answer_as_predict_ms_from_a_spawned_process(gl):
    backends = [gl, CUDABackend()]
    jobs = []
    for b in backends:
        configs = b.space(P).configs()[:300]
        jobs.append((b.predict_ms(P, configs), cloudpickle.dumps((b.host_predictor(), P, configs))))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        for want, payload in jobs:
            assert pool.submit(_run, payload).result() == want
