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


CRASH = """32x32x32 float32:   0%|   | 6/5000 [00:00<04:53, 17.01eval/s, best 0.37 GFLOP/s]Fatal Python error: Segmentation fault

Thread 0x00007fd8a3fff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/venv/lib/python3.11/site-packages/tqdm/_monitor.py", line 69 in run

Current thread 0x00007fd8c67c9b80 (most recent call first):
  File "/venv/lib/python3.11/site-packages/moderngl/__init__.py", line {line} in {call}
  File "/work/main/shadertune/backends/gl/fragment.py", line 55 in compile_program
  File "/work/main/shadertune/search/evaluate.py", line 327 in measure

Extension modules: numpy._core._multiarray_umath, moderngl.mgl (total: 2)
"""


def test_the_suite_reruns_only_a_test_whose_child_crashed_in_llvmpipes_compiler():
    # scripts/test's --only-rerun pattern (pytest-rerunfailures matches it against the
    # failure's message): the faulthandler dump of a child that died in moderngl's
    # program / compute_shader, and nothing else
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parent.parent / "scripts" / "test").read_text()
    (pattern,) = re.findall(r"^LLVMPIPE_CRASH='(.*)'$", text, re.M)
    assert '--only-rerun "$LLVMPIPE_CRASH"' in text
    crash = re.compile(pattern)
    for call in ("program", "compute_shader"):
        assert crash.search(f"AssertionError: {CRASH.format(line=2133, call=call)}\nassert -11 == 130")
    # a segfault elsewhere, a compile error, a plain failure: failures of their own
    assert not crash.search(CRASH.format(line=2133, call="run").replace("compile_program", "x"))
    assert not crash.search(CRASH.format(line=2133, call="program").replace("Segmentation fault", "Aborted"))
    assert not crash.search("AssertionError: moderngl.Error: GLSL compile failed in program\nassert 1 == 0")
