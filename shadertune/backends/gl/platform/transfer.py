"""Moving operands between the caller's arrays and GL objects, with no copy of our own.

Two ways ($SHADERTUNE_GL_TRANSFER; by default 'direct' on a software renderer,
whose 'GPU copy' is one more host copy, else 'staged' where the driver has
buffer storage):

- direct: glTexSubImage2D / glBufferSubData from the array, glGetTexImage into
  it.  The driver copies through staging memory of its own, one call at a time.
- staged: persistently mapped, coherent buffers (buffer storage, GL 4.4) in host
  memory the GPU copies from and to by DMA.  The host copies the array into the
  mapping on several threads (numpy's copy lets go of the GIL), then the GPU
  copies the mapping into the texture (pixel unpack) or buffer; read-back goes
  the other way (pixel pack into the mapping, a fence, then threads copy it
  out).  Each operand slot has a mapping of its own, so that the host can fill
  B's while the GPU still copies A's.

Arrays must be C-contiguous float32 of exactly the object's byte size (the
caller's row-major layout is the object's; see image_layout).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ....core.cpus import usable_cpus
from ....core.templates import read
from . import glraw
from .context import software_renderer
from .objects import parking_framebuffer
from .pool import nearest_texture
from .uninterrupted import uninterrupted

MODES = ("staged", "direct")
# the packing passes GpuPacking draws (shaders/gl/pack/)
PACKING_TEMPLATES = ("gl/pack/pack_rows.frag", "gl/pack/unpack_rows.frag")
_PARALLEL_BYTES = 8 << 20      # below this one thread copies faster than several start
_EXECUTOR: ThreadPoolExecutor | None = None


def transfer_mode(ctx=None) -> str:
    """$SHADERTUNE_GL_TRANSFER, else the default for ctx (see the module docstring)."""
    mode = os.environ.get("SHADERTUNE_GL_TRANSFER")
    if mode is None:
        return "direct" if ctx is not None and software_renderer(ctx) else "staged"
    if mode not in MODES:
        raise ValueError(f"SHADERTUNE_GL_TRANSFER must be one of {MODES}, got {mode!r}")
    return mode


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=min(8, usable_cpus()),
                                       thread_name_prefix="shadertune-copy")
    return _EXECUTOR


def copy_bytes(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[:] = src for two byte views of one size, on threads when large."""
    n = src.size
    workers = _executor()._max_workers
    if n < _PARALLEL_BYTES or workers == 1:
        np.copyto(dst, src)
        return
    step = -(-n // workers)
    step = -(-step // 4096) * 4096            # page-aligned pieces
    futures = [_executor().submit(np.copyto, dst[i:i + step], src[i:i + step])
               for i in range(0, n, step)]
    for f in futures:
        f.result()


def _bytes_of(a: np.ndarray) -> np.ndarray:
    if not a.flags.c_contiguous:
        raise ValueError("transfers need C-contiguous arrays")
    return a.reshape(-1).view(np.uint8)


class _Staging:
    """One persistently mapped buffer, grown to the largest transfer it carried."""

    def __init__(self, ctx, read: bool):
        self.ctx, self.read = ctx, read
        self.buffer = None
        self.view = None
        self.busy = False          # a GPU copy from/to it may still run

    def take(self, nbytes: int) -> bool:
        """Make room for nbytes; False where the driver cannot map buffers."""
        if self.busy:
            glraw.wait_gpu(self.ctx)       # the host must not overwrite what the GPU copies
            self.busy = False
        if self.buffer is not None and self.buffer.size >= nbytes:
            return True
        self.release()
        made = glraw.persistent_buffer(self.ctx, max(nbytes, 1 << 16), self.read)
        if made is None:
            return False
        self.buffer, self.view = made
        return True

    def release(self) -> None:
        if self.buffer is not None:
            self.view = None            # the mapping goes with the buffer
            glo = self.buffer.glo
            self.buffer.release()       # moderngl forgets an external buffer, never deletes it
            glraw.delete_buffer(glo)
            self.buffer = None
        self.busy = False


class Transfers:
    """The transfer paths of one context (see the module docstring)."""

    def __init__(self, ctx, mode: str | None = None):
        self.ctx = ctx
        self.mode = transfer_mode(ctx) if mode is None else mode
        if self.mode not in MODES:
            raise ValueError(f"transfer mode must be one of {MODES}, got {self.mode!r}")
        self._up: dict[str, _Staging] = {}
        self._down: _Staging | None = None
        self.bytes_up = 0
        self.bytes_down = 0

    def _upload_staging(self, slot: str, nbytes: int) -> _Staging | None:
        if self.mode != "staged":
            return None
        st = self._up.get(slot)
        if st is None:
            st = self._up[slot] = _Staging(self.ctx, read=False)
        if not st.take(nbytes):
            self.mode = "direct"        # no buffer storage here: the driver's own path
            return None
        return st

    def write_texture(self, tex, array: np.ndarray, viewport=None, slot: str = "A") -> None:
        """tex (or its viewport (x, y, w, h)) <- array, byte for byte."""
        self._upload(array, slot, lambda src: tex.write(src, viewport=viewport),
                     lambda st, n: tex.write(st.buffer, viewport=viewport))

    def write_buffer(self, buf, array: np.ndarray, offset: int = 0, slot: str = "A") -> None:
        """buf[offset:] <- array, byte for byte."""
        self._upload(array, slot, lambda src: buf.write(src, offset=offset),
                     lambda st, n: self.ctx.copy_buffer(buf, st.buffer, size=n, write_offset=offset))

    def _upload(self, array, slot, direct, from_staging) -> None:
        """direct(bytes), or: the bytes into slot's mapping, then from_staging(staging, n)."""
        src = _bytes_of(array)
        st = self._upload_staging(slot, src.size)
        self.bytes_up += src.size
        if st is None:
            direct(src)
            return
        copy_bytes(st.view[:src.size], src)
        from_staging(st, src.size)
        st.busy = True

    def read_texture(self, tex, out: np.ndarray) -> None:
        """out <- tex, byte for byte (one read-back; waits for the GPU)."""
        self._download(out, lambda st, n: tex.read_into(st.buffer), tex.read_into)

    def read_buffer(self, buf, out: np.ndarray, offset: int = 0) -> None:
        """out <- out.nbytes bytes of buf from byte `offset` (one read-back; waits for the GPU)."""
        self._download(out, lambda st, n: self.ctx.copy_buffer(st.buffer, buf, size=n, read_offset=offset),
                       lambda dst: buf.read_into(dst, size=dst.size, offset=offset))

    def _download(self, out, to_staging, direct) -> None:
        """to_staging(staging, n), a wait, then the mapping into out; or direct(out's bytes)."""
        dst = _bytes_of(out)
        self.bytes_down += dst.size
        if self.mode == "staged":
            if self._down is None:
                self._down = _Staging(self.ctx, read=True)
            if self._down.take(dst.size):
                to_staging(self._down, dst.size)
                glraw.wait_gpu(self.ctx)
                copy_bytes(dst, self._down.view[:dst.size])
                return
            self.mode = "direct"
        direct(dst)

    def release(self) -> None:
        for st in self._up.values():
            st.release()
        self._up.clear()
        if self._down is not None:
            self._down.release()
            self._down = None


class GpuPacking:
    """Packing and unpacking on the GPU for rows that end mid-texel (K or N not a
    multiple of 4): the caller's array goes up as it is, one float a texel of a
    one-channel texture, and a fragment pass (shaders/gl/pack/) writes the padded
    texels; read-back the other way round.  Programs are built at first use."""

    def __init__(self, ctx, transfers: Transfers):
        self.ctx = ctx
        self.transfers = transfers
        self._programs: dict = {}

    def _program(self, name: str):
        if name not in self._programs:
            with uninterrupted():
                prog = self.ctx.program(vertex_shader=read("gl/fullscreen.vert"),
                                        fragment_shader=read(f"gl/pack/{name}.frag"))
            self._programs[name] = (prog, self.ctx.vertex_array(prog, []))
        return self._programs[name]

    def _draw(self, name: str, source, target, **uniforms) -> None:
        """Run pass `name` reading `source` (texture unit 0, the shader's only sampler)
        into render target `target`."""
        prog, vao = self._program(name)
        fbo = self.ctx.framebuffer(color_attachments=[target])
        try:
            source.use(0)
            for k, v in uniforms.items():
                prog[k].value = v
            fbo.use()
            with uninterrupted():    # the first draw compiles the program's variant
                vao.render(vertices=3)
        finally:
            parking_framebuffer(self.ctx).use()
            fbo.release()

    def write_texture(self, dst, array: np.ndarray, slot: str) -> None:
        """dst (RGBA32F, ceil(cols / 4) texels x any height) <- array (rows x cols):
        each row zero-padded to whole texels; dst's rows past `rows` zero."""
        rows, cols = array.shape
        src = nearest_texture(self.ctx, (cols, rows), components=1)
        try:
            self.transfers.write_texture(src, array, slot=slot)
            self._draw("pack_rows", src, dst, u_cols=cols, u_rows=rows)
        finally:
            src.release()              # GL keeps it until the draw has read it

    def write_buffer(self, dst, array: np.ndarray, height: int, slot: str) -> None:
        """As write_texture, into a storage buffer of `height` padded rows (a texture
        packed on the GPU, then copied into the buffer on the GPU)."""
        tex = nearest_texture(self.ctx, (-(-array.shape[1] // 4), height))
        try:
            self.write_texture(tex, array, slot)
            tex.read_into(dst)
        finally:
            tex.release()

    def read_texture(self, src, out: np.ndarray) -> None:
        """out (rows x cols) <- src (RGBA32F, ceil(cols / 4) texels a row), padding dropped."""
        rows, cols = out.shape
        dst = nearest_texture(self.ctx, (cols, rows), components=1)
        try:
            self._draw("unpack_rows", src, dst)
            self.transfers.read_texture(dst, out)
        finally:
            dst.release()

    def release(self) -> None:
        for prog, vao in self._programs.values():
            vao.release()
            prog.release()
        self._programs.clear()
