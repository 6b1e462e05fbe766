"""Exact types (issue 43 item 2): mypy --strict passes over the package's public surface
and over the README's Python blocks as a user would check them, the overloads give
the types they promise (assert_type; a `# type: ignore[code]` that is not needed
fails under --strict, so each one below proves that mypy refuses that call), and the
Literal names match the registries they stand for."""
import re
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# shadertune/__init__.py and the modules of what it exports (matmul, tune, explain and
# the values they take and return)
SURFACE = ["__init__.py", "front/matmul.py", "front/tuning.py", "front/explanation.py",
           "selection/chain.py", "core/config.py", "core/problem.py", "core/result.py", "names.py",
           "selection/reverify.py", "gl.py"]

# What the overloads promise, checked statically (never run).
PROMISES = '''
from typing import Any, assert_type

import numpy as np
from numpy.typing import NDArray

import shadertune
import shadertune.gl as gl
from shadertune import Config, Problem, TuneResult
from shadertune.selection.chain import Selection


class DeviceArray:
    """Shaped like a CuPy array or a PyTorch CUDA tensor."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {}


A = np.ones((4, 3), np.float32)
B = np.ones((3, 2), np.float32)
out: NDArray[np.float64] = np.empty((4, 2), np.float64)
d = DeviceArray()

assert_type(shadertune.matmul(A, B), NDArray[Any])
assert_type(shadertune.matmul([[1.0, 2.0]], [[3.0], [4.0]]), NDArray[Any])
assert_type(shadertune.matmul(A, B, out=out), NDArray[np.float64])
assert_type(shadertune.matmul(d, B, backend="cuda"), DeviceArray)
assert_type(shadertune.matmul(A, d, backend="cuda"), DeviceArray)
assert_type(shadertune.matmul(A, B, config="jiang", tune="first-use"), NDArray[Any])
assert_type(shadertune.matmul(A, B, config={"np": 4}), NDArray[Any])
G = gl.asarray(A)
assert_type(G, gl.GLArray)
assert_type(shadertune.matmul(G, G.T), gl.GLArray)
assert_type(shadertune.matmul(G, B), gl.GLArray)
assert_type(shadertune.matmul(A, G[:3]), gl.GLArray)
assert_type(shadertune.matmul(A, B, out=gl.zeros((4, 2))), gl.GLArray)
assert_type(shadertune.matmul(G, G[:3], out=out), NDArray[np.float64])

assert_type(shadertune.tune(64), TuneResult)
assert_type(shadertune.tune((64, 48, 32), strategy="random", dtype="float32"), TuneResult)
assert_type(shadertune.tune(Problem(8, 8, 8)), TuneResult)
assert_type(shadertune.tune(A, B), TuneResult)
assert_type(shadertune.tune([64, 128]), list[TuneResult])
sizes = ["64", "32x16x8"]
assert_type(shadertune.tune(sizes), list[TuneResult])
assert_type(shadertune.tune([(8, 8, 8), Problem(4, 4, 4)]), list[TuneResult])

r = shadertune.tune(64)
c: Config | None = r.config
g: float | None = r.gflops
assert_type(shadertune.explain(A, B), Selection)

shadertune.matmul(A, B, backend="vulkan")  # type: ignore[call-overload]
shadertune.tune(64, strategy="genetic")  # type: ignore[call-overload]
shadertune.tune(64, dtype="float16")  # type: ignore[call-overload]
shadertune.explain(A, B, backend="metal")  # type: ignore[arg-type]
'''


def readme_blocks() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks
    # each block as a function of its own: the blocks reuse names, as a reader does
    return "\n".join(f"def block_{i}() -> None:\n" + textwrap.indent(b, "    ")
                     for i, b in enumerate(blocks))


def test_mypy_strict_passes_on_the_public_surface_and_the_readme(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "readme_blocks.py").write_text(readme_blocks())
    (tmp_path / "promises.py").write_text(PROMISES)
    # the README's CUDA lines import CuPy, which is not installed everywhere (it has
    # no stubs either): a user's config says the same
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\nfollow_imports = silent\n"
                                       "[mypy-cupy.*]\nignore_missing_imports = True\n")
    files = [str(ROOT / "shadertune" / f) for f in SURFACE]
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
                        "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
                        str(tmp_path / "readme_blocks.py"), str(tmp_path / "promises.py"), *files],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_literal_names_are_the_registries():
    from shadertune import names
    from shadertune.backends import available, backend_class
    from shadertune.core.problem import _DTYPES
    from shadertune.search import STRATEGIES
    assert set(typing.get_args(names.BackendName)) == set(available())
    assert set(typing.get_args(names.StrategyName)) == set(STRATEGIES)
    assert set(typing.get_args(names.DTypeName)) == set(_DTYPES)
    presets = set()
    for name in available():
        presets |= set(backend_class(name)().presets())
    assert set(typing.get_args(names.PresetName)) == presets
    assert set(typing.get_args(names.ConfigName)) == presets | {"auto", "default"}
    from shadertune.perfmodel.first_use_plan import NAME
    assert typing.get_args(names.TuneOnUse) == (NAME,)
