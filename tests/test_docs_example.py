"""docs/backends.md's worked example runs as written: its backend module, its script
(tune through the search core, config="auto", matmul) and its command line, each taken
from the page's code blocks and run in a fresh directory."""
import pathlib
import re
import shlex
import sys

import pytest
from subproc import run_python

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "backends.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(PAGE.read_text())]


def file_block(name: str) -> str:
    """The python block whose first line is the comment '# NAME...'."""
    found = [body for lang, body in blocks() if lang == "python" and body.startswith(f"# {name}")]
    assert len(found) == 1, f"docs/backends.md has {len(found)} python blocks named {name}"
    return found[0]


def command_block() -> list[str]:
    found = [body.strip() for lang, body in blocks() if lang == "sh" and "shadertune.search" in body]
    assert len(found) == 1, "docs/backends.md has no (or several) search commands"
    words = shlex.split(found[0])
    assert words[:2] == ["PYTHONPATH=.", "python"], words[:2]
    return [sys.executable] + words[2:]


@pytest.fixture
def example_dir(tmp_path):
    (tmp_path / "blocked_numpy.py").write_text(file_block("blocked_numpy.py"))
    (tmp_path / "use_blocked_numpy.py").write_text(file_block("use_blocked_numpy.py"))
    return tmp_path


def run(args, cwd):
    assert args[0] == sys.executable
    return run_python(None, *args[1:], paths=[cwd], env={"SHADERTUNE_DB": None}, cwd=cwd,
                      timeout=300)


def test_the_worked_example_tunes_selects_and_multiplies(example_dir):
    r = run([sys.executable, "use_blocked_numpy.py"], example_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"(\d+) of 12 configs evaluated; best \{.*\} at [\d.]+ GFLOP/s", r.stdout)
    assert m and 1 <= int(m.group(1)) <= 10, r.stdout       # within the budget of 10
    assert "matmul ok" in r.stdout


def test_the_documented_command_line_tunes_the_example_backend(example_dir):
    first = run([sys.executable, "use_blocked_numpy.py"], example_dir)
    assert first.returncode == 0, first.stdout + first.stderr
    r = run(command_block(), example_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    # what the script measured is replayed from the store (the default config at least:
    # both strategies start there), the rest measured, within the budget of 12
    m = re.search(r"\| 96x80x300 float32 \| acc=\w+ kblock=\d+ .*\| (\d+) \((\d+)/(\d+)\) ", r.stdout)
    assert m, r.stdout
    evals, measured, cached = map(int, m.groups())
    assert evals == measured + cached <= 12 and cached >= 1, r.stdout
    report = run([sys.executable, "-m", "shadertune.report", "show", "example.json"], example_dir)
    assert report.returncode == 0 and "blocked-numpy on host CPU" in report.stdout, report.stdout
