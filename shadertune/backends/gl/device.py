"""Device limits read at run time, exposed to the tuner."""
from __future__ import annotations

from ..base import DeviceInfo


def float_targets_ok(ctx, targets: int) -> bool:
    """Can `targets` RGBA32F textures be attached to one complete framebuffer?"""
    texs, fbo = [], None
    try:
        texs = [ctx.texture((4, 4), 4, dtype="f4") for _ in range(targets)]
        fbo = ctx.framebuffer(color_attachments=texs)  # raises when incomplete
        return True
    except Exception:
        return False
    finally:
        from .driver import parking_framebuffer
        parking_framebuffer(ctx).use()
        for r in ([fbo] if fbo else []) + texs:
            r.release()


_SOFTWARE = ("llvmpipe", "softpipe", "swrast", "swiftshader", "lavapipe")


def is_software_renderer(renderer: str) -> bool:
    return any(s in str(renderer).lower() for s in _SOFTWARE)


def read_limits(ctx) -> dict:
    info = ctx.info
    draw = int(info.get("GL_MAX_DRAW_BUFFERS", 1))
    attach = int(info.get("GL_MAX_COLOR_ATTACHMENTS", draw))
    max_targets = min(draw, attach)
    # Largest number of float render targets that really completes (some drivers cap lower).
    while max_targets > 1 and not float_targets_ok(ctx, max_targets):
        max_targets //= 2
    exts = set(ctx.extensions)
    return {
        "max_draw_buffers": max_targets,
        "max_texture_size": int(info.get("GL_MAX_TEXTURE_SIZE", 4096)),
        "max_texture_units": int(info.get("GL_MAX_TEXTURE_IMAGE_UNITS", 16)),
        "float_render_targets": float_targets_ok(ctx, 1),
        "gl_version": int(ctx.version_code),
        "timer_query": "GL_ARB_timer_query" in exts or ctx.version_code >= 330,
        "arb_fragment_program": "GL_ARB_fragment_program" in exts,
        "nv_gpu_program5": "GL_NV_gpu_program5" in exts,
        # a CPU rasteriser: its run times swing by 20-30% from run to run (llvmpipe,
        # 2 cores), too much for the evaluator's racing (search/evaluate.py)
        "software_renderer": is_software_renderer(info.get("GL_RENDERER", "")),
    }


def device_info(ctx) -> DeviceInfo:
    info = ctx.info
    return DeviceInfo(backend="gl", vendor=info.get("GL_VENDOR", "?"),
                      renderer=info.get("GL_RENDERER", "?"), driver=info.get("GL_VERSION", "?"),
                      limits=read_limits(ctx))
