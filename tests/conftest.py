"""Shared fixtures: one real GL backend (EGL; llvmpipe here, NVIDIA on the GPU machine).

A thread of a test that raises fails that test: pytest reports such an exception as a
PytestUnhandledThreadExceptionWarning, made an error here (children started through
tests/subproc.py fail the same way)."""
import os

import numpy as np
import pytest

from shadertune.backends.gl.platform.shader_cache import private_shader_cache_env

# each test process (and the children it starts) its own Mesa shader cache, set before any
# GL display opens: two processes compiling one shader through a shared cache crashed
# llvmpipe (shader_cache.py)
os.environ.update(private_shader_cache_env("tests-" + os.environ.get("PYTEST_XDIST_WORKER", "main")))


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


@pytest.fixture
def checks(monkeypatch):
    """How many matmul calls took the regular path (check_call runs once in each): the
    express lanes' tests count the calls they did not take."""
    import shadertune.front.matmul as front
    n = []
    real = front.check_call
    monkeypatch.setattr(front, "check_call", lambda *a, **k: n.append(1) or real(*a, **k))
    return n
