"""docs/knobs.md is what scripts/knob-reference prints from the spaces, so the knob
reference cannot drift from the code; and the script refuses a knob it cannot describe."""
import pathlib

import pytest
from subproc import run_python
from script_module import load_script

from shadertune.core.space import Space

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "knob-reference"


def load_reference():
    return load_script("knob-reference")


@pytest.mark.slow
def test_committed_page_is_what_the_script_prints():
    r = run_python(None, SCRIPT, "--check", timeout=300)
    assert r.returncode == 0, ("docs/knobs.md is out of date; run scripts/knob-reference --write\n"
                               + r.stdout[-4000:] + r.stderr[-2000:])


def test_every_knob_of_both_spaces_is_on_the_page():
    ref = load_reference()
    page = (ROOT / "docs" / "knobs.md").read_text()
    gl = ref.gl_space(ref.GL_SMALL, ref.GL_LIMITS)
    cuda = ref.make_space(ref.CUDA_PROBLEM, ref.CUDA_LIMITS)
    for space in (gl, cuda):
        for knob in space.knobs:
            assert f"| `{knob}` |" in page, knob
        for rule in space.restrictions:
            assert ref.rule_text(rule) in page, rule


def test_a_knob_without_a_meaning_is_refused():
    ref = load_reference()
    space = Space({**{k: (1,) for k in ref.MEANINGS["cuda"]}, "NEW": (1, 2)})
    with pytest.raises(SystemExit, match="undescribed knobs \\['NEW'\\]"):
        ref.check_meanings("cuda", space)
    fewer = Space({k: (1,) for k in list(ref.MEANINGS["gl"])[1:]})
    with pytest.raises(SystemExit, match="described knobs the space lacks \\['out'\\]"):
        ref.check_meanings("gl", fewer)


def test_long_integer_runs_are_shortened_and_others_kept():
    ref = load_reference()
    assert ref.fmt_domain([2, 4, 6, 8, 10, 12, 16, 20]) == "2-12 by 2, 16, 20"
    assert ref.fmt_domain([0, 8, 16, 12, 4]) == "0, 8, 16, 12, 4"
    assert ref.fmt_domain([1, 2, 4, 8, "full"]) == "1, 2, 4, 8, full"
