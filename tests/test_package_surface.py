"""The package's top level: its names listed once, before and after the front door is used."""
from subproc import run_python


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
