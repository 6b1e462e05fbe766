"""The render-target layout's GL objects, shared by the kernels that draw into it.

Jiang's design (layout.py): A and B packed into RGBA32F textures, C's partial
sums in one texture per render target, ping-ponging between two texture sets so
that a pass never reads the texture it writes (passes = ceil(K / np); each pass
adds np k-values; the last applies alpha and adds beta * C).  The GLSL kernel
(driver.py) and the assembly kernels (asm/driver.py) draw the same passes into
the same objects with different programs: both take this mixin beside the base
kernel (kernel.BaseGLKernel), which gives them the lifecycle.
"""
from __future__ import annotations

import numpy as np

from ..kernel import kernel_operands, output_array
from ..platform import regions
from ..platform.objects import clear_writes_nan


def _packed(cache, key, make):
    """The bytes of make() (a packed array; no copy), kept in `cache` under `key`
    when there is a cache (which counts len() as bytes)."""
    if cache is None:
        return make()
    data = cache.get(key)
    if data is None:
        data = memoryview(np.ascontiguousarray(make())).cast("B")
        cache[key] = data
    return data


class RenderTargets:
    """The render-target layout's textures, framebuffers, uploads, poisoning and
    read-back: the hooks of kernel.BaseGLKernel both render-target kernels share."""

    def _make_textures(self):
        L = self.layout
        self.tex_a, self._tags["A"] = self._take(L.a_size)
        self.tex_b, self._tags["B"] = self._take(L.b_size)
        # Two texture sets (ping, pong), one texture per render target each.
        self.partials = [[self._take(L.c_size)[0] for _ in range(L.targets)] for _ in range(2)]
        self.fbos = []
        for texs in self.partials:
            fbo = self.ctx.framebuffer(color_attachments=texs)
            self._resources.append(fbo)
            self.fbos.append(fbo)
        units = {"A": 0, "B": 1, "Cin": 2}
        units.update({f"P{t}": 3 + t for t in range(L.targets)})
        self._units = units

    def _warm_up(self) -> None:
        """One pass over one fragment: a driver that compiles at the first draw
        (llvmpipe's JIT, for one) does it here, inside compile_ms, and not in the
        first run, which the evaluator times."""
        fbo = self.fbos[1]
        full = fbo.viewport
        loaded, self._loaded = self._loaded, True
        try:
            fbo.viewport = (0, 0, 1, 1)
            self.execute(0, 1)
        finally:
            self._loaded = loaded
            fbo.viewport = full

    # --- uploads --------------------------------------------------------
    def load(self, A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *,
             alpha: float = 1.0, beta: float = 0.0, cache=None) -> None:
        """Upload op(A) (M, K), op(B) (K, N) and C (M, N, only when beta != 0).

        `cache` (a dict-like, e.g. search.operands.OperandCache) keeps packed A and B
        across kernels whose layouts pack them alike; the caller promises that A and B
        are the same, unchanged arrays at every call with that cache."""
        L = self.layout
        A, B, C = kernel_operands(self.problem, L, A, B, C, beta)

        def packed(which, key, pack):
            return lambda tex: tex.write(_packed(cache, (which,) + key, pack))

        def row_major(which, X, rows, cols):
            # X as it is into the texture's top-left corner, zeros around it
            return lambda tex: self._write_corner(tex, np.ascontiguousarray(X), rows, cols, which)
        self.tex_a = self._upload("A", self.tex_a, L.a_pack_key,
                                  row_major("A", A, L.M, L.K) if L.a_row_major else
                                  packed("A", L.a_pack_key, lambda: L.pack_a(A)), cache)
        self.tex_b = self._upload("B", self.tex_b, L.b_pack_key,
                                  row_major("B", B, L.K, L.N) if L.b_row_major else
                                  packed("B", L.b_pack_key, lambda: L.pack_b(B)), cache)
        if C is not None:
            if self.tex_c is None:
                self.tex_c, _ = self._take(L.cfull_size)
            self.tex_c.write(L.pack_c(C))
        self._alpha, self._beta = float(alpha), float(beta)
        self._loaded = True

    def _write_corner(self, tex, X: np.ndarray, rows: int, cols: int, slot: str) -> None:
        """tex <- X (rows x cols floats, 4 a texel) at texel (0, 0), the rest zero."""
        w, h = self._textures[id(tex)][1]
        cw = cols // 4
        self.transfers.write_texture(tex, X, viewport=(0, 0, cw, rows), slot=slot)
        if cw < w:
            tex.write(np.zeros((rows, w - cw, 4), np.float32), viewport=(cw, 0, w - cw, rows))
        if rows < h:
            tex.write(np.zeros((h - rows, w, 4), np.float32), viewport=(0, rows, w, h - rows))

    def _load_regions(self, a, b, c, alpha: float, beta: float) -> None:
        """GL-array operands packed into this layout's textures on the GPU (the packing
        pack_a, pack_b and pack_c do on the host, padding included)."""
        L = self.layout
        regions.pack(self.ctx, a, self.tex_a, L.a_size, L.mc_h, L.ka)
        regions.pack(self.ctx, b, self.tex_b, L.b_size, L.kb, L.mc_w)
        self._tags["A"] = self._tags["B"] = None       # no cached operand any more
        if c is not None:
            if self.tex_c is None:
                self.tex_c, _ = self._take(L.cfull_size)
            regions.pack(self.ctx, c, self.tex_c, L.cfull_size, L.mc_h, L.mc_w)
        self._alpha, self._beta = alpha, beta

    def _store_region(self, which: int, out) -> None:
        """Each render target's block of C into the region (unpack_c on the GPU)."""
        L = self.layout
        for t, tex in enumerate(self.partials[which]):
            i, j = divmod(t, L.mrt_w)
            regions.unpack(self.ctx, tex, L.c_size, (j * L.wc, i * L.hc), L.mc_h, L.mc_w, out)

    def poison(self) -> None:
        """Fill every partial-sum texture with NaN: an unwritten element cannot pass."""
        if clear_writes_nan(self.ctx):
            for fbo in self.fbos:
                fbo.clear(*(float("nan"),) * 4)
            return
        w, h = self.layout.c_size
        nan = np.full((h, w, 4), np.nan, np.float32).tobytes()
        for texs in self.partials:
            for t in texs:
                t.write(nan)

    # --- read-back ------------------------------------------------------
    def read(self, which: int, out: np.ndarray | None = None) -> np.ndarray:
        """C from texture set `which`, into `out` when given (see output_array)."""
        L = self.layout
        out = output_array(out, L.M, L.N)
        w, h = L.c_size
        arrs = [np.empty((h, w, 4), np.float32) for _ in self.partials[which]]
        for t, arr in zip(self.partials[which], arrs):
            self.transfers.read_texture(t, arr)
        if not L.c_row_major:
            np.copyto(out, L.unpack_c(arrs))
            return out
        # 1x4: target (i, j) holds rows i*hc.. and columns 4*j*wc.. of C as they are
        for t, arr in enumerate(arrs):
            i, j = divmod(t, L.mrt_w)
            r0, c0 = i * h, 4 * j * w
            r, c = min(h, L.M - r0), min(4 * w, L.N - c0)
            if r > 0 and c > 0:
                out[r0:r0 + r, c0:c0 + c] = arr.reshape(h, 4 * w)[:r, :c]
        return out
