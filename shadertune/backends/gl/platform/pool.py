"""TexturePool: textures and storage buffers kept between kernels, with what they hold.

A search builds hundreds of kernels of one problem shape, each needing the
same large textures (at 4096, about 256 MB), and allocating and filling them
would be most of an evaluation's fixed cost.  Released objects wait here, tagged with
the packed operand they hold (or None), so the next kernel with the same sizes
takes them back and skips the upload when the tag matches.  Bounded by bytes,
oldest released first out.

An object's size says what it is: (width, height) is an RGBA32F texture,
(width, height, 1) a one-channel R32F texture, (nbytes,) a storage buffer.
"""
from __future__ import annotations

import os
from collections import OrderedDict

_TEXEL_BYTES = 16      # RGBA32F


def nearest_texture(ctx, size, components: int = 4):
    """A float texture (RGBA, or R for components=1) read texel by texel (no
    filtering, no wrapping)."""
    import moderngl
    tex = ctx.texture(tuple(size), components, dtype="f4")
    tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
    tex.repeat_x = False
    tex.repeat_y = False
    return tex


class TexturePool:
    def __init__(self, ctx, max_bytes: int | None = None):
        if max_bytes is None:
            max_bytes = default_pool_bytes()
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.ctx = ctx
        self.max_bytes = max_bytes
        self._free: OrderedDict = OrderedDict()     # id(tex) -> (tex, size, tag)
        self.bytes = 0
        self.reused = 0          # acquisitions served from the pool

    def acquire(self, size: tuple[int, int], tag=None):
        """(texture, the tag of what it holds): a pooled texture of this size (one
        holding `tag` first), else a new one (tag None)."""
        size = tuple(size)
        if tag is not None:
            tex = self.take_holding(size, tag)
            if tex is not None:
                return tex, tag
        for key, (tex, sz, tg) in self._free.items():
            if sz == size:
                self._take(key)
                return tex, tg
        return make_object(self.ctx, size), None

    def take_holding(self, size: tuple[int, int], tag):
        """A pooled texture of this size holding `tag`, or None (nothing is allocated)."""
        size = tuple(size)
        for key, (tex, sz, tg) in self._free.items():
            if sz == size and tg == tag:
                self._take(key)
                return tex
        return None

    def _take(self, key) -> None:
        _, sz, _ = self._free.pop(key)
        self.bytes -= _nbytes(sz)
        self.reused += 1

    def give_back(self, tex, size: tuple[int, int], tag=None) -> None:
        """Keep `tex` (holding what `tag` names, or anything when None) for a later kernel."""
        size = tuple(size)
        n = _nbytes(size)
        if n > self.max_bytes:
            tex.release()
            return
        self._free[id(tex)] = (tex, size, tag)
        self.bytes += n
        while self.bytes > self.max_bytes:
            _, (old, sz, _) = self._free.popitem(last=False)
            self.bytes -= _nbytes(sz)
            old.release()

    def clear(self) -> None:
        """Release every pooled texture (GPU memory back to the driver)."""
        for tex, _, _ in self._free.values():
            tex.release()
        self._free.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._free)


def default_pool_bytes(searching: bool = False) -> int:
    """$SHADERTUNE_GL_POOL_MB if set; else 256 MB, and 2 GB while a search runs (a
    4096 search's operand textures for every layout it meets, about 24 of 64 MB, plus
    a kernel's partial sums; GLBackend.search_session gives it back afterwards)."""
    env = os.environ.get("SHADERTUNE_GL_POOL_MB")
    if env:
        try:
            mb = int(env)
        except ValueError:
            raise ValueError(f"SHADERTUNE_GL_POOL_MB must be a whole number of MB, got {env!r}") from None
        if mb < 0:
            raise ValueError(f"SHADERTUNE_GL_POOL_MB must be >= 0, got {mb}")
        return mb << 20
    return (2 << 30) if searching else (256 << 20)


def make_object(ctx, size):
    """A new object of this size (see the module docstring)."""
    size = tuple(size)
    if len(size) == 1:
        return ctx.buffer(reserve=max(int(size[0]), 16))
    if len(size) == 3:
        return nearest_texture(ctx, size[:2], components=size[2])
    return nearest_texture(ctx, size)


def _nbytes(size) -> int:
    if len(size) == 1:
        return int(size[0])
    if len(size) == 3:
        return int(size[0]) * int(size[1]) * int(size[2]) * 4
    return int(size[0]) * int(size[1]) * _TEXEL_BYTES
