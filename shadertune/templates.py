"""Find and render the kernel templates under shaders/.

In a source checkout (or an editable install) they are read from the
top-level shaders/ folder; in an installed wheel from shadertune/_shaders,
where setup.py copies them.  Templates are plain GLSL/CUDA with Jinja2
markup; derived constants are computed in Python and passed in.
"""
from __future__ import annotations

import functools
import hashlib
import pathlib

import jinja2

_PKG = pathlib.Path(__file__).resolve().parent


def shader_root() -> pathlib.Path:
    """The folder that holds gl/ and cuda/ templates."""
    for cand in (_PKG / "_shaders", _PKG.parent / "shaders"):
        if (cand / "gl").is_dir():
            return cand
    raise FileNotFoundError(
        "shadertune's shader templates are missing: looked in "
        f"{_PKG / '_shaders'} and {_PKG.parent / 'shaders'}; reinstall the package"
    )


@functools.lru_cache(maxsize=None)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(shader_root())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def read(name: str) -> str:
    """Raw text of a template or shader file, e.g. 'gl/fullscreen.vert'."""
    return (shader_root() / name).read_text()


def render(name: str, **params) -> str:
    """Render template `name` (path relative to shaders/) with `params`."""
    return _env().get_template(name).render(**params)


def template_hash(*names: str) -> str:
    """Short hash of template sources: a store key part, so edited kernels are re-tuned."""
    h = hashlib.sha256()
    for n in names:
        h.update(n.encode())
        h.update(read(n).encode())
    return h.hexdigest()[:16]
