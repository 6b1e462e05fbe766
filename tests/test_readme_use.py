"""The README's "Use" examples, run as written: the GL block on llvmpipe here, the CUDA
block (which defines every name it uses) on a CUDA GPU only."""
import numpy as np
import pytest
from test_readme_tune import readme_block


def _run(block: str) -> dict:
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    return scope


def test_the_readme_gl_block_runs(gl, tmp_path, monkeypatch):
    monkeypatch.setenv("SHADERTUNE_DB", str(tmp_path / "tune.sqlite"))     # never the user's store
    s = _run(readme_block('config="jiang"'))
    A, B, C = s["A"], s["B"], s["C"]
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_the_readme_cuda_block_runs(tmp_path, monkeypatch):
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device")
    except Exception as e:
        pytest.skip(f"no CUDA device ({type(e).__name__})")
    monkeypatch.setenv("SHADERTUNE_DB", str(tmp_path / "tune.sqlite"))
    block = readme_block("dC = shadertune.matmul(dA, dB")
    s = _run(block)
    ref = s["A"].astype(np.float64) @ s["B"]
    assert isinstance(s["dC"], cp.ndarray) and isinstance(s["C"], np.ndarray)
    np.testing.assert_allclose(cp.asnumpy(s["dC"]), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s["C"], ref, rtol=1e-4, atol=1e-4)
