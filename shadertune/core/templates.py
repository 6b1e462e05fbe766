"""Find and render the kernel templates (GLSL and CUDA, with Jinja2 markup).

An installed package holds them as package data, shadertune/_shaders (setup.py
copies the source tree's shaders/ there), read through importlib.resources so
that any installer's layout works, a zip included.  A source checkout or an
editable install has no _shaders: there they are read from the top-level
shaders/ folder.  Derived constants are computed in Python and passed in.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.resources
import pathlib

import jinja2

# A template name is a path relative to the root with '/' separators, e.g. 'gl/matmul.frag.j2'.
_SOURCE_TREE = pathlib.Path(__file__).resolve().parents[2] / "shaders"


@functools.lru_cache(maxsize=None)
def shader_root():
    """The folder (an importlib.resources Traversable) that holds gl/ and cuda/."""
    packaged = importlib.resources.files("shadertune").joinpath("_shaders")
    for cand in (packaged, _SOURCE_TREE):
        if cand.joinpath("gl").is_dir():
            return cand
    raise FileNotFoundError(
        "shadertune's kernel templates are missing: neither the package data "
        f"(shadertune/_shaders) nor a source tree's {_SOURCE_TREE} holds gl/; reinstall shadertune")


def _resource(name: str):
    return shader_root().joinpath(*name.split("/"))


def read(name: str) -> str:
    """Raw text of a template or shader file, e.g. 'gl/fullscreen.vert'."""
    try:
        return _resource(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"no kernel template {name!r} under {shader_root()}") from None


def _load(name: str):
    # Jinja's loader protocol: (source, filename, uptodate); templates never change under a run.
    return read(name), name, lambda: True


@functools.lru_cache(maxsize=None)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_load),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(name: str, **params) -> str:
    """Render template `name` (path relative to shaders/) with `params`."""
    return _env().get_template(name).render(**params)


@functools.lru_cache(maxsize=None)
def template_hash(*names: str) -> str:
    """Short hash of template sources: a store key part, so edited kernels are re-tuned.
    Read once a process, as the templates rendered (config='auto' asks on every call)."""
    h = hashlib.sha256()
    for n in names:
        h.update(n.encode())
        h.update(read(n).encode())
    return h.hexdigest()[:16]
