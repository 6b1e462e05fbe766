"""The evaluator: build -> run -> verify (float64) -> time, every failure a Result."""
import numpy as np
import pytest
from fake_backend import FakeBackend, FakeKernel

from shadertune.core.config import Config
from shadertune.errors import ContextError, RunError
from shadertune.core.problem import Problem
from shadertune.search import Budget, Evaluator, get_strategy, make_inputs, relative_error

P = Problem(8, 8, 64)
GOOD = Config(glsl="450", fetch="texelFetch", unroll=4, np=22, mc="1x4", mrt_h=2, mrt_w=2)


def ev(backend=None, **kw):
    return Evaluator(backend or FakeBackend(), P, repeats=5, warmup=1, **kw)


def test_ok_result_keeps_every_time_and_the_error():
    r = ev()(GOOD)
    assert r.status == "ok" and r.ok
    assert len(r.times_ms) == 5 and r.median_ms > 0 and r.gflops > 0
    assert 0 <= r.error < 1e-6
    assert r.compile_ms == 1.0
    assert r.device == "fake renderer | 1.0" and r.backend == "fake"


@pytest.mark.parametrize("change, status, text", [
    (dict(glsl="330", mc="2x2"), "wrong", "relative error"),
    (dict(mc="1x4", mrt_h=4, mrt_w=2), "wrong", "NaN"),
    (dict(fetch="texture", unroll="full", np=16), "compile_failed", "fake compiler says no"),
    (dict(np=6), "invalid", "instruction budget"),
    (dict(mrt_h=4, mrt_w=4), "invalid", "max_draw_buffers"),
])
def test_failures_become_results(change, status, text):
    be = FakeBackend()
    r = ev(be)(GOOD.replace(**change))
    assert r.status == status and not r.ok
    assert text in r.message and "\n" not in r.message
    assert r.gflops is None
    # every kernel that was built is released
    assert be.released == sum(1 for c in be.builds if c == r.config and status not in
                              ("compile_failed", "invalid"))


class _Broken(FakeBackend):
    def __init__(self, where, exc):
        super().__init__()
        self.where, self.exc = where, exc

    def build(self, problem, config):
        if self.where == "build":
            raise self.exc
        k = super().build(problem, config)
        if self.where in ("run", "time"):
            setattr(k, self.where, lambda *a, **kw: (_ for _ in ()).throw(self.exc))
        if self.where == "empty":
            k.time = lambda *a, **kw: []
        if self.where == "shape":
            k.run = lambda A, B, *a, **kw: np.zeros((3, 3), np.float32)
        return k


@pytest.mark.parametrize("where, exc, status", [
    ("build", ZeroDivisionError("backend bug"), "compile_failed"),
    ("run", RunError("draw failed"), "run_failed"),
    ("run", MemoryError("out of texture memory"), "run_failed"),
    ("time", RunError("timer query unavailable"), "run_failed"),
    ("empty", None, "run_failed"),
    ("shape", None, "wrong"),
])
def test_no_kernel_failure_escapes(where, exc, status):
    be = _Broken(where, exc)
    r = ev(be)(GOOD)
    assert r.status == status and r.message
    if where != "build":
        assert be.released == 1


def test_context_error_aborts_the_search():
    be = FakeBackend(context_error_after=3)
    with pytest.raises(ContextError, match="fake GPU went away"):
        get_strategy("phased")(be.space(P), ev(be), Budget())
    assert len(be.builds) == 4


def test_tolerance_is_configurable():
    wrong = GOOD.replace(glsl="330", mc="2x2")      # off by 1 %
    assert ev()(wrong).status == "wrong"
    r = ev(tolerance=0.02)(wrong)
    assert r.status == "ok" and 0.009 < r.error < 0.011


def test_inputs_are_seeded_random_with_a_float64_reference():
    A, B, ref = make_inputs(Problem(5, 7, 3), seed=4)
    A2, _, _ = make_inputs(Problem(5, 7, 3), seed=4)
    A3, _, _ = make_inputs(Problem(5, 7, 3), seed=5)
    assert A.dtype == np.float32 and ref.dtype == np.float64
    assert np.array_equal(A, A2) and not np.array_equal(A, A3)
    assert np.count_nonzero(A) == A.size and A.std() > 0.2
    assert np.allclose(ref, A.astype(np.float64) @ B.astype(np.float64), rtol=0, atol=0)


def test_transposed_problems_store_operands_transposed():
    p = Problem(5, 7, 3, "float64", trans_a=True, trans_b=True)
    A, B, ref = make_inputs(p)
    assert A.shape == (3, 5) and B.shape == (7, 3) and A.dtype == np.float64
    assert np.allclose(ref, A.T @ B.T)
    r = Evaluator(FakeBackend(), Problem(5, 7, 64, "float64", True, True), repeats=1)(GOOD)
    assert r.status == "ok" and r.error < 1e-15


def test_relative_error():
    ref = np.array([[3.0, 4.0]])
    assert relative_error(ref, ref) == 0
    assert relative_error(np.array([[3.0, 4.5]]), ref) == pytest.approx(0.1)
    assert relative_error(np.array([[1.0, 0.0]]), np.zeros((1, 2))) == 1.0


def test_kernels_are_released_after_each_config():
    be = FakeBackend()
    results = get_strategy("phased")(be.space(P), ev(be), Budget(max_evals=60))
    built = sum(1 for r in results if r.status not in ("invalid", "compile_failed"))
    assert be.released == built


def test_a_kernel_that_leaves_output_unwritten_cannot_pass():
    """NaN from the kernel's poisoning is caught even when the rest is right."""
    be = FakeBackend()
    k = FakeKernel(be, P, GOOD.replace(mc="1x4", mrt_h=4, mrt_w=2))
    A, B, _ = make_inputs(P)
    assert np.isnan(k.run(A, B)).sum() == 1
    assert ev(be)(k.config).status == "wrong"


def test_large_outputs_are_checked_by_blocks_exactly():
    from shadertune.search.evaluate import check_output
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((1200, 700))                 # 3.2 blocks of rows per thread
    C = (ref + 1e-6 * rng.standard_normal(ref.shape)).astype(np.float32)
    want = np.linalg.norm(C.astype(np.float64) - ref) / np.linalg.norm(ref)
    bad, err = check_output(C, ref, float(np.linalg.norm(ref)))
    assert bad == 0 and err == pytest.approx(want, rel=1e-12)
    assert relative_error(C, ref) == pytest.approx(want, rel=1e-12)
    C[5, 7] = np.nan
    C[1199, 0] = np.inf
    assert check_output(C, ref, 1.0)[0] == 2


def test_the_report_says_where_the_time_went():
    from shadertune.search import tune
    e = tune(FakeBackend(), P, strategy="random", budget=Budget(max_evals=5), repeats=1)
    st = e["stage_seconds"]
    assert set(st) == {"build", "check", "verify", "time", "release", "store"}
    assert all(v >= 0 for v in st.values()) and sum(st.values()) <= e["seconds"] + 1e-3


class _ComparingKernel(FakeKernel):
    """A kernel whose output stays where it was computed (a device's, as CUDA's): it
    compares with the reference itself (checked_compare), its inputs kept in the
    search's cache; checked_run is never asked for."""

    def checked_run(self, A, B, **kw):
        raise AssertionError("the evaluator copied C back although the kernel compares it")

    def checked_compare(self, A, B, ref, *, cache=None):
        kept = cache.get("inputs")
        if kept is None:
            cache["inputs"] = kept = (A.copy(), B.copy())   # "uploaded" once a search
            self.backend.uploads += 1
        C = self.run(kept[0], kept[1])
        finite = np.isfinite(C)
        d = np.where(finite, C.astype(np.float64) - ref, 0.0)
        return C.shape, int((~finite).sum()), float((d * d).sum())


class _ComparingBackend(FakeBackend):
    uploads = 0

    def build(self, problem, config):
        k = super().build(problem, config)
        k.__class__ = _ComparingKernel
        return k


def test_a_kernel_that_compares_where_its_output_lies_is_judged_alike():
    """checked_compare's (shape, NaN/Inf, squared differences) give the verdicts and
    the error the host comparison gives, the inputs kept across the search's configs."""
    host, dev = ev(), ev(_ComparingBackend())
    for change in ({}, dict(glsl="330", mc="2x2"), dict(mc="1x4", mrt_h=4, mrt_w=2)):
        a, b = host(GOOD.replace(**change)), dev(GOOD.replace(**change))
        assert (a.status, a.message.split(" (")[0]) == (b.status, b.message.split(" (")[0])
        assert (a.error is None and b.error is None) or a.error == pytest.approx(b.error, rel=1e-12)
    assert dev.backend.uploads == 1
    assert "NaN/Inf" in dev(GOOD.replace(mc="1x4", mrt_h=4, mrt_w=2)).message


def test_a_compared_output_of_the_wrong_shape_is_wrong():
    be = _ComparingBackend()

    def narrow(self, A, B, ref, *, cache=None):
        return (P.M, P.N - 1), 0, 0.0
    e = ev(be)
    be_build = be.build
    be.build = lambda p, c: _with(be_build(p, c), narrow)
    r = e(GOOD)
    assert r.status == "wrong" and "output shape (8, 7)" in r.message


def _with(kernel, compare):
    kernel.checked_compare = compare.__get__(kernel)
    return kernel
