"""Where the store lives, and which files are the store (a core module: the one output
writer, shadertune.core.atomic, protects the stores it names; the store package reads it as
shadertune.db.location).

default_path(): $SHADERTUNE_DB, else $XDG_CACHE_HOME/shadertune/tune.sqlite, else
HOME/.cache/shadertune/tune.sqlite, HOME being $HOME or, where it is unset, the
user's passwd entry.  A relative $XDG_CACHE_HOME or $HOME is ignored (the XDG base
directory rules: such paths are invalid).  Where none of them gives a place (a
service or container user with no HOME and no passwd entry), StoreError says to
pass --db or set SHADERTUNE_DB: os.path.expanduser leaves '~' as it is when it finds
no home, which once made the store `./~/.cache/shadertune/tune.sqlite` in whatever
folder the tool ran in.

user_path(path): a path the user gave (--db, db=, $SHADERTUNE_DB) with a leading
'~' expanded by the same rule, StoreError when there is no home to expand it to.

store_files(path): the store's file and the -wal, -shm and -journal files SQLite
keeps beside it: the files no output of a tool may overwrite (shadertune.core.atomic).

known_store_files(): the files of the stores the environment names, whichever a
command is given: $SHADERTUNE_DB's and the default location's (XDG_CACHE_HOME or
HOME), which shadertune.core.atomic refuses to replace from every writer.
Everything here is read when called, never at import.
"""
from __future__ import annotations

import os
import pathlib

from ..errors import StoreError

STORE_NAME = ("shadertune", "tune.sqlite")
SIDE_FILES = ("-wal", "-shm", "-journal")


class NoStoreLocation(StoreError):
    """No store was named and the environment gives no place for the default one."""


def home() -> pathlib.Path | None:
    """$HOME when it is an absolute path, else the passwd entry's home, else None."""
    env = os.environ.get("HOME")
    if env is not None:
        return pathlib.Path(env) if os.path.isabs(env) else None
    try:
        import pwd
        entry = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, OSError):
        return None
    return pathlib.Path(entry) if os.path.isabs(entry) else None


def user_path(path) -> pathlib.Path:
    """`path` with a leading ~ (this user's home) expanded; ~other users too."""
    text = os.fspath(path)
    if text == "~" or text.startswith("~/"):
        h = home()
        if h is None:
            raise NoStoreLocation(f"cannot expand {text!r}: HOME is not set and this user "
                                  f"(uid {os.getuid()}) has no home in the passwd database; "
                                  f"give the path without '~'")
        return h / text[2:] if len(text) > 1 else h
    if text.startswith("~"):
        expanded = os.path.expanduser(text)
        if expanded.startswith("~"):
            raise NoStoreLocation(f"cannot expand {text!r}: no such user")
        return pathlib.Path(expanded)
    return pathlib.Path(text)


def default_path() -> pathlib.Path:
    """The store used when none is named (see the module docstring)."""
    env = os.environ.get("SHADERTUNE_DB")
    if env:
        return user_path(env)
    return _default_place()


def _default_place() -> pathlib.Path:
    """The default location without $SHADERTUNE_DB: XDG_CACHE_HOME's, else HOME's."""
    cache = os.environ.get("XDG_CACHE_HOME")
    if cache and os.path.isabs(cache):
        return pathlib.Path(cache).joinpath(*STORE_NAME)
    h = home()
    if h is None:
        raise NoStoreLocation(
            f"no place for the default tuning store: HOME is not set (or not an absolute "
            f"path) and this user (uid {os.getuid()}) has no home in the passwd database; "
            f"pass --db PATH (db= for matmul) or set SHADERTUNE_DB or XDG_CACHE_HOME")
    return h.joinpath(".cache", *STORE_NAME)


def store_path(db=None) -> pathlib.Path:
    """The store `db` names (a path; None: the default store)."""
    return default_path() if _unnamed(db) else user_path(db)


def names_default_place(db=None) -> bool:
    """Whether `db` leaves the store to the built-in default place: no path given and
    no $SHADERTUNE_DB (a cache folder the user never named, which a store may make)."""
    return _unnamed(db) and not os.environ.get("SHADERTUNE_DB")


def _unnamed(db) -> bool:
    return db is None or os.fspath(db) == ""


def store_files(path) -> list[pathlib.Path]:
    """The store's file and SQLite's files beside it."""
    p = pathlib.Path(path)
    return [p, *(p.with_name(p.name + s) for s in SIDE_FILES)]


def known_store_files() -> list[pathlib.Path]:
    """The files of $SHADERTUNE_DB's store and of the default location's (each where the
    environment gives one), read now."""
    env = os.environ.get("SHADERTUNE_DB")
    places = ([lambda: user_path(env)] if env else []) + [_default_place]
    out: list[pathlib.Path] = []
    for place in places:
        try:
            out += store_files(place())
        except StoreError:
            continue                     # no such place: nothing there to protect
    return out


__all__ = ["NoStoreLocation", "default_path", "home", "known_store_files", "names_default_place", "store_files",
           "store_path", "user_path"]
