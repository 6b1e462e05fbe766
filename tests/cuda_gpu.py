"""What the GPU-only CUDA test modules share: importing this skips the importing
module cleanly where CuPy or a CUDA device is missing.

    from cuda_gpu import TOL, cupy, pytestmark  # noqa: F401  (pytestmark marks the module)

DEVICES is how many CUDA devices CuPy sees; rel() a relative Frobenius error of a
device or host result; torch_or_skip() PyTorch with CUDA, or the test skipped.
"""
import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
try:
    DEVICES = cupy.cuda.runtime.getDeviceCount()
except Exception:
    DEVICES = 0
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(DEVICES == 0, reason="no CUDA device")]

# relative Frobenius error vs float64: float32 kernels, float64 kernels (the DMMA and
# FFMA DGEMM sum in IEEE double; sqrt(K) * 2^-53 is ~1e-14 at K = 4096)
TOL = {"float32": 1e-5, "float64": 1e-13}


def rel(x, ref):
    x = cupy.asnumpy(x) if isinstance(x, cupy.ndarray) else np.asarray(x)
    assert np.isfinite(x).all()
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def torch_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch
