"""Ship the kernels under shaders/ inside the package as shadertune/_shaders.

The templates live at the top of the source tree (they are kernels, not
Python); a non-editable install copies them next to the code so that
shadertune.templates finds them without the source tree.
"""
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithShaders(build_py):
    def run(self):
        super().run()
        src = pathlib.Path(__file__).parent / "shaders"
        dst = pathlib.Path(self.build_lib) / "shadertune" / "_shaders"
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithShaders})
