"""The layers of docs/architecture.md, checked from the code's imports by import-linter
(its contracts are in pyproject.toml): core types -> backends -> store -> search ->
perfmodel -> select -> api/CLI, no cycle between packages, no backend named by the
shared layers.  Function-level imports count (the second test shows the tool sees them)."""
import pathlib
import textwrap

import pytest

pytest.importorskip("importlinter")
from importlinter.cli import lint_imports  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_import_contracts_hold(capsys):
    code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert code == 0, out
    for name in ("Layers look down only", "No import cycle between packages",
                 "the shared layers name no backend", "The backends do not import each other",
                 "Nothing but a command line imports a command line"):
        assert f"{name}" in out and "BROKEN" not in out


def test_a_function_level_import_breaks_a_layers_contract(tmp_path, monkeypatch, capsys):
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
    monkeypatch.syspath_prepend(str(tmp_path))
    assert lint_imports(config_filename=str(config), no_cache=True, no_logo=True) == 1
    out = capsys.readouterr().out
    assert "layered.low is not allowed to import layered.high" in out
    assert "high over low BROKEN" in out and "no cycle BROKEN" in out
    assert "layered.low -> layered.high (l.6)" in out
