"""Each process role its own Mesa shader cache (backends/gl/platform/shader_cache.py)."""
import os

from shadertune.backends.gl.platform.shader_cache import MESA_DIR, MESA_OFF, private_shader_cache_env
from shadertune.cluster.engine import worker_options


def test_a_role_gets_a_made_directory_of_its_own_under_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(MESA_DIR, raising=False)
    monkeypatch.delenv(MESA_OFF, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    a, b = private_shader_cache_env("worker-gpu0"), private_shader_cache_env("worker gpu/1")
    assert a[MESA_DIR] != b[MESA_DIR] and all(os.path.isdir(d[MESA_DIR]) for d in (a, b))
    assert os.path.dirname(b[MESA_DIR]) == str(tmp_path / "shadertune" / "mesa")
    # two workers of one local cluster never share one
    opts = [worker_options(g, f"gpu{g}", [], None) for g in (0, 1)]
    assert opts[0]["env"][MESA_DIR] != opts[1]["env"][MESA_DIR]


def test_the_users_choice_and_a_missing_home_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv(MESA_OFF, "true")
    assert private_shader_cache_env("x") == {}
    monkeypatch.delenv(MESA_OFF)
    monkeypatch.setenv(MESA_DIR, str(tmp_path))
    assert private_shader_cache_env("x") == {}
    monkeypatch.delenv(MESA_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert private_shader_cache_env("x") == {} and not os.path.exists("relative")
