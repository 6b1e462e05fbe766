"""The image path's part of the fragment family's space (space.py composes the
family): its blocks and operand sources, what the device must have for it, the
register budget and the storage-buffer limits it is bounded by."""
from __future__ import annotations

from ....core.config import Config
from ....core.space import restriction

# Domain orders: the image path's first valid config in domain order is where the
# phased search starts it (space.py's docstring): a 16 x 8 block (128 accumulators,
# the register budget) reading A from a texture and B from a storage buffer, the
# fastest block on the H200 at 1024, 2048 and 4096 (notes/gl.md).
A_SOURCES = ("texture", "ssbo")
B_SOURCES = ("ssbo", "texture")
BLOCK_ROWS = (16, 8, 12, 4, 2, 1)
BLOCK_COLS = (8, 16, 12, 4)
IMAGE_UNROLLS = (1, 2, 4)
# Accumulators a fragment may hold (block_h x block_w floats).  With the operands of
# one step live beside them, 128 accumulators use about 180 of the 255 registers an
# NVIDIA thread can address; larger blocks spill (notes/gl.md has the measurement).
REGISTER_BUDGET = 128
# The image-path defaults, best first: the block the H200's searches picked at 1024,
# 2048 and 4096 (16 x 8, B from a storage buffer, passes of up to 1024 k), then
# smaller blocks for products it does not fit.
IMAGE_DEFAULTS = ((16, 8, "ssbo"), (16, 8, "texture"), (8, 8, "ssbo"), (8, 8, "texture"),
                  (4, 4, "texture"))


def image_glsl(limits: dict) -> str | None:
    """The GLSL version image-path shaders are written in on this device: 450 where the
    context has it, else 330 with the ARB extensions (the template adds them)."""
    if int(limits.get("gl_version", 330)) >= 450:
        return "450"
    return "330"


def image_path_available(limits: dict) -> bool:
    """Image load/store in fragment shaders, one image unit and a framebuffer with
    no attachments to draw into; all read from the device (device.read_limits)."""
    return bool(limits.get("image_store") and limits.get("fbo_no_attachments")
                and int(limits.get("max_fragment_image_uniforms", 0)) >= 1
                and int(limits.get("max_image_units", 0)) >= 1)


def ssbo_sources(limits: dict) -> int:
    """How many operands may come from storage buffers in a fragment shader (0: none)."""
    if not limits.get("ssbo"):
        return 0
    return min(2, int(limits.get("max_fragment_ssbo_blocks", 0)), int(limits.get("max_ssbo_bindings", 0)),
               # every storage block and image counts against the combined output resources
               max(0, int(limits.get("max_combined_output_resources", 0)) - 1))


def rules(shape) -> dict:
    """The path's rules on `shape` (space.FragmentShape), by name; each docstring is
    the message when it fails."""
    n_ssbo = ssbo_sources(shape.limits) if image_path_available(shape.limits) else 0
    max_ssbo_bytes = int(shape.limits.get("max_ssbo_bytes", 0))
    image_layout_of = shape.image_layout_of

    @restriction(knobs=('a_src', 'b_src', 'block_h', 'block_w', 'np',))
    def ssbo_fits(cfg: Config) -> bool:
        """storage-buffer operands within the device's fragment blocks and block size"""
        n = (cfg["a_src"] == "ssbo") + (cfg["b_src"] == "ssbo")
        if n == 0:
            return True
        if n > n_ssbo:
            return False
        L = image_layout_of(cfg)
        return ((cfg["a_src"] != "ssbo" or L.a_bytes <= max_ssbo_bytes)
                and (cfg["b_src"] != "ssbo" or L.b_bytes <= max_ssbo_bytes))

    @restriction(knobs=('block_h', 'block_w',))
    def register_budget(cfg: Config) -> bool:
        """block_h x block_w accumulators within the register budget"""
        return cfg["block_h"] * cfg["block_w"] <= REGISTER_BUDGET

    return {"ssbo_fits": ssbo_fits, "register_budget": register_budget}
