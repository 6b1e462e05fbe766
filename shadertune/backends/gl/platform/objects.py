"""The small GL objects and facts a context keeps for its life (its ContextState):
the framebuffer parked on before another is released, the 1x1 placeholder texture
for samplers a shader does not read, and whether a NaN clear stores NaN."""
from __future__ import annotations

import numpy as np

from .context import make_current, state_of
from .pool import nearest_texture

_FLOAT = "f4"


def parking_framebuffer(ctx):
    """A 1x1 framebuffer that lives as long as the context, with ctx made current: its
    callers bind it to release objects of ctx next, and a thread may hold several contexts."""
    st = state_of(ctx)
    make_current(ctx)
    if st.parking is None:
        st.parking = ctx.framebuffer(color_attachments=[ctx.texture((1, 1), 4, dtype=_FLOAT)])
    return st.parking


def clear_writes_nan(ctx) -> bool:
    """Whether clearing a float framebuffer to NaN stores NaN (checked once per context):
    poisoning by a clear costs no upload."""
    st = state_of(ctx)
    ok = st.clears_nan
    if ok is None:
        tex = ctx.texture((2, 2), 4, dtype=_FLOAT)
        fbo = ctx.framebuffer(color_attachments=[tex])
        try:
            fbo.clear(*(float("nan"),) * 4)
            ok = bool(np.isnan(np.frombuffer(tex.read(), np.float32)).all())
        finally:
            parking_framebuffer(ctx).use()
            fbo.release()
            tex.release()
        st.clears_nan = ok
    return ok


def placeholder_texture(ctx):
    """A 1x1 texture, set up like every operand texture, for a sampler the shader
    does not read (C when beta == 0); it lives as long as the context."""
    st = state_of(ctx)
    if st.placeholder is None:
        st.placeholder = nearest_texture(ctx, (1, 1))
    return st.placeholder
