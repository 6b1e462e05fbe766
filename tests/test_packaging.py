"""The sdist and the wheel, built as `python -m build` builds them (the wheel from the
unpacked sdist), through setuptools' PEP 517 hooks with no network: every kernel file
under shaders/ is inside both, the LICENSE too, and the templates are found from the
unpacked wheel when run from another directory."""
import pathlib
import shutil
import tarfile
import zipfile

import pytest
from subproc import run_python

ROOT = pathlib.Path(__file__).resolve().parent.parent
# What a checkout holds besides the sources: never part of a build's input.
_NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                      "*.pyc", ".pytest_cache", ".hypothesis", "benchmarks", "out")


def _hook(cwd: pathlib.Path, hook: str, out: pathlib.Path) -> pathlib.Path:
    """Run setuptools.build_meta.<hook>(out) in `cwd` (what `build --no-isolation` calls)."""
    code = f"import sys; from setuptools import build_meta as b; print(b.{hook}(sys.argv[1]))"
    r = run_python(code, out, checkout=False, cwd=cwd, timeout=300)
    assert r.returncode == 0, f"{hook} failed:\n{r.stderr[-3000:]}"
    return out / r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)      # never write build files into the checkout
    sdist = _hook(src, "build_sdist", tmp / "dist")
    with tarfile.open(sdist) as tf:
        tf.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    wheel = _hook(unpacked, "build_wheel", tmp / "dist")
    return sdist, wheel


def _shader_files() -> list[str]:
    files = sorted(str(p.relative_to(ROOT / "shaders").as_posix())
                   for p in (ROOT / "shaders").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert files, "no kernels under shaders/"
    return files


def test_sdist_holds_every_kernel_and_the_license(built):
    sdist, _ = built
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    missing = [f for f in _shader_files() if f"shaders/{f}" not in names]
    assert not missing, f"sdist lacks {missing}"
    assert {"LICENSE", "pyproject.toml", "setup.py", "MANIFEST.in", "shadertune/py.typed",
            "shadertune/report/report.schema.json", "shadertune/db/pretuned.jsonl"} <= names


def test_wheel_holds_every_kernel_and_the_license(built):
    _, wheel = built
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in _shader_files() if f"shadertune/_shaders/{f}" not in names]
    assert not missing, f"wheel lacks {missing}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)[-10:]
    assert "shadertune/py.typed" in names            # PEP 561: type checkers read its annotations
    assert "shadertune/report/report.schema.json" in names      # the reports' published schema
    assert "shadertune/db/pretuned.jsonl" in names   # the pre-tuned table below the user's store
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: MIT" in zipfile.ZipFile(wheel).read(meta).decode()
    # one console script a command line, and `shadertune TOOL` (shadertune/cli/)
    from shadertune import cli
    points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(points).decode()
    for tool in cli.TOOLS:
        assert f"shadertune-{tool} = shadertune.cli.{tool}:main" in text, text
    assert "shadertune = shadertune.cli:main" in text


def test_unpacked_wheel_finds_its_kernels_from_another_directory(built, tmp_path):
    """A pure-Python wheel installs by unpacking: run the codegen CLI from it, away from
    the checkout, and check the templates came from the wheel's package data."""
    _, wheel = built
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # the wheel first and the checkout off the path; the caller's other entries kept
    code = ("import shadertune, shadertune.core.templates as t; print(shadertune.__file__); "
            "print(t.shader_root()); print(len(t.read('gl/fullscreen.vert'))); "
            "from shadertune.db import pretuned; print(len(pretuned.table()))")
    r = run_python(code, paths=[site], checkout=False, cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    pkg, root, _, rows = r.stdout.splitlines()
    assert int(rows) > 0                             # the table reads from the wheel
    assert pkg.startswith(str(site)) and root == str(site / "shadertune" / "_shaders")
    r = run_python(None, "-m", "shadertune.codegen", "--size", "16", paths=[site], checkout=False,
                   cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("#version ") and "void main()" in r.stdout
    # a report validates against the schema file the wheel ships
    report = ROOT / "tests" / "fixtures" / "report_gl_llvmpipe.json"
    r = run_python(None, "-m", "shadertune.report", "show", report, paths=[site], checkout=False,
                   cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("## gl on llvmpipe")
