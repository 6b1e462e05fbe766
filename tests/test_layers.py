"""The layers of docs/architecture.md, checked from the code's imports by import-linter
(its contracts are in pyproject.toml): core types -> backends -> store -> search ->
perfmodel -> select -> api/CLI, no cycle between packages, no backend named by the
shared layers; inside the GL backend its rooms (platform, base kernel, paths, registry)
in layers, the paths apart, the platform knowing no path, and no cycle at any depth.
Function-level imports count (the last tests show the tool sees them, at any depth).

import-linter runs in a child process: its command configures logging with
dictConfig, which would switch off the loggers of this process's other tests."""
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("importlinter")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def lint_imports(config: pathlib.Path, *paths: pathlib.Path) -> subprocess.CompletedProcess:
    """import-linter on `config` (with `paths` first on sys.path), in a child process."""
    code = ("import sys; sys.path[:0] = sys.argv[2:]; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")
    return subprocess.run([sys.executable, "-c", code, str(config), *map(str, paths)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_the_import_contracts_hold():
    r = lint_imports(ROOT / "pyproject.toml")
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("Layers look down only", "No import cycle between packages",
                 "the shared layers name no backend", "The backends do not import each other",
                 "Nothing but a command line imports a command line",
                 "GL backend: paths over the base kernel over the platform", "The GL kernel paths are independent",
                 "The GL platform knows no kernel path", "No import cycle inside the GL backend"):
        assert name in r.stdout
    assert "BROKEN" not in r.stdout and "Contracts: 9 kept, 0 broken." in r.stdout


def test_a_function_level_import_breaks_a_layers_contract(tmp_path):
    """import-linter reads imports inside functions too: an upward import hidden in a
    function body of a lower layer breaks the contract (and a cycle contract)."""
    pkg = tmp_path / "layered"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high" / "__init__.py").write_text("from ..low import thing\n")
    (pkg / "low" / "__init__.py").write_text(textwrap.dedent('''
        thing = 1


        def upward():
            from ..high import thing as again      # hidden in a function
            return again
        '''))
    config = tmp_path / "layers.toml"
    config.write_text(textwrap.dedent('''
        [tool.importlinter]
        root_package = "layered"

        [[tool.importlinter.contracts]]
        name = "high over low"
        type = "layers"
        containers = ["layered"]
        layers = ["high", "low"]

        [[tool.importlinter.contracts]]
        name = "no cycle"
        type = "acyclic_siblings"
        ancestors = ["layered"]
        depth = 0
        '''))
    r = lint_imports(config, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "layered.low is not allowed to import layered.high" in r.stdout
    assert "high over low BROKEN" in r.stdout and "no cycle BROKEN" in r.stdout
    assert "layered.low -> layered.high (l.6)" in r.stdout


def test_a_cycle_hidden_in_a_function_deep_inside_a_package_breaks_the_acyclic_contract(tmp_path):
    """The GL backend's acyclic contract (ancestors the backend, every depth): two modules
    of a room two levels down that import each other, one of them inside a function (as
    the GL backend's modules did), break it."""
    pkg = tmp_path / "house"
    (pkg / "room").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "room" / "__init__.py").write_text("")
    (pkg / "room" / "a.py").write_text("from . import b\n")
    (pkg / "room" / "b.py").write_text(textwrap.dedent('''
        def late():
            from . import a          # hidden in a function
            return a
        '''))
    config = tmp_path / "cycle.toml"
    config.write_text(textwrap.dedent('''
        [tool.importlinter]
        root_package = "house"

        [[tool.importlinter.contracts]]
        name = "no cycle inside the house"
        type = "acyclic_siblings"
        ancestors = ["house"]
        '''))
    r = lint_imports(config, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no cycle inside the house BROKEN" in r.stdout
    assert "house.room" in r.stdout
