"""The render-target path's driver: Jiang's GLSL kernel over the ping-pong textures.

Each pass draws the fullscreen triangle into the render targets of one texture
set, reading A, B, the other set's partial sums and (in the last pass, with
beta != 0) C; the objects, uploads and read-back are the render-target layout's
(targets.py), the lifecycle the base kernel's (kernel.py).
"""
from __future__ import annotations

from ..fragment import compile_program, fullscreen_pipeline, row_bands
from ..kernel import BaseGLKernel
from ..platform.objects import placeholder_texture
from .targets import RenderTargets


class MrtKernel(RenderTargets, BaseGLKernel):
    """One compiled GLSL program + the render-target textures of one problem shape."""

    def _compile(self, source: str):
        return compile_program(self.ctx, source)

    def _make_pipeline(self) -> None:
        self.vao = fullscreen_pipeline(self.ctx, self.program)
        self._resources.append(self.vao)

    def _setup(self) -> None:
        """Point the program's samplers at their texture units."""
        for name, unit in self._units.items():
            if name in self.program:
                self.program[name].value = unit

    def _execute(self, start: int, stop: int | None, src: int, rows) -> int:
        """Passes start..stop-1 reading partial sums from texture set `src`, over
        fragment rows `rows`; returns the texture set holding the result."""
        L = self.layout
        stop = L.passes if stop is None else stop
        with row_bands(self.fbos, rows):
            self.tex_a.use(0)
            self.tex_b.use(1)
            (self.tex_c or placeholder_texture(self.ctx)).use(2)   # read only when beta != 0
            self._set("u_alpha", self._alpha)
            self._set("u_hc", L.hc)
            self._set("u_wc", L.wc)
            self._set("u_beta", self._beta)
            for p in range(start, stop):
                dst = 1 - src
                for t, tex in enumerate(self.partials[src]):
                    tex.use(3 + t)
                self._set("u_k0", p * L.steps)
                self._set("u_steps", L.steps)
                self._set("u_first", p == 0)
                self._set("u_last", p == L.passes - 1)
                self.fbos[dst].use()
                self.vao.render(vertices=3)
                src = dst
        return src
