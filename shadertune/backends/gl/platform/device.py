"""Device limits read at run time, exposed to the tuner (a kernel path adds its own: read_limits)."""
from __future__ import annotations

import os

import numpy as np

from ....core.cpus import usable_cpus
from ...base import DeviceInfo
from . import glraw
from .context import is_software_renderer
from .egl_compat import is_compatibility_profile
from .objects import parking_framebuffer
from .uninterrupted import uninterrupted


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
        parking_framebuffer(ctx).use()
        for r in ([fbo] if fbo else []) + texs:
            r.release()


def image_path_limits(ctx, exts: set) -> dict:
    """What the image path needs (GL 4.2 image load/store, GL 4.3 storage buffers, or
    their ARB extensions) and the limits that prune it, read at run time.  A limit the
    driver does not report reads 0: the knobs that need it then drop out of the space."""
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


# what KHR_shader_subgroup reports: the stages and the operations subgroups support
_SUBGROUP_STAGES_KHR, _SUBGROUP_FEATURES_KHR = 0x9533, 0x9534
_COMPUTE_STAGE_BIT, _SHUFFLE_FEATURE_BIT = 0x20, 0x10
# a compute unit count where the driver tells none: a mid-size GPU's SMs
_DEFAULT_COMPUTE_UNITS = 32


def compute_units(ctx, software: bool) -> int:
    """How many workgroups run at once, in units of one per SM: NVIDIA's driver says
    (gl_SMCountNV of GL_NV_shader_thread_group, read by a one-invocation dispatch);
    a software renderer runs one per CPU thread (llvmpipe's LP_NUM_THREADS, else the
    CPUs this process may use); else a stated default."""
    if software:
        env = os.environ.get("LP_NUM_THREADS", "")
        if env.isdigit() and int(env) > 0:
            return int(env)
        return usable_cpus()
    if "GL_NV_shader_thread_group" not in set(ctx.extensions):
        return _DEFAULT_COMPUTE_UNITS
    src = ("#version 450 core\n#extension GL_NV_shader_thread_group : require\n"
           "layout(local_size_x = 1) in;\nlayout(std430, binding = 0) buffer Out { uint n; };\n"
           "void main() { n = gl_SMCountNV; }\n")
    prog = buf = None
    try:
        with uninterrupted():
            prog = ctx.compute_shader(src)
            buf = ctx.buffer(reserve=4)
            buf.bind_to_storage_buffer(0)
            prog.run(1, 1, 1)
        ctx.memory_barrier()
        n = int(np.frombuffer(buf.read(), np.uint32)[0])
        return n if n > 0 else _DEFAULT_COMPUTE_UNITS
    except Exception:
        return _DEFAULT_COMPUTE_UNITS
    finally:
        for r in (prog, buf):
            if r is not None:
                r.release()


def compute_limits(ctx, exts: set, software: bool) -> dict:
    """What the compute family needs and the limits that prune it, read at run time: a
    GL 4.5 context (GLSL 4.50 lets barrier() sit in uniform loops), shared memory and
    invocations a workgroup, work groups a dispatch, buffer-texture size, subgroup
    shuffles (KHR_shader_subgroup in compute shaders, subgroups of 32), compute units.
    Without GL 4.5 the family is absent: every limit reads 0."""
    if int(ctx.version_code) < 450:
        return {"compute": False}

    def limit(pname, info_key=None) -> int:
        v = glraw.get_integer(ctx, pname)
        if v is None and info_key:
            v = ctx.info.get(info_key)
        return max(0, int(v or 0))
    groups = ctx.info.get("GL_MAX_COMPUTE_WORK_GROUP_COUNT") or (65535, 65535, 65535)
    shuffle = False
    if "GL_KHR_shader_subgroup" in exts:
        stages, features = limit(_SUBGROUP_STAGES_KHR), limit(_SUBGROUP_FEATURES_KHR)
        shuffle = bool(stages & _COMPUTE_STAGE_BIT and features & _SHUFFLE_FEATURE_BIT
                       and limit(glraw.SUBGROUP_SIZE_KHR) == 32)
    return {
        "compute": True,
        "max_compute_shared_bytes": limit(glraw.MAX_COMPUTE_SHARED_MEMORY_SIZE),
        "max_compute_invocations": limit(glraw.MAX_COMPUTE_WORK_GROUP_INVOCATIONS,
                                         "GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS"),
        "max_compute_groups": [int(g) for g in groups],
        "max_texture_buffer_texels": limit(glraw.MAX_TEXTURE_BUFFER_SIZE),
        "subgroup_shuffle": shuffle,
        "compute_units": compute_units(ctx, software),
    }


def read_limits(ctx, path_limits=()) -> dict:
    """The device's limits; `path_limits`: readers (ctx -> dict) of the limits a kernel
    path reads for itself (the assembly programs' limits: KernelPath.device_limits)."""
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
    limits["compat_profile"] = is_compatibility_profile(ctx)
    for read in path_limits:
        limits.update(read(ctx))
    limits.update(image_path_limits(ctx, exts))
    limits.update(compute_limits(ctx, exts, limits["software_renderer"]))
    return limits


def device_info(ctx, path_limits=()) -> DeviceInfo:
    info = ctx.info
    return DeviceInfo(backend="gl", vendor=info.get("GL_VENDOR", "?"),
                      renderer=info.get("GL_RENDERER", "?"), driver=info.get("GL_VERSION", "?"),
                      limits=read_limits(ctx, path_limits))
