#!/usr/bin/env python3
"""The knob reference, docs/knobs.md, printed from the tuning spaces themselves.

    scripts/knob-reference            # print the page
    scripts/knob-reference --write    # write docs/knobs.md
    scripts/knob-reference --check    # exit 1 if docs/knobs.md differs (tests/test_docs_knobs.py)

Domains, rules (each restriction's docstring, in the order the space checks
them, with the knobs it reads), phase plans, default configs, presets and space
sizes come from the code.  They depend on the problem and on the device's
limits, so the page is made for fixed reference problems on a fixed reference
device (below): the same page on every machine, whatever GPU it has.

What each knob does is the one thing written here (MEANINGS): the code has no
structured place for it.  The script refuses to print a page where a space has
a knob MEANINGS does not describe, or MEANINGS describes a knob no space has,
so a new knob cannot reach the page undescribed.
"""
from __future__ import annotations

import argparse
import difflib
import inspect
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shadertune.backends.cuda import api as cuda_api  # noqa: E402
from shadertune.backends.cuda.device import DEFAULT_LIMITS as CUDA_LIMITS  # noqa: E402
from shadertune.backends.cuda.space import make_space  # noqa: E402
from shadertune.backends.cuda.tuning import candidates  # noqa: E402
from shadertune.backends.gl import calls as gl_calls  # noqa: E402
from shadertune.backends.gl.image.space import REGISTER_BUDGET  # noqa: E402
from shadertune.backends.gl.space import (IMAGE_BODY_BUDGET, UNROLL_BUDGET,  # noqa: E402
                                          default_config as gl_default, gl_space)
from shadertune.core.problem import Problem  # noqa: E402

PAGE = ROOT / "docs" / "knobs.md"

# What the NVIDIA driver of an H200 reports (GL 4.5: image load/store, storage
# buffers), and a device with nothing past GL 3.3, for the GL pages.
GL_LIMITS = {"max_draw_buffers": 8, "max_texture_size": 32768, "max_texture_units": 32, "gl_version": 450,
             "image_store": True, "ssbo": True, "fbo_no_attachments": True, "max_image_units": 8,
             "max_fragment_image_uniforms": 8, "max_combined_output_resources": 16,
             "max_fragment_ssbo_blocks": 16, "max_ssbo_bindings": 16, "max_ssbo_bytes": 1 << 31,
             "compute": True, "max_compute_shared_bytes": 49152, "max_compute_invocations": 1024,
             "max_compute_groups": [2147483647, 65535, 65535], "max_texture_buffer_texels": 1 << 27,
             "subgroup_shuffle": True, "atomic_float": True, "compute_units": 132, "software_renderer": False}
GL33_LIMITS = {"max_draw_buffers": 8, "max_texture_size": 16384, "max_texture_units": 16, "gl_version": 330}
# What Mesa 22.3.6 llvmpipe reports in its compatibility-profile context (read on the dev
# machine, 2 cores): GL 4.5 and ARB_fragment_program with its program limits, so the page
# shows the assembly languages' rules (the H200's program limits are read by its driver at
# run time).
MESA_LIMITS = {"max_draw_buffers": 8, "max_texture_size": 16384, "max_texture_units": 32, "gl_version": 450,
               "software_renderer": True, "compat_profile": True,
               "asm_limits": {"arbfp": {"instructions": 1048576, "alu": 1048576, "tex": 1048576,
                                        "indirections": 1048576, "temporaries": 4096, "parameters": 2048}},
               "image_store": True, "ssbo": True, "fbo_no_attachments": True, "max_image_units": 192,
               "max_fragment_image_uniforms": 32, "max_combined_output_resources": 280,
               "max_fragment_ssbo_blocks": 16, "max_ssbo_bindings": 80, "max_ssbo_bytes": 134217728,
               "compute": True, "max_compute_shared_bytes": 32768, "max_compute_invocations": 1024,
               "max_compute_groups": [65535, 65535, 65535], "max_texture_buffer_texels": 134217728,
               "subgroup_shuffle": False, "atomic_float": True, "compute_units": 2}

GL_PROBLEM = Problem(1024, 1024, 1024)
GL_SMALL = Problem(64, 64, 64)
CUDA_PROBLEM = Problem(4096, 4096, 4096)
CUDA_SKINNY = Problem(2560, 16, 2560)
CUDA_F64 = Problem(4096, 4096, 4096, "float64")

MEANINGS = {
    "gl": {
        "out": "How a fragment writes C. `mrt`: Jiang's design, one C texel per render target, so at most "
               "max_draw_buffers x 4 outputs a fragment. `image`: a `block_h` x `block_w` block of C written "
               "with imageStore (GL 4.2 image load/store), bounded by registers instead of render targets.",
        "lang": "The compiler dimension of Jiang's search (he searched Cg's and fxc's profiles because the "
                "compiler lost to hand-written assembly): `glsl`, the GLSL kernel compiled by the driver; "
                "`arbfp`, ARB_fragment_program assembly generated from the same knobs (ARBfp1.0: no loops, "
                "so unroll is full; normalised TEX fetches, fetch=texture); `nvfp`, NVIDIA's "
                "NV_gpu_program4 assembly (REP loops, integer TXF fetches, fetch=texelFetch). Assembly "
                "writes the render-target path, needs a compatibility-profile context with the extension, "
                "and is bounded by the program limits the driver reports. The compute family: glsl.",
        "glsl": "The GLSL version the shader is compiled as: a profile of the GLSL compiler (`lang` is the "
                "compiler). The image path uses the one version the context compiles image code in; "
                "assembly holds 330 (no GLSL is compiled).",
        "fetch": "Texel addressing: `texelFetch` (integer coordinates) or `texture()` (normalised "
                 "coordinates): the stand-in for Jiang's *profile* knob (arbfp, fp30, fp40, ps2x). The image "
                 "path uses `texelFetch`; assembly its own instruction's kind (arbfp: texture, nvfp: "
                 "texelFetch).",
        "unroll": "k-steps per loop body within a pass (`full`: the whole pass as straight-line code), Jiang's "
                  "unroll. The image path allows 1, 2, 4.",
        "np": "k-values per pass, Jiang's np: passes = ceil(K / np). Between passes the partial sums "
              "ping-pong between two textures per render target (MRT) or are read, added to and rewritten "
              "in C's image (image path).",
        "mc": "The block of C one RGBA32F texel holds (Jiang's mc_h x mc_w channel use): a row of 1-4, or "
              "2x2. A and B are packed to match (1x4: four k of A per texel, four columns of B). Image path: "
              "1x4.",
        "mrt_h": "Height of the render-target grid: C is split into mrt_h x mrt_w sub-blocks, one per target, "
                 "and a fragment computes one texel of each. Image path: 1.",
        "mrt_w": "Width of the render-target grid (see mrt_h). Image path: 1.",
        "block_h": "Image path: the rows of C one fragment owns (strided, as render targets are). MRT path: 0.",
        "block_w": "Image path: the columns of C one fragment owns, whole texels of 4. MRT path: 0.",
        "a_src": "Image path: where A is read from, `texture` (texelFetch through the texture units) or "
                 "`ssbo` (a GL 4.3 storage buffer, through the load path beside them). MRT path: texture.",
        "b_src": "Image path: where B is read from (see a_src). MRT path: texture. Compute family: `ssbo` "
                 "or `texture`, the same buffer through a buffer texture.",
        "family": "The kind of kernel: `fragment` (fragment shaders: Jiang's render-target path and the image "
                  "path) or `compute` (GLSL 4.50 compute shaders on every SM; docs/compute.md). Each family "
                  "holds the other's knobs at fixed values.",
        "bm": "Compute family: rows of the block tile of C a workgroup computes. Fragment family: 0.",
        "bn": "Compute family: columns of the block tile. Fragment family: 0.",
        "bk": "Compute family: k-depth of one shared-memory stage. Fragment family: 0.",
        "tm": "Compute family: rows of C an invocation owns (4 x 4 fragments, strided by its group of 32). "
              "Fragment family: 0.",
        "tn": "Compute family: columns of C an invocation owns. Fragment family: 0.",
        "lanes_n": "Compute family: invocations of a group of 32 along N, the workgroup's shape (its groups "
                   "tile 32 / lanes_n x lanes_n invocations). Fragment family: 0.",
        "vec": "Compute family: floats a global load moves (it must divide the stored rows of A and B). "
               "Fragment family: 0.",
        "pad": "Compute family: floats padding a shared-memory row, against bank conflicts. Fragment family: 0.",
        "a_t": "Compute family: 1 stores A's slab k-major in shared memory (16-byte fragment reads; a slab "
               "that turns is loaded 4 rows at a time), 0 m-major. Fragment family: 0.",
        "db": "Compute family: 1 alternates two shared slabs with the next stage prefetched into registers, "
              "2 the same with the prefetch in two halves (each loaded before and stored after half of the "
              "stage's k-steps: half the registers wait across the FMAs), 0 one slab. Fragment family: 0.",
        "ks": "Compute family: workgroups splitting a pass's K (split-K across the grid), their partial "
              "tiles added into C by a reduce dispatch; only where the grid leaves units idle. Fragment "
              "family: 1.",
        "shuffle": "Compute family: 1 reads A's k-major fragment words once per group of lanes_n lanes (a "
                   "word a lane for 4 k-steps) and passes them by subgroupShuffle (GL_KHR_shader_subgroup, "
                   "subgroups of 32; a device without it has no such config), 0 every lane reads its own. "
                   "Fragment family: 0.",
        "skew": "Compute family: 1 shifts row r of a slab whose store turns by (r / vec) x a step of words, "
                "so a load group's transposed store hits distinct banks (with vec 2 or 4, in place of "
                "pad). Fragment family: 0.",
        "clamp": "Compute family: 1 loads without per-load checks: a row of A or column of B past the "
                 "matrix is read clamped (its products land in outputs nobody stores) and a stage wholly "
                 "inside K skips the k check; 0 checks every load and reads zero outside. Fragment family: 0.",
        "swz": "Compute family: tile rows of a strip of the workgroups' walk over C's tiles (1: row by row; "
               "8: strips 8 tiles tall walked column by column, for L2 reuse where the operands exceed an "
               "L2). Fragment family: 1.",
        "kred": "Compute family: 1 adds the splits of ks > 1 into C with float atomics "
                "(GL_NV_shader_atomic_float) after C is set to beta C, 0 through a workspace and a reduce "
                "dispatch. Fragment family: 0.",
    },
    "cuda": {
        "BM": "Rows of the block tile of C (Li-Dongarra's BM).",
        "BN": "Columns of the block tile of C (Li-Dongarra's BN).",
        "BK": "k-depth of one shared-memory stage (Li-Dongarra's BK).",
        "TM": "Rows of the per-thread register tile (FFMA kernel); the thread block is BM/TM x BN/TN "
              "threads before warp grouping and KL.",
        "TN": "Columns of the per-thread register tile (FFMA kernel).",
        "WM": "Rows of the warp tile: a warp's 32 lanes form a (WM/TM) x (WN/TN) grid (FFMA), a warp holds "
              "(WM/16) x (WN/8) mma fragments (mma.sync); wgmma: 64, a warpgroup's rows.",
        "WN": "Columns of the warp tile (wgmma: the instruction's N, at most 128).",
        "trans": "1: A's block is stored transposed (k-major) in shared memory, so that a thread reads its A "
                 "fragment with 16-byte loads.",
        "VEC": "Width of the global loads along the stored matrix's contiguous axis (elements).",
        "PAD": "Shared-memory row padding in elements, against bank conflicts.",
        "DB": "Double buffering: the next stage is prefetched from global memory into registers while the "
              "current one is computed, in two shared-memory stages.",
        "ST": "The cp.async pipeline (sm_80+): 0 = copies go through registers (DB as above); 2-4 = ST "
              "shared-memory stages, operands copied by cp.async ST - 1 stages ahead.",
        "KG": "Split-K across the grid (ISAAC's K_G): K is cut into KG balanced ranges on a 32-byte grain, "
              "partial sums go to a workspace.",
        "KL": "Split-K inside a block (ISAAC's K_L): KL thread groups take interleaved k-slices of a stage, "
              "reduced through shared memory.",
        "KR": "How the KG partial sums are reduced: 0 by a second small kernel; 1 in the same launch, by the "
              "last block of each C tile to finish (a fixed order, so the result is deterministic).",
        "MMA": "The kernel family: 0 FFMA (the SIMT kernel, `shaders/cuda/gemm.cu`); 1 float64 on the FP64 "
               "tensor cores (DMMA mma.sync .f64, m16n8k8 where two buffers of its fragments fit the registers, else m16n8k4, fragments in flight across the stage boundary, `gemm_dmma.cu`, sm_90+); 3 float32 from TF32 "
               "tensor cores, three mma.sync per product (3xTF32, `gemm_mma.cu`, sm_80+); 4 the same 3xTF32 "
               "through Hopper's warpgroup MMA (wgmma, `gemm_wgmma.cu`, sm_90a).",
        "AR": "Where the wgmma kernel (MMA = 4) reads A: 0 from its TF32 split in shared memory; 1 from "
              "registers (each warp loads its rows of the stored stage and splits them there, one stage "
              "ahead), so only B is split into shared memory: a third fewer shared-memory bytes per FMA "
              "and 2 x BK more registers (1.18x the best at 4096^3 on the H200).",
        "PS": "Pre-split operands (MMA = 4 with AR = 0, VEC = 1, no split-K, one product): a first kernel "
              "(`pack_split.cu`) splits A and B once into TF32 halves and packs them tile by tile in the "
              "layout the wgmma descriptors read; each stage of `gemm_wgmma_ps.cu` is then two bulk "
              "asynchronous copies (TMA's 1-D form) counted on an mbarrier, and no thread loads, splits "
              "or stores an operand. 1 adds each stage's sum to the float32 accumulators; 2 once every "
              "two stages (chains of 6 x BK/8 truncating tensor-core sums, half the pipeline drains). "
              "The pack costs 12 bytes of traffic per element of A and B and one launch.",
        "SK": "Stream-K (the tensor-core kernels, KG = 1, one product): 0 one block a tile; 1 or 2 a "
              "persistent grid of that many blocks a streaming multiprocessor, among which the output's "
              "tiles x k tiles are shared evenly, a block crossing tile boundaries "
              "(`shadertune/backends/cuda/streamk.py`, `shaders/cuda/streamk_*.cu`). A tile split between "
              "blocks is summed in the same launch by the last of them to finish, in block order "
              "(deterministic; no block waits for another). For outputs whose tiles do not fill whole "
              "waves of the GPU (a few tiles, or a last wave part-empty); costs a segment's pipeline fill "
              "where a block starts a new tile and the split tiles' partials through L2.",
    },
}


# --- formatting -------------------------------------------------------------------

def fmt_value(v) -> str:
    return str(v)


def fmt_domain(values) -> str:
    """A domain in its order; runs of 5 or more integers with one step are shortened
    to 'first-last by step' (np's domain has hundreds of values)."""
    vals = list(values)
    out, i = [], 0
    while i < len(vals):
        j = i
        if all(isinstance(v, int) and not isinstance(v, bool) for v in vals[i:i + 2]) and i + 1 < len(vals):
            step = vals[i + 1] - vals[i]
            while (j + 1 < len(vals) and isinstance(vals[j + 1], int)
                   and not isinstance(vals[j + 1], bool) and vals[j + 1] - vals[j] == step and step > 0):
                j += 1
        if j - i >= 4:
            out.append(f"{vals[i]}-{vals[j]} by {step}")
            i = j + 1
        else:
            out.append(fmt_value(vals[i]))
            i += 1
    return ", ".join(out)


def fmt_config(cfg) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(dict(cfg).items()))


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def reads(rule, space) -> str:
    """The knobs a restriction reads, as the space compiles it (space.py): an expression
    names them; a callable whose parameters are knobs and constants reads those; a
    callable taking one config reads the whole config."""
    if isinstance(rule, str):
        return ", ".join(k for k in space.knobs if k in rule) or "-"
    declared = getattr(rule, "knobs", None)
    if declared is not None:
        return ", ".join(declared)
    params = list(inspect.signature(rule).parameters)
    names = set(space.knobs) | set(space.constants)
    if params and all(p in names for p in params):
        return ", ".join(p for p in params if p in space.knobs)
    return "the whole config"


def rule_text(rule) -> str:
    if isinstance(rule, str):
        return f"`{rule}`"
    return " ".join((rule.__doc__ or rule.__name__).split())


def rule_name(rule) -> str:
    return "(expression)" if isinstance(rule, str) else f"`{rule.__name__}`"


def domain_table(spaces: list[tuple[str, object]], meanings: dict) -> list[str]:
    heads = [label for label, _ in spaces]
    lines = ["| knob | " + " | ".join(heads) + " | what it does |",
             "|---|" + "---|" * len(heads) + "---|"]
    knobs = list(spaces[0][1].knobs)
    for k in knobs:
        doms = [cell(fmt_domain(s.knobs[k])) for _, s in spaces]
        lines.append(f"| `{k}` | " + " | ".join(doms) + f" | {cell(meanings[k])} |")
    return lines


def rules_table(space) -> list[str]:
    lines = ["| rule | reads | a valid config meets |", "|---|---|---|"]
    for r in space.restrictions:
        lines.append(f"| {rule_name(r)} | {cell(reads(r, space))} | {cell(rule_text(r))} |")
    return lines


def phase_lines(plan) -> list[str]:
    groups = ", then ".join("(" + ", ".join(g) + ")" for g in plan.groups)
    out = []
    if plan.outer:
        out.append(f"- outer knobs, enumerated in full (first outermost): {', '.join(plan.outer)}")
    if plan.refine:
        out.append(f"- refine knob (its powers of two, then refined recursively around the best): "
                   f"{plan.refine}")
    out.append(f"- groups, each searched jointly in turn: {groups}")
    if plan.start is not None:
        out.append(f"- start: `{fmt_config(plan.start)}`")
    return out


def check_meanings(backend: str, space) -> None:
    have, described = set(space.knobs), set(MEANINGS[backend])
    if have != described:
        raise SystemExit(f"knob-reference: MEANINGS[{backend!r}] is out of date: "
                         f"undescribed knobs {sorted(have - described)}, "
                         f"described knobs the space lacks {sorted(described - have)}")


# --- the page -------------------------------------------------------------------

def gl_section() -> list[str]:
    big = gl_space(GL_PROBLEM, GL_LIMITS)
    small = gl_space(GL_SMALL, GL_LIMITS)
    old = gl_space(GL_PROBLEM, GL33_LIMITS)
    mesa = gl_space(GL_PROBLEM, MESA_LIMITS)
    check_meanings("gl", big)
    default = gl_default(GL_PROBLEM, big)
    n = len(big)
    lines = [
        "## GL (fragment and compute shaders)",
        "",
        "Two kernel families, chosen by `family`, make one space (a union: `shadertune.core.space.UnionSpace`, "
        "each family's part enumerated on its own). The fragment family has two output paths: "
        "`out=mrt` is Jiang's multi-render-target kernel (`shaders/gl/matmul.frag.j2`), `out=image` "
        "writes a block of C with imageStore (`shaders/gl/matmul_image.frag.j2`). The compute family "
        "(`out=buffer`, `shaders/gl/matmul_compute.comp.j2`, docs/compute.md) is a register-blocked "
        "GEMM in compute shaders. Each family and path holds the others' knobs at one value, so no "
        "kernel appears twice. A config that leaves out `family`, `out`, `block_h`, `block_w`, `a_src`, "
        "`b_src` and the compute knobs (written before they existed) is an MRT config.",
        "",
        "`lang` chooses the language a render-target kernel is written in: GLSL, or assembly generated "
        "from the same knobs (`shaders/gl/matmul.arbfp.j2`, `shaders/gl/matmul.nvfp.j2`), run by the same "
        "driver; a config written before the knob existed is a GLSL one.",
        "",
        f"Domains for {GL_SMALL.M}^3 and {GL_PROBLEM.M}^3 float32 on a GL 4.5 device with image "
        f"load/store and storage buffers (an H200's limits, its assembly program limits left out: its "
        f"driver reports them at run time), for {GL_PROBLEM.M}^3 on a device "
        "with nothing past GL 3.3 (the image path and storage-buffer sources drop out), and on Mesa "
        "llvmpipe's compatibility profile (ARB_fragment_program with the limits it reports):",
        "",
        *domain_table([(f"{GL_SMALL.M}^3", small), (f"{GL_PROBLEM.M}^3", big),
                       (f"{GL_PROBLEM.M}^3, GL 3.3", old), (f"{GL_PROBLEM.M}^3, Mesa", mesa)],
                      MEANINGS["gl"]),
        "",
        f"At {GL_PROBLEM.M}^3 on the GL 4.5 device the rules leave **{n:,}** of the "
        f"{big.full_size:,} points of the product.",
        "",
        "### Rules (pruning before anything compiles)",
        "",
        "Checked in this order (`Space.why_invalid` names the first one a config breaks). The "
        "enumeration checks each rule as soon as the knobs it reads are bound (a rule that reads the "
        "whole config, on whole configs only).",
        "",
        "The fragment family's (on Mesa's limits, so that the assembly languages' rules show):",
        "",
        *rules_table(mesa.parts["fragment"][0]),
        "",
        "The compute family's (`shadertune/backends/gl/compute/space.py`; its part also holds the "
        "fragment family's own knobs at fixed values: " + fmt_config(big.parts["compute"][1]) + "):",
        "",
        *rules_table(big.parts["compute"][0]),
        "",
        "The budgets behind the rules (`shadertune/backends/gl/space.py`, the image block's in "
        "`image/space.py`): the MRT path's unrolled loop "
        f"body (steps x render targets) is at most {UNROLL_BUDGET} (`UNROLL_BUDGET`), the image path's "
        f"(steps x block_h x block_w x 4 FMAs) at most {IMAGE_BODY_BUDGET} (`IMAGE_BODY_BUDGET`), and an "
        f"image block holds at most {REGISTER_BUDGET} accumulators (`REGISTER_BUDGET`); notes/gl.md has "
        "the measurements they come from. An ARBfp program is bounded by the driver's program limits "
        "alone (no loops: its whole pass is one body), counted before it is written "
        "(`asm/codegen.program_counts`). The device limits of the GL 4.5 reference device: "
        + ", ".join(f"{k} = {v}" for k, v in GL_LIMITS.items()) + "; Mesa's program limits: "
        + ", ".join(f"{k} = {v}" for k, v in MESA_LIMITS["asm_limits"]["arbfp"].items()) + ".",
        "",
        "### Phased order",
        "",
        "One plan a family (`PhasePlan(branch=\"family\")`, `search/phased.py`), the family that runs "
        "faster on the device first (a GPU: compute; a software renderer: fragment): its best is the "
        "bar the other family's configs race against. The compute family (notes/gl.md has the "
        "measurements behind the order):",
        "",
        *phase_lines(big.phases.plan_for("compute")),
        "",
        "The fragment family, Jiang's order with the output path in front and the language (his "
        "compiler) next:",
        "",
        *phase_lines(big.phases.plan_for("fragment")),
        "",
        "Each combination of the outer knobs starts from the best config so far with its outer values "
        "put in; the image path's first combination starts from its first valid config in domain order "
        "(the domains are ordered for it: a 16 x 8 block, A from a texture, B from a storage buffer), "
        "the MRT path's first from the plan's start, the MRT path's default config. On one path the other path's "
        "groups hold one valid point, so they cost nothing.",
        "",
        f"### Default config and presets at {GL_PROBLEM.M}^3",
        "",
        f"- default (what `matmul` runs untuned, and `config=\"fast\"`): `{fmt_config(default)}`",
    ]
    for name, what in gl_calls.PRESETS.items():
        if name == "fast":
            continue
        lines.append(f"- `{name}`: {what}: `{fmt_config(gl_calls.preset_config(name, GL_PROBLEM))}` "
                     "(the image-path knobs at their MRT values)")
    return lines


def cuda_section() -> list[str]:
    big = make_space(CUDA_PROBLEM, CUDA_LIMITS)
    skinny = make_space(CUDA_SKINNY, CUDA_LIMITS)
    f64 = make_space(CUDA_F64, CUDA_LIMITS)
    check_meanings("cuda", big)
    first = candidates(CUDA_PROBLEM, big, CUDA_LIMITS, 1)
    n = len(big)
    p = CUDA_SKINNY
    lines = [
        "## CUDA (generated GEMM kernels)",
        "",
        "One space over three kernel families (`MMA`). The tensor-core kernels hold the FFMA-only "
        "knobs at one canonical value each (see the rules). Configs stored before a knob existed are "
        f"read with its old meaning (`KNOB_DEFAULTS`: ST = 0, MMA = 0).",
        "",
        f"Domains for {CUDA_PROBLEM.M}^3 float32, {p.M}x{p.N}x{p.K} float32 (a skinny problem: "
        f"tiles no larger than the problem needs) and {CUDA_F64.M}^3 float64, on sm_90 "
        f"({CUDA_LIMITS['num_sms']} SMs, {CUDA_LIMITS['max_smem_per_block_optin'] // 1024} KB of shared "
        "memory per block, the H100/H200 defaults the backend uses without a GPU):",
        "",
        *domain_table([(f"{CUDA_PROBLEM.M}^3", big), (f"{p.M}x{p.N}x{p.K}", skinny),
                       (f"{CUDA_F64.M}^3 float64", f64)], MEANINGS["cuda"]),
        "",
        f"At {CUDA_PROBLEM.M}^3 float32 the rules leave **{n:,}** of the {big.full_size:,} points of "
        "the product.",
        "",
        "### Rules (pruning before anything compiles)",
        "",
        "The enumeration checks each rule as soon as the knobs it reads are bound and cuts the subtree "
        "below a failure (a rule that reads the whole config, on whole configs only). `FV` is the "
        "elements of one "
        "16-byte fragment (4 in float32, 2 in float64). The device limits of the reference device: "
        + ", ".join(f"{k} = {v}" for k, v in CUDA_LIMITS.items()) + ". Checked in this order:",
        "",
        *rules_table(big),
        "",
        "### Phased order",
        "",
        *phase_lines(big.phases),
        "- start: the default config below (`CUDABackend.space` sets it), never a walk of the product "
        "for a first valid point",
        "",
        "The CUDA backend's default strategy is `model` (its cost model ranks the space; "
        "docs/search.md).",
        "",
        f"### Default config and presets at {CUDA_PROBLEM.M}^3 float32",
        "",
        "- default (the first of the cost model's curated candidates; what `matmul` runs untuned, and "
        f"`config=\"fast\"`): `{fmt_config(first[0])}`" if first else "- default: none (empty space)",
    ]
    for name, what in cuda_api.PRESETS.items():
        if name != "fast":
            lines.append(f"- `{name}`: {what}")
    return lines


def page() -> str:
    lines = [
        "<!-- Generated by scripts/knob-reference from the tuning spaces; do not edit by hand: "
        "run `scripts/knob-reference --write`. tests/test_docs_knobs.py fails when it is out of date. -->",
        "",
        "# Knob reference",
        "",
        "A config is one value for every knob of a backend's space (`shadertune.Config`). The domains "
        "depend on the problem (shape, dtype, transposes) and on the device's limits, read at run time; "
        "the rules (restrictions) prune the product of the domains before anything is compiled. This "
        "page shows them for reference problems and devices; for your own:",
        "",
        "```",
        "python -m shadertune.codegen --backend gl --size 1024 --list-knobs      # domains and default here",
        "python -m shadertune.codegen --backend gl --size 1024 --list-space      # every valid config (JSON lines)",
        "python -m shadertune.codegen --backend cuda --size 4096 --list-knobs",
        "```",
        "",
        "`matmul(config=...)` and `codegen --KNOB VALUE` take any subset of the knobs; the rest come from "
        "the default config (docs/semantics.md, \"config\"). How the search walks these spaces: "
        "docs/search.md; where the knobs come from: docs/references.md.",
        "",
        *gl_section(),
        "",
        *cuda_section(),
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/knob-reference", description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true",
                      help=f"exit 1 (with a diff) if {PAGE.relative_to(ROOT)} is not what this prints")
    args = ap.parse_args(argv)
    text = page()
    if args.write:
        PAGE.write_text(text)
        print(f"wrote {PAGE.relative_to(ROOT)}")
        return 0
    if args.check:
        old = PAGE.read_text() if PAGE.exists() else ""
        if old == text:
            return 0
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                   str(PAGE.relative_to(ROOT)), "scripts/knob-reference"))
        print(f"\n{PAGE.relative_to(ROOT)} is out of date: run scripts/knob-reference --write",
              file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
