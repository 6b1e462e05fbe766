"""A CUDA search compares each checked run on the device (device_check.py): the
same verdict and error as the host comparison, the inputs copied once a search.
GPU only (skipped without CuPy or a device)."""

import numpy as np
import pytest

from cuda_gpu import cupy, pytestmark  # noqa: F401  (skips without a CUDA device)

from shadertune.backends.cuda import CUDABackend  # noqa: E402
from shadertune.backends.cuda import device_check  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.search import Evaluator, make_inputs  # noqa: E402
from shadertune.search.evaluate import check_output, relative_of  # noqa: E402
from shadertune.search.operands import OperandCache  # noqa: E402


@pytest.fixture(scope="module")
def be():
    return CUDABackend()


@pytest.mark.parametrize("p", [Problem(300, 200, 257), Problem(129, 65, 700, trans_a=True),
                               Problem(64, 96, 3000, dtype="float64"),
                               Problem(40, 24, 48, batch=5, trans_b=True)])
def test_the_device_comparison_agrees_with_the_host_one(be, p):
    A, B, ref = make_inputs(p, 3)
    norm = float(np.linalg.norm(ref))
    cache = OperandCache(1 << 30)
    for cfg in be.candidates(p, 6)[:6]:
        k = be.build(p, cfg)
        try:
            shape, bad, sq = k.checked_compare(A, B, ref, cache=cache)
            host_bad, host_err = check_output(np.asarray(k.run(A, B)), ref, norm)
        finally:
            k.release()
        assert tuple(shape) == ref.shape and bad == host_bad == 0
        # the same kernel twice (split-K's atomics may sum in another order)
        assert relative_of(sq, norm) == pytest.approx(host_err, rel=1e-2, abs=1e-12), cfg.key
    assert len(cache) == 1        # the inputs went to the device once


def test_nan_and_inf_are_counted_and_left_out_of_the_sum():
    C = cupy.asarray(np.array([[1.0, np.nan], [np.inf, 4.0]], np.float32))
    ref = cupy.asarray(np.array([[0.0, 0.0], [0.0, 2.0]]))
    bad, sq = device_check.compare(cupy, C, ref)
    assert bad == 2 and sq == pytest.approx(1.0 + 4.0)


def test_a_search_judges_on_the_device(be):
    p = Problem(257, 129, 513)
    ev = Evaluator(be, p, repeats=3, warmup=1)
    results = [ev(c) for c in be.candidates(p, 4)[:4]]
    assert all(r.ok and r.error < 1e-5 for r in results), [(r.status, r.message) for r in results]
    assert len(ev.operands) == 1
