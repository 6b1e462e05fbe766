"""Shared fixtures: one real GL backend (EGL; llvmpipe here, NVIDIA on the GPU machine)."""
import numpy as np
import pytest


@pytest.fixture(scope="session")
def gl_backend():
    from shadertune.backends.gl import GLBackend
    return GLBackend()


@pytest.fixture(scope="session")
def gl(gl_backend):
    """The GL backend, or a skip where no GL context can be made here."""
    from shadertune.errors import ContextError
    try:
        gl_backend.device()
    except ContextError as e:
        pytest.skip(f"no GL context: {e}")
    return gl_backend


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
