"""A script of scripts/ imported as a module, for tests of its functions:
load_script("bench-cuda") loads scripts/bench_cuda.py (the name the docs use, or
the module's own).  scripts/ is on sys.path, as it is for a script that runs: the
scripts import their shared modules (project_venv, profile_configs) from there."""
import importlib.util
import pathlib
import sys

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.append(str(SCRIPTS))


def load_script(name: str):
    module_name = name.removesuffix(".py").replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, SCRIPTS / f"{module_name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
