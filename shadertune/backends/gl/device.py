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


def image_path_limits(ctx, exts: set) -> dict:
    """What the image path needs (GL 4.2 image load/store, GL 4.3 storage buffers, or
    their ARB extensions) and the limits that prune it, read at run time.  A limit the
    driver does not report reads 0: the knobs that need it then drop out of the space."""
    from . import glraw
    version = int(ctx.version_code)

    def limit(pname, info_key=None) -> int:
        v = glraw.get_integer(ctx, pname)
        if v is None and info_key:
            v = ctx.info.get(info_key)
        return max(0, int(v or 0))
    return {
        "image_store": version >= 420 or "GL_ARB_shader_image_load_store" in exts,
        "ssbo": version >= 430 or "GL_ARB_shader_storage_buffer_object" in exts,
        # the image path draws into a framebuffer with no attachments (GL 4.3)
        "fbo_no_attachments": version >= 430 or "GL_ARB_framebuffer_no_attachments" in exts,
        "max_image_units": limit(glraw.MAX_IMAGE_UNITS),
        "max_fragment_image_uniforms": limit(glraw.MAX_FRAGMENT_IMAGE_UNIFORMS),
        "max_combined_output_resources": limit(glraw.MAX_COMBINED_SHADER_OUTPUT_RESOURCES),
        "max_fragment_ssbo_blocks": limit(glraw.MAX_FRAGMENT_SHADER_STORAGE_BLOCKS,
                                          "GL_MAX_FRAGMENT_SHADER_STORAGE_BLOCKS"),
        "max_ssbo_bindings": limit(glraw.MAX_SHADER_STORAGE_BUFFER_BINDINGS,
                                   "GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS"),
        "max_ssbo_bytes": limit(glraw.MAX_SHADER_STORAGE_BLOCK_SIZE, "GL_MAX_SHADER_STORAGE_BLOCK_SIZE"),
    }


def read_limits(ctx) -> dict:
    info = ctx.info
    draw = int(info.get("GL_MAX_DRAW_BUFFERS", 1))
    attach = int(info.get("GL_MAX_COLOR_ATTACHMENTS", draw))
    max_targets = min(draw, attach)
    # Largest number of float render targets that really completes (some drivers cap lower).
    while max_targets > 1 and not float_targets_ok(ctx, max_targets):
        max_targets //= 2
    exts = set(ctx.extensions)
    limits = {
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
    limits.update(image_path_limits(ctx, exts))
    return limits


def device_info(ctx) -> DeviceInfo:
    info = ctx.info
    return DeviceInfo(backend="gl", vendor=info.get("GL_VENDOR", "?"),
                      renderer=info.get("GL_RENDERER", "?"), driver=info.get("GL_VERSION", "?"),
                      limits=read_limits(ctx))
