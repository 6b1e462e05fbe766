"""Shared fixtures: one real GL backend (EGL; llvmpipe here, NVIDIA on the GPU machine)."""
import numpy as np
import pytest


@pytest.fixture(scope="session")
def gl_backend():
    from shadertune.backends.gl import GLBackend
    return GLBackend()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
