"""optional_import: an optional extra is imported on first use; a missing one
raises the caller's error, whose message names the extra to install."""
import importlib
import sys

import pytest

from shadertune.core.optional import optional_import
from shadertune.errors import ContextError, ShadertuneError

HINT = "this feature needs frobnicate; install it with `pip install shadertune[frob]`"


def test_a_present_module_is_returned():
    import json
    assert optional_import("json", HINT) is json
    import email.mime.text
    assert optional_import("email.mime.text", HINT) is email.mime.text


def test_a_missing_module_raises_import_error_with_the_hint():
    with pytest.raises(ImportError) as e:
        optional_import("shadertune_no_such_module", HINT)
    assert str(e.value).startswith(HINT) and "shadertune_no_such_module" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_a_package_marked_missing_hides_its_imported_submodules(monkeypatch):
    importlib.import_module("email.mime.text")               # imported before it is marked missing
    monkeypatch.setitem(sys.modules, "email", None)
    with pytest.raises(ImportError, match="shadertune"):
        optional_import("email.mime.text", HINT)


def test_the_callers_error_type(monkeypatch):
    monkeypatch.setitem(sys.modules, "shadertune_blocked", None)      # as if not installed
    with pytest.raises(ShadertuneError, match=r"pip install shadertune\[frob\]") as e:
        optional_import("shadertune_blocked", HINT, error=ShadertuneError)
    assert not isinstance(e.value, ImportError)


def test_catch_widens_what_counts_as_missing(monkeypatch, tmp_path):
    (tmp_path / "shadertune_broken_ext.py").write_text("raise OSError('libfoo.so: cannot open')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(OSError):                                       # not caught by default
        optional_import("shadertune_broken_ext", HINT)
    with pytest.raises(ContextError, match="libfoo.so") as e:
        optional_import("shadertune_broken_ext", HINT, error=ContextError, catch=Exception)
    assert str(e.value).startswith(HINT)


@pytest.mark.parametrize("call, module, error, extra", [
    ("shadertune.perfmodel.learners:sklearn", "sklearn", "ModelUnavailable", "shadertune[model]"),
    ("shadertune.cluster.engine:require_distributed", "distributed", "ShadertuneError", "shadertune[cluster]"),
    ("shadertune.backends.cuda.device:import_cupy", "cupy", "ContextError", "shadertune[cuda]"),
])
def test_the_extras_say_what_to_install(monkeypatch, call, module, error, extra):
    mod, fn = call.split(":")
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ShadertuneError) as e:
        getattr(importlib.import_module(mod), fn)()
    assert type(e.value).__name__ == error and extra in str(e.value)
