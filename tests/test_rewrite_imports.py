"""tools/rewrite_imports.py: rewriting a small sample tree to a rename map, moving its
files on one branch and merging a branch that edited them the old way; and the
repository itself holds no name the map retired."""
import importlib.util
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

# rewrite_imports: leave this file

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "rewrite_imports.py"


def _tool():
    spec = importlib.util.spec_from_file_location("rewrite_imports", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MAP = {
    "modules": {
        "shadertune.config": "shadertune.core.config",
        "shadertune.select": "shadertune.selection.chain",
        "shadertune.api": "shadertune.front.matmul",
        "shadertune.roofline": "shadertune.core.roofline",
        "shadertune.search.cli": "shadertune.cli.search",
        "shadertune.study": "study_helpers",
    },
    "files": {"scripts/bench-x": {"to": "scripts/bench_x.py", "launcher": True},
              "shadertune/study.py": {"to": "scripts/study_helpers.py", "launcher": False}},
    "packages": {"shadertune/core/__init__.py": '"""core"""\n',
                 "shadertune/selection/__init__.py": '"""selection"""\n',
                 "shadertune/front/__init__.py": '"""front"""\n',
                 "shadertune/cli/__init__.py": '"""cli"""\n'},
    "kept_strings": ["shadertune.select"],
}

TREE = {
    "shadertune/__init__.py": "from .config import Config\n",
    "shadertune/config.py": "class Config(dict):\n    pass\n",
    "shadertune/select.py": "from .config import Config\n\ndef select():\n    return Config()\n",
    "shadertune/roofline/__init__.py": "",
    "shadertune/roofline/store.py": "from ..config import Config  # noqa: F401\n",
    "shadertune/api.py": textwrap.dedent("""\
        import logging
        from typing import TYPE_CHECKING

        from . import select, roofline as rl
        from .config import Config
        from .roofline import store

        if TYPE_CHECKING:
            from .search.cli import main, PROG  # noqa: F401

        log = logging.getLogger("shadertune.select")


        def matmul():
            return select.select(), Config, rl, store
        """),
    "shadertune/search/__init__.py": "",
    "shadertune/search/cli.py": textwrap.dedent("""\
        from .. import api
        from ..config import Config
        from ..study import helper

        PROG = "shadertune.search"
        """),
    "shadertune/search/__main__.py": "from .cli import main\n",
    "shadertune/study.py": "from .config import Config\n\ndef helper():\n    return Config\n",
    "tests/test_x.py": textwrap.dedent("""\
        import shadertune.api
        from shadertune import api, select  # both move
        from shadertune.config import (
            Config,
        )


        CHILD = '''
            import sys; from shadertune import api, select; from shadertune.config import Config
            import shadertune.api
            import os, shadertune, shadertune.roofline as rl
            print(Config)\\\\n
        '''


        def test(monkeypatch):
            monkeypatch.setattr("shadertune.select.select", lambda: 1)
            assert shadertune.api.matmul
            assert ["-m", "shadertune.search.cli"] and "shadertune.api:matmul"
            assert "python -m shadertune.api" and "shadertune.select"
        """),
    "scripts/bench-x": "#!/usr/bin/env python3\nfrom shadertune.config import Config\nprint(Config)\n",
    "pyproject.toml": textwrap.dedent("""\
        [project.scripts]
        x = "shadertune.search.cli:main"
        [[tool.importlinter.contracts]]
        ignore_imports = ["shadertune.search.cli -> shadertune.select"]
        """),
}


# the body of a module beyond its imports: git pairs a moved file with its old self by
# the share of lines they keep (half at least), as it does the repository's modules
BODY = "".join(f"\n\ndef step_{i}(x):\n    return x + {i}\n" for i in range(12))


def make_repo(path: pathlib.Path) -> pathlib.Path:
    for name, text in TREE.items():
        if name.startswith("shadertune/") and "import" in text:
            text += BODY
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    (path / "scripts" / "bench-x").chmod(0o755)
    (path / "renames.json").write_text(json.dumps(MAP))
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


def git(path, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def run_tool(repo, *args):
    return subprocess.run([sys.executable, str(TOOL), "--map", str(repo / "renames.json"),
                           "--root", str(repo), *args], capture_output=True, text=True, cwd=repo)


def imports_work(repo):
    """The rewritten tree imports and runs (the tests file's body included)."""
    code = ("import sys; sys.path[:0] = ['.', 'scripts']; import importlib.util as u\n"
            "s = u.spec_from_file_location('t', 'tests/test_x.py'); m = u.module_from_spec(s)\n"
            "s.loader.exec_module(m)\n"
            "import shadertune.front.matmul as f; print(f.matmul()[0])\n"
            "import shadertune.cli.search as c; print(c.PROG)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo)


def test_apply_moves_rewrites_a_sample_tree(tmp_path):
    repo = make_repo(tmp_path)
    r = run_tool(repo, "--apply-moves")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr
    api = (repo / "shadertune/front/matmul.py").read_text()
    # relative imports of a moved file: resolved where it was, written where it is
    assert "from ..selection import chain as select\nfrom ..core import roofline as rl\n" in api
    assert "from ..core.config import Config\nfrom ..core.roofline import store\n" in api
    assert "    from ..cli.search import main, PROG  # noqa: F401\n" in api    # indent, comment kept
    assert 'getLogger("shadertune.select")' in api                             # a kept string
    cli = (repo / "shadertune/cli/search.py").read_text()
    assert cli.startswith("from ..front import matmul as api\nfrom ..core.config import Config\n"
                          "from study_helpers import helper\n")
    assert 'PROG = "shadertune.search"' in cli
    assert (repo / "shadertune/search/__main__.py").read_text().startswith("from ..cli.search import main\n")
    assert (repo / "shadertune/core/roofline/store.py").read_text().startswith("from ..config import Config")
    # a module that leaves the package imports absolutely
    assert (repo / "scripts/study_helpers.py").read_text().startswith("from shadertune.core.config import Config\n")
    t = (repo / "tests/test_x.py").read_text()
    assert "import shadertune.front.matmul\n" in t
    assert ("from shadertune.front import matmul as api\nfrom shadertune.selection import chain as select"
            "  # both move\n") in t
    assert "from shadertune.core.config import (\n    Config,\n)" in t
    assert '"shadertune.selection.chain.select"' in t and "shadertune.front.matmul.matmul" in t
    assert '"shadertune.cli.search"' in t and '"shadertune.front.matmul:matmul"' in t
    assert '"python -m shadertune.api"' in t and 'and "shadertune.select"\n' in t   # prose, kept
    # a child process's program in a string: its imports (split with '; ')
    assert ("import sys; from shadertune.front import matmul as api; from shadertune.selection import "
            "chain as select; from shadertune.core.config import Config\n    import shadertune.front.matmul\n"
            "    import os, shadertune, shadertune.core.roofline as rl\n"
            "    print(Config)\\\\n\n") in t
    toml = (repo / "pyproject.toml").read_text()
    assert 'x = "shadertune.cli.search:main"' in toml
    assert '"shadertune.cli.search -> shadertune.selection.chain"' in toml
    assert (repo / "scripts/bench_x.py").read_text().startswith(
        "#!/usr/bin/env python3\nfrom shadertune.core.config import Config")
    launcher = subprocess.run([sys.executable, "scripts/bench-x"], capture_output=True, text=True, cwd=repo,
                              env={"PYTHONPATH": str(repo)})
    assert launcher.returncode == 0 and "Config" in launcher.stdout, launcher.stderr
    r = imports_work(repo)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["{}", "shadertune.search"]
    # once applied, nothing is left to change
    again = run_tool(repo, "--check", *[str(p) for p in repo.rglob("*.py")])
    assert again.returncode == 0, again.stdout


def test_a_branch_that_edited_old_files_merges_after_applying_the_moves(tmp_path):
    repo = make_repo(tmp_path)
    # the renaming branch: the moves, then an edit of a moved file
    git(repo, "checkout", "-q", "-b", "renames")
    assert run_tool(repo, "--apply-moves").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "moves")
    cli = repo / "shadertune/cli/search.py"
    cli.write_text(cli.read_text() + "\n\ndef main():\n    return 0\n")
    git(repo, "commit", "-q", "-am", "a behaviour change")
    # another branch from the base: edits of old files with old imports, a new module
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "other")
    api = repo / "shadertune/api.py"
    api.write_text(api.read_text().replace("import logging\n", "import logging\nfrom .select import select as pick\n"))
    (repo / "shadertune/gl.py").write_text("from .api import matmul\nfrom .config import Config\n" + BODY)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "other work")
    # apply the map there, then merge: no conflict, every import of the new names
    assert run_tool(repo, "--apply-moves").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "apply the renames")
    git(repo, "merge", "-q", "--no-edit", "renames")
    api = (repo / "shadertune/front/matmul.py").read_text()
    assert "from ..selection.chain import select as pick\n" in api
    assert (repo / "shadertune/gl.py").read_text().startswith("from .front.matmul import matmul\n"
                                                              "from .core.config import Config\n")
    assert "def main():" in cli.read_text()
    r = imports_work(repo)
    assert r.returncode == 0, r.stderr


def test_one_file_after_a_merge_mixes_old_and_new_relative_imports(tmp_path):
    """A file merged into its new place keeps the lines its branch wrote for the old
    place: those resolve against the package it came from."""
    repo = make_repo(tmp_path)
    assert run_tool(repo, "--apply-moves").returncode == 0
    api = repo / "shadertune/front/matmul.py"
    api.write_text(api.read_text() + "from .config import Config as C2\nfrom .select import select as s2\n")
    r = run_tool(repo, str(api))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    text = api.read_text()
    assert text.endswith("from ..core.config import Config as C2\nfrom ..selection.chain import select as s2\n")
    assert imports_work(repo).returncode == 0
    assert "from ..selection import chain as select\n" in text        # the new lines stay as they are


def test_the_repository_uses_no_retired_name():
    """Every Python file of the repository imports the map's new names already."""
    r = subprocess.run([sys.executable, str(TOOL), "--check",
                        *git(ROOT, "ls-files", "*.py", "scripts/*", "tools/*").split()],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_renames_map_is_complete_and_points_at_real_files():
    tool = _tool()
    renames = tool.Renames.load(ROOT / "tools" / "renames-37.json")
    for old, new in renames.modules.items():
        if new.startswith("shadertune"):
            assert tool.module_path(new, ROOT) is not None, new
        assert tool.module_path(old, ROOT) is None or old in (
            "shadertune.codegen", "shadertune.demo", "shadertune.report.__main__"), old
    for old, spec in renames.files.items():
        assert (ROOT / spec["to"]).is_file(), spec
        assert (ROOT / old).exists() == bool(spec["launcher"]), old


@pytest.mark.parametrize("package,target,expected", [
    ("shadertune.front", "shadertune.selection", (2, "selection")),
    ("shadertune.front", "shadertune.front", (1, "")),
    ("shadertune.cli", "shadertune", (2, "")),
    ("shadertune", "shadertune.core.config", (1, "core.config")),
])
def test_relative(package, target, expected):
    assert _tool().relative(package, target) == expected
