"""The render-target path's part of the fragment family's space (space.py composes
the family): the render-target grid's sides and the device limits it is bounded by."""
from __future__ import annotations

from ....core.config import Config
from ....core.space import restriction

MRT_SIDES = (1, 2, 4)


def rules(shape) -> dict:
    """The path's rules on `shape` (space.FragmentShape), by name; each docstring is
    the message when it fails."""
    max_draw_buffers = int(shape.limits.get("max_draw_buffers", 8))
    max_texture_units = int(shape.limits.get("max_texture_units", 16))

    @restriction(knobs=('out', 'mrt_h', 'mrt_w',))
    def draw_buffers(cfg: Config) -> bool:
        """mrt_h * mrt_w <= max_draw_buffers (the MRT path)"""
        return cfg["out"] == "image" or cfg["mrt_h"] * cfg["mrt_w"] <= max_draw_buffers

    @restriction(knobs=('mrt_h', 'mrt_w',))
    def texture_units(cfg: Config) -> bool:
        """3 + mrt_h * mrt_w <= max_texture_units"""
        return 3 + cfg["mrt_h"] * cfg["mrt_w"] <= max_texture_units

    return {"draw_buffers": draw_buffers, "texture_units": texture_units}
