"""A store kept xz-compressed (benchmarks/**/*.sqlite.xz: the repository keeps its runs'
stores that way), opened for reading through a temporary copy."""
from __future__ import annotations

import contextlib
import lzma
import pathlib
import shutil
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def readable(path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A plain SQLite file of the store at `path` while the block runs: `path` itself, or
    for `*.xz` a decompressed copy in a temporary folder removed afterwards."""
    path = pathlib.Path(path)
    if path.suffix != ".xz":
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="shadertune-store-") as tmp:
        copy = pathlib.Path(tmp) / path.stem
        with lzma.open(path) as src, open(copy, "wb") as dst:
            shutil.copyfileobj(src, dst)
        yield copy
