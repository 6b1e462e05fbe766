"""Shared fixtures: one real GL backend (EGL; llvmpipe here, NVIDIA on the GPU machine).

A thread of a test that raises fails that test: pytest reports such an exception as a
PytestUnhandledThreadExceptionWarning, made an error here (children started through
tests/subproc.py fail the same way)."""
import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "error::pytest.PytestUnhandledThreadExceptionWarning")


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
