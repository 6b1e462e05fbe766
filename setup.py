"""Ship the kernels under shaders/ inside the package as shadertune/_shaders.

The templates live at the top of the source tree (they are kernels, not
Python; MANIFEST.in puts them into the sdist); building a wheel copies them
next to the code, where shadertune.core.templates finds them through
importlib.resources.  Everything else is declared in pyproject.toml.
"""
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

SHADERS = pathlib.Path(__file__).resolve().parent / "shaders"


class BuildWithShaders(build_py):
    def run(self):
        super().run()
        if not (SHADERS / "gl").is_dir():
            raise SystemExit(f"setup.py: the kernel templates are missing: {SHADERS} has no gl/ "
                             "(an sdist must include shaders/: see MANIFEST.in)")
        dst = pathlib.Path(self.build_lib) / "shadertune" / "_shaders"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(SHADERS, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithShaders})
