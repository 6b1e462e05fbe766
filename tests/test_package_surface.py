"""The package's top level: its names listed once, before and after the front door is used;
and the test suite's `slow` marker, which the README's quick subset deselects."""
import subprocess
import sys

from subproc import ROOT, child_env, run_python


def test_dir_lists_each_name_once_before_and_after_first_use():
    code = ("import shadertune as s\n"
            "before = dir(s)\n"
            "s.matmul, s.tune, s.explain, s.TuneResult\n"
            "after = dir(s)\n"
            "for d in (before, after):\n"
            "    assert len(d) == len(set(d)) and d == sorted(d), d\n"
            "    assert set(s.__all__) <= set(d), set(s.__all__) - set(d)\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr


def test_the_slow_marker_is_registered_and_selects_the_long_sweeps():
    """scripts/test -m "not slow" is the README's quick subset: the marker must exist
    (--strict-markers) and select tests, which -m "not slow" then leaves out."""
    args = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "--strict-markers",
            "tests/test_matmul_api.py"]

    def collected(*extra):
        r = subprocess.run(args + list(extra), cwd=ROOT, env=child_env(), capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return {l for l in r.stdout.splitlines() if "::" in l}
    slow, quick, every = collected("-m", "slow"), collected("-m", "not slow"), collected()
    assert "tests/test_matmul_api.py::test_thousand_calls_leak_nothing" in slow
    assert slow and quick and not slow & quick and slow | quick == every
