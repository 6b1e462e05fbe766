"""Every command line in one wing (shadertune/cli/): python -m shadertune TOOL runs each
tool, python -m shadertune.TOOL still does, one console script a tool, and a mistake in
the tool's name is one error line."""
import pathlib
import sys
import tomllib

import pytest
from subproc import run_python

from shadertune import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_wing_holds_every_tool_with_a_parser_and_a_main():
    assert list(cli.TOOLS) == ["search", "report", "db", "codegen", "perfmodel", "cluster", "demo"]
    for name in cli.TOOLS:
        mod = cli.module(name)
        assert mod.__name__ == f"shadertune.cli.{name}"
        assert callable(mod.main) and mod.build_parser().prog == f"python -m shadertune.{name}"


def test_each_tool_has_its_console_script():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"shadertune": "shadertune.cli:main",
                       **{f"shadertune-{t}": f"shadertune.cli.{t}:main" for t in cli.TOOLS}}


@pytest.mark.parametrize("tool", list(cli.TOOLS))
def test_every_tool_runs_through_python_m_shadertune_and_its_own_name(tool):
    for argv in (["-m", "shadertune", tool, "--version"], ["-m", f"shadertune.{tool}", "--version"]):
        r = run_python(None, *argv)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(f"python -m shadertune.{tool} (shadertune) "), r.stdout


def test_a_search_and_a_kernel_through_the_one_command(tmp_path):
    """Two commands to completion on llvmpipe at a tiny size, through python -m shadertune."""
    db = tmp_path / "t.sqlite"
    r = run_python(None, "-m", "shadertune", "search", "--size", "8", "--budget", "2", "--db", str(db), "-q")
    assert r.returncode == 0, r.stderr
    assert "| 8x8x8 float32 |" in r.stdout and db.exists()
    r = run_python(None, "-m", "shadertune", "db", "best", "--db", str(db))
    assert r.returncode == 0 and "8x8x8 float32" in r.stdout, r.stderr
    r = run_python(None, "-m", "shadertune", "codegen", "--size", "8", "--config", '{"family": "fragment"}')
    assert r.returncode == 0 and r.stdout.startswith("#version"), r.stderr


def test_the_tools_are_listed_and_a_wrong_name_is_one_line(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m shadertune ")
    for name, what in cli.TOOLS.items():
        assert f"  {name}" in out and what in out
    assert cli.main(["serch", "--size", "8"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == ("shadertune: error: no tool 'serch': the tools are search, report, db, codegen, "
                       "perfmodel, cluster, demo; did you mean search?")
    assert cli.main([]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("shadertune: error: name a tool: search, ")
    assert cli.main(["--size", "8"]) == 2
    assert "unknown option '--size' before the tool" in capsys.readouterr().err
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("python -m shadertune (shadertune) ")


def test_a_tools_arguments_reach_it_unchanged(capsys):
    """The tool's own parser sees the rest: its errors are its own, exit 2."""
    with pytest.raises(SystemExit) as e:
        cli.main(["search", "--size", "0"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("shadertune.search: error: argument --size")


def test_python_m_shadertune_runs_the_wing():
    r = run_python(None, "-m", "shadertune", "--help")
    assert r.returncode == 0 and r.stdout == cli.help_text()
    r = run_python(None, "-m", "shadertune")
    assert r.returncode == 2 and r.stderr.splitlines()[-1].startswith("shadertune: error: name a tool")
    assert sys.modules.get("shadertune.__main__") is None      # importing the package runs no tool


def _imports_of(path: pathlib.Path) -> set[str]:
    """What a file imports of shadertune: 'module' for `import module`, 'module:name' for
    `from module import name` (relative imports resolved against its package)."""
    import ast
    rel = path.relative_to(ROOT)
    package = ".".join(rel.with_suffix("").parts[:-1]) if rel.parts[0] == "shadertune" else ""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            out |= {f"{base}:{a.name}" for a in node.names}
    return out


def test_no_tool_hands_its_helpers_to_another_or_to_the_scripts():
    """Of a tool's module, files import its main alone (running that command line, as
    the forwarders and scripts/study.py do): what tools and scripts share is a module of
    the library or of the wing's shared rooms (args, search_runs, search_cluster)."""
    tools = {f"shadertune.cli.{t}" for t in cli.TOOLS}
    files = [*(ROOT / "shadertune").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    for f in files:
        for what in _imports_of(f):
            module, _, name = what.partition(":")
            if f"{module}.{name}" in tools:          # from shadertune.cli import search
                module, name = f"{module}.{name}", ""
            assert module not in tools or name == "main", f"{f.relative_to(ROOT)} imports {what}"


def test_the_demo_runs_to_completion_at_a_tiny_size(tmp_path):
    """scripts/demo's job through python -m shadertune demo: tune, then train (its
    TuningRun), then multiply with what auto picks and check it against numpy."""
    db = tmp_path / "t.sqlite"
    r = run_python(None, "-m", "shadertune", "demo", "--sizes", "16", "--budget", "3",
                   "--time-limit", "10", "--db", str(db), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tuned    16: 3 configs" in r.stdout and "error    : " in r.stdout and db.exists()
    r = run_python(None, "-m", "shadertune", "demo", "--sizes", "16x8x8")
    assert r.returncode == 2 and r.stderr.startswith("shadertune.demo: error: --sizes: the demo tunes squares")


def test_the_demo_on_an_unusable_store_fails_with_1_in_one_line(tmp_path, capsys):
    """The work failed (the store is no store), the arguments were right: exit 1, as in
    every tool (it was 2)."""
    from shadertune.cli.demo import main
    db = tmp_path / "t.sqlite"
    db.write_bytes(b"junk" * 1000)
    assert main(["--sizes", "16", "--budget", "1", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("shadertune.demo: error: ") and "not a usable shadertune store" in err
    assert err.count("\n") == 1 and db.read_bytes() == b"junk" * 1000
