"""Sizes of pruned spaces, counted once and kept in the store.

A report gives each problem's pruned space size, and counting a space enumerates
it (about a second per problem on GL): a table of cached problems would spend
nearly all its time counting.  The count is kept under a fingerprint of
everything it can depend on: the knob domains, the constants (problem sizes,
device limits), the restrictions (expressions by their text, callables by their
names and the plain values their closures hold) and the source of the shadertune
package itself (any code change may change what a restriction accepts, so any
code change counts again).
"""
from __future__ import annotations

import functools
import hashlib
import pathlib


@functools.cache
def _package_source_hash() -> str:
    root = pathlib.Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


_PLAIN = (int, float, str, bool, type(None), tuple, frozenset, dict, list)


def _restriction_name(r) -> str:
    """An expression's text; a callable's name and the plain values it closes over
    (a restriction built per problem may capture its sizes or the device's limits)."""
    if isinstance(r, str):
        return r
    cells = [c.cell_contents if isinstance(c.cell_contents, _PLAIN) else type(c.cell_contents).__name__
             for c in (getattr(r, "__closure__", None) or ())]
    return f"{getattr(r, '__module__', '?')}.{getattr(r, '__qualname__', type(r).__name__)}{cells!r}"


def fingerprint(space) -> str:
    h = hashlib.sha256(_package_source_hash().encode())
    h.update(repr(sorted((k, tuple(v)) for k, v in space.knobs.items())).encode())
    h.update(repr(sorted(space.constants.items(), key=lambda kv: kv[0])).encode())
    h.update(repr([_restriction_name(r) for r in space.restrictions]).encode())
    return h.hexdigest()[:32]


def space_sizes(store, backend, problem, space, count=len) -> tuple[int, int]:
    """(pruned size, full size) of `space`: from the store when counted before, else
    count(space) (and kept there when the store is writable)."""
    full = space.full_size
    if store is None:
        return count(space), full
    key = (backend.name, backend.device().key, backend.template_hash(), problem.key, fingerprint(space))
    size = store.cached_space_size(*key)
    if size is None:
        size = count(space)
        store.keep_space_size(*key, size, full)
    return size, full
