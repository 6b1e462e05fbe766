"""The assembly path's part of the fragment family's space (space.py composes the
family): the languages, what an assembly config holds the GLSL-only knobs at, and
its programs within the driver's limits."""
from __future__ import annotations

from ....core.config import Config
from ....core.space import restriction
from .codegen import program_counts

LANGS = ("glsl", "arbfp", "nvfp")
ASM_LANGS = ("arbfp", "nvfp")
# What an assembly config holds the GLSL-only knobs at: the first GLSL version (no
# GLSL is compiled) and the fetch its texture instruction is like (ARBfp's TEX takes
# normalised coordinates, as texture() does; NVfp's TXF integer ones, as texelFetch).
ASM_GLSL = "330"
ASM_FETCH = {"arbfp": "texture", "nvfp": "texelFetch"}


def langs(limits: dict) -> tuple[str, ...]:
    """The `lang` domain on this device: GLSL, and each assembly language that shades in
    the backend's context (asm/driver.assembly_limits)."""
    asm_limits = dict(limits.get("asm_limits") or {})
    return tuple(lang for lang in LANGS if lang == "glsl" or lang in asm_limits)


def rules(shape) -> dict:
    """The path's rules on `shape` (space.FragmentShape), by name; each docstring is
    the message when it fails."""
    asm_limits = dict(shape.limits.get("asm_limits") or {})
    steps_of = shape.steps_of

    @restriction(knobs=('lang', 'out', 'glsl', 'fetch', 'unroll',))
    def assembly_knobs(cfg: Config) -> bool:
        """assembly: the MRT path, glsl 330, its own fetch (arbfp texture, nvfp texelFetch), arbfp unroll full"""
        lang = cfg["lang"]
        return lang == "glsl" or (cfg["out"] == "mrt" and cfg["glsl"] == ASM_GLSL
                                  and cfg["fetch"] == ASM_FETCH[lang]
                                  and (lang != "arbfp" or cfg["unroll"] == "full"))

    # counted before the program is written (codegen.program_counts)
    @restriction(knobs=('lang', 'unroll', 'np', 'mc', 'mrt_h', 'mrt_w',))
    def assembly_limits(cfg: Config) -> bool:
        """the assembly program within the driver's limits (instructions, ALU, TEX, indirections, temps, params)"""
        lang = cfg["lang"]
        if lang == "glsl":
            return True
        counts = program_counts(lang, cfg["mc"], cfg["mrt_h"], cfg["mrt_w"], cfg["unroll"], steps_of(cfg))
        return not counts.over(asm_limits.get(lang, {}))

    return {"assembly_knobs": assembly_knobs, "assembly_limits": assembly_limits}
