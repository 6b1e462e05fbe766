"""The GL knob space, the shared knob module: the union of the families (the compute
family's own space, compute/space.py, and the fragment family's, composed here from
its paths' parts), the fragment family's knob table, the values a path's configs
hold the knobs it lacks at, and the defaults.

The fragment family (Jiang's, and the image path past its 32-output wall):

Knobs:
- out: how a fragment writes its outputs.  'mrt' is Jiang's design: one C texel
  per render target, at most max_draw_buffers x 4 outputs; 'image' writes a
  block of C with imageStore (GL 4.2 / ARB_shader_image_load_store), so the
  block is bounded by registers, not by render targets (image/layout.py).
- lang: the language of a render-target kernel, Jiang's 'compiler': 'glsl', or
  assembly generated from the same knobs, 'arbfp' (ARB_fragment_program) or
  'nvfp' (NV_gpu_program4), where the context runs it (asm/codegen.py).
- glsl (the GLSL version, a profile of the GLSL compiler), fetch (the 'profile'
  stand-in: texelFetch or normalised texture()), unroll, np: as Jiang's.
- mc, mrt_h, mrt_w: the MRT path's blocking (channel use x render-target grid).
- block_h, block_w: the C rows x columns one fragment owns on the image path.
- a_src, b_src: where the image path reads A and B: 'texture' (texelFetch through
  the texture units) or 'ssbo' (a storage buffer, GL 4.3, through the load path).

Each path fixes the other's knobs to one value, so no kernel appears twice:
the MRT path has block_h = block_w = 0 and texture operands; the image path
has mc = 1x4 on a 1x1 target grid (its operands are row-major, 4 floats a
texel), texelFetch (the normalised texture() only adds address arithmetic),
the one GLSL version the context compiles image code in, and unroll <= 4 (a
step of a large block is already hundreds of FMAs).  Assembly writes the
render-target path only and holds glsl at 330 and fetch at its texture
instruction's kind; ARBfp has no loops, so its unroll is 'full' and its pass
is bounded by the driver's program limits instead of the unroll budget.

Pruning, before anything compiles: device limits read at run time (draw
buffers, texture size and units; for the image path image load/store, storage
buffers, a framebuffer without attachments, image units and uniforms, storage
blocks, bindings and block size: where one is missing, the image path or the
ssbo source drops out of the domains; the assembly languages and their program
limits), the shape (np <= K, no render target or block row made only of
padding) and budgets for unrolled code and registers.  The rules that hold
for one path live in its folder (KernelPath.rules: mrt/space.py, image/space.py,
asm/space.py); the ones here relate the paths' knobs or hold on every path.

Phased order (Jiang's, with the path in front and the language, his compiler,
next): for each out (image first), lang, glsl, fetch, unroll: np over powers of
two, then mc, then the MRT grid, then the image block, then the operand sources,
then np refined recursively.  On one
path the other path's groups hold one valid point, so they cost nothing.  The
image path goes first because its best config is the bar every later config
races against: MRT configs slower than 1.5x that bar are abandoned after their
first passes (search/evaluate.py), which keeps the complete tune short.  Start
points: later combinations of a path start from the best config so far; the
image path's first one from its first valid config in domain order (the
domains are ordered for that: a 16 x 8 block, B from a storage buffer, the
smallest np, which the np phase then sweeps), the MRT path's first one from the
plan's start, the default config (an MRT config), since the best config so far
is an image config then.
"""
from __future__ import annotations

from ...core.config import Config
from ...core.problem import Problem
from ...core.space import PhasePlan, Space, UnionSpace, restriction
from .asm.space import ASM_FETCH, ASM_GLSL, ASM_LANGS, langs as asm_langs
from .compute.space import COMPUTE_KNOBS, compute_candidates
from .fragment import FETCH_STYLES, GLSL_VERSIONS, UNROLLS
from .image.layout import ImageLayout
from .image.space import (A_SOURCES, B_SOURCES, BLOCK_COLS, BLOCK_ROWS, IMAGE_DEFAULTS, IMAGE_UNROLLS, image_glsl,
                          image_path_available, ssbo_sources)
from .mrt.layout import MC_SHAPES, Layout, packing, pass_depth
from .mrt.space import MRT_SIDES
from .paths import PATHS

OUTS = ("image", "mrt")
# Unrolled body budget (MRT): (steps per loop body) x (render targets), a proxy for
# the instruction count of the generated loop body: past it, compiles take seconds
# and the kernel runs many times slower (notes/gl.md has the measurement).
UNROLL_BUDGET = 128
# The image path's loop body in scalar FMAs (steps x block_h x block_w x 4): the MRT
# budget's 128 steps x targets of a 1x4 target, 16 FMAs each.
IMAGE_BODY_BUDGET = UNROLL_BUDGET * 16

# What a path's configs hold the knobs it lacks at (each path fixes the other's knobs
# to one value, so no kernel appears twice): the image path's knobs off it (on the
# render-target paths), the render-target grid on it, and the fragment family's own
# knobs on another family's configs (beside what that family fixes itself:
# KernelPath.fixed).
IMAGE_OFF = {"block_h": 0, "block_w": 0, "a_src": "texture", "b_src": "texture"}
RENDER_TARGETS_ON_IMAGE = {"mc": "1x4", "mrt_h": 1, "mrt_w": 1}
FRAGMENT_OFF = {"fetch": "texelFetch", "mc": "1x4", "mrt_h": 1, "mrt_w": 1, "block_h": 0, "block_w": 0,
                "lang": "glsl"}
# The families of their own (a path with a space of its own: KernelPath.space), and
# what each family's configs hold every knob it lacks at: what the path fixes itself,
# and the fragment family's knobs off.
FAMILY_PATHS = tuple(p for p in PATHS if p.space is not None)
FAMILY_HELD = {p.family: {**p.fixed, **{k: v for k, v in FRAGMENT_OFF.items() if k not in p.fixed}}
               for p in FAMILY_PATHS}
FRAGMENT_PATHS = tuple(p for p in PATHS if p.family == "fragment")
# The other families' knobs on a fragment config (what "absent" means, for stored
# configs written before the compute family existed too).
FRAGMENT_VALUES = {"family": "fragment", **{k: v for p in FAMILY_PATHS for k, v in p.off.items()}}

FRAGMENT_PHASES = PhasePlan(outer=("out", "lang", "glsl", "fetch", "unroll"), refine="np",
                            groups=(("mc",), ("mrt_h", "mrt_w"), ("block_h", "block_w"), ("a_src", "b_src")))
# The families in turn, each in its own order; gl_space puts the family that runs
# faster on the device first (a GPU: compute; a software renderer: fragment), so that
# its best is the bar the other family's configs race against.
PHASES = PhasePlan(branch="family", branches=(*((p.family, p.phases) for p in FAMILY_PATHS),
                                              ("fragment", FRAGMENT_PHASES)))

# What a config that leaves out knobs means (configs stored and written before the
# image path or the compute family existed): Jiang's MRT path in the fragment family.
MRT_DEFAULTS = {"out": "mrt", **IMAGE_OFF, "lang": "glsl", **FRAGMENT_VALUES}


def with_defaults(config) -> Config:
    """`config` in its canonical form, every GL knob named: the knobs it leaves out set
    to the MRT path's values (configs written before the image path, the compute family
    or the assembly languages existed); a config of the compute family gets the
    fragment knobs its family holds (FAMILY_HELD: `lang` was added after the family)
    and must name its own knobs.  GLBackend.canonical_config: the store and every
    search keep configs in this form, so one kernel is one config."""
    cfg = config if isinstance(config, Config) else Config(config)
    held = FAMILY_HELD.get(cfg.get("family"), MRT_DEFAULTS)
    missing = {k: v for k, v in held.items() if k not in cfg}
    return cfg.replace(**missing) if missing else cfg


class GLSpace(UnionSpace):
    """The GL space: the compute family's and the fragment family's configs (a union
    over `family`); a config without the image-path or compute knobs is read as an
    MRT config of the fragment family."""

    def why_invalid(self, cfg) -> str | None:
        return super().why_invalid(with_defaults(cfg))

    def canonical(self, cfg) -> Config:
        return super().canonical(with_defaults(cfg))


def np_values(K: int) -> list[int]:
    """np domain: every even value up to 64, then 16 evenly spaced values per
    octave (so recursive refinement around any power of two has room), and
    K rounded up to 4 (one pass)."""
    kpad = -(-K // 4) * 4
    vals = set(range(2, min(64, kpad) + 1, 2))
    lo = 64
    while lo < kpad:
        step = max(4, lo // 16)
        vals.update(range(lo, min(2 * lo, kpad) + 1, step))
        lo *= 2
    vals.add(kpad)
    if K % 2 == 0 and K < kpad:
        vals.add(K)
    return sorted(v for v in vals if v <= kpad)


def _steps(cfg, K: int) -> int:
    """A-texel steps of a pass as the layout, and so the code generator, counts them:
    np clamped to K first (layout.pass_depth; with mc 2x2, np 32 and K 30 a pass
    has 15 steps, not 16)."""
    ka = packing(cfg["mc"])[2]
    return pass_depth(int(cfg["np"]), max(K, 1), ka) // ka     # K = 0 runs no pass


def _body_steps(cfg, K: int) -> int:
    u = cfg["unroll"]
    return _steps(cfg, K) if u == "full" else int(u)


def _memoised(fn):
    """fn with its result kept per argument tuple.  A closure over a dict rather than
    functools.lru_cache: the space's rules hold it, and a space must pickle (a
    cluster's worker sends it to the coordinator; an lru_cache of a local function
    does not pickle)."""
    kept: dict = {}

    def memo(*args):
        if args not in kept:
            kept[args] = fn(*args)
        return kept[args]
    return memo


def gl_space(problem: Problem, limits: dict) -> GLSpace:
    """The GL space of `problem` on a device with `limits`: where the device has GL 4.5
    compute shaders the compute family, and for single products (batch 1) the
    fragment family (Jiang's render-target path, the image path and assembly)."""
    parts = []
    for path in FAMILY_PATHS:
        own = path.space(problem, limits)
        if own is not None:
            parts.append((path.family, own, FAMILY_HELD[path.family]))
    if problem.batch == 1:
        fragment = ("fragment", fragment_space(problem, limits),
                    {k: v for k, v in FRAGMENT_VALUES.items() if k != "family"})
        # the family that runs faster on this kind of device first (default_config's rule):
        # the phased search walks it first, and its best is the bar the other races against
        parts.insert(0 if limits.get("software_renderer") else len(parts), fragment)
    if not parts:
        raise ValueError(f"the GL backend runs stacked products ({problem.key}) in one dispatch of "
                         "the compute family, which needs GL 4.5 compute shaders; this device has none")
    # knobs and values read in the fragment family's order (Jiang's knobs first)
    space = GLSpace("family", parts, domain_order=("fragment", *(p.family for p in FAMILY_PATHS)))
    plan = PHASES
    if problem.batch == 1:
        plan = plan.starting_at(mrt_default_config(problem, space))
    for path in FAMILY_PATHS:
        start = path.candidates(problem, space)[:1] if path.family in space.parts else []
        if start:
            plan = plan.starting_at(start[0])
    space.phases = plan
    return space


class FragmentShape:
    """What the fragment family's rules read of a problem and a device: the sizes, the
    limits, and the layouts of the configs (kept per blocking: several rules and every
    glsl / fetch / unroll value share one)."""

    def __init__(self, problem: Problem, limits: dict):
        M, N, K = self.M, self.N, self.K = problem.M, problem.N, problem.K
        self.limits = limits
        self.layout = _memoised(lambda mc, mrt_h, mrt_w, np_: Layout.plan(M, N, K, mc=mc, mrt_h=mrt_h,
                                                                           mrt_w=mrt_w, np=np_))
        self.image_layout = _memoised(lambda rows, cols, np_: ImageLayout.plan(M, N, K, rows=rows, cols=cols,
                                                                               np=np_))

    def layout_of(self, cfg: Config) -> Layout:
        return self.layout(cfg["mc"], cfg["mrt_h"], cfg["mrt_w"], cfg["np"])

    def image_layout_of(self, cfg: Config) -> ImageLayout:
        return self.image_layout(cfg["block_h"], cfg["block_w"], cfg["np"])

    def steps_of(self, cfg: Config) -> int:
        return _steps(cfg, self.K)


# The fragment family's rules in the order the space checks them (the enumeration's
# binding order follows from it): the family's own here, the paths' (KernelPath.rules)
# by name; a rule a path adds that is not named here comes after, in registry order.
FRAGMENT_RULES = ("mrt_path_knobs", "image_path_knobs", "assembly_knobs", "draw_buffers", "glsl_version",
                  "texture_units", "np_within_k", "np_fits_packing", "unroll_divides_pass", "unroll_budget",
                  "assembly_limits", "register_budget", "ssbo_fits", "targets_hold_data", "textures_fit")


def fragment_space(problem: Problem, limits: dict) -> Space:
    """The fragment family's knobs and rules (the module docstring): its knob table
    here, each path's own rules from its folder."""
    M, N, K = problem.M, problem.N, problem.K
    kpad = -(-K // 4) * 4
    max_tex = int(limits.get("max_texture_size", 4096))
    images = image_path_available(limits)
    n_ssbo = ssbo_sources(limits) if images else 0
    glsl_image = image_glsl(limits)
    gl_version = int(limits.get("gl_version", 330))
    shape = FragmentShape(problem, limits)
    layout_of, image_layout_of = shape.layout_of, shape.image_layout_of

    # restrictions are functions that declare the knobs they read (checked as soon as
    # those are bound); each docstring is the message when it fails
    @restriction(knobs=('out', *IMAGE_OFF))
    def mrt_path_knobs(cfg: Config) -> bool:
        """the MRT path reads textures and owns no image block"""
        return cfg["out"] == "image" or all(cfg[k] == v for k, v in IMAGE_OFF.items())

    @restriction(knobs=('out', 'block_h', 'block_w', *RENDER_TARGETS_ON_IMAGE, 'fetch', 'glsl', 'unroll',))
    def image_path_knobs(cfg: Config) -> bool:
        """the image path: a block of rows x columns, 1x4 texels on one target, texelFetch,
        the device's image GLSL version, unroll <= 4"""
        return cfg["out"] == "mrt" or (
            cfg["block_h"] > 0 and cfg["block_w"] > 0
            and all(cfg[k] == v for k, v in RENDER_TARGETS_ON_IMAGE.items()) and cfg["fetch"] == "texelFetch"
            and cfg["glsl"] == glsl_image and cfg["unroll"] in IMAGE_UNROLLS)

    @restriction(knobs=('glsl',))
    def glsl_version(cfg: Config) -> bool:
        """int(glsl) <= gl_version"""
        return int(cfg["glsl"]) <= gl_version

    @restriction(knobs=('np',))
    def np_within_k(cfg: Config) -> bool:
        """np <= K rounded up to 4"""
        return cfg["np"] <= kpad

    @restriction(knobs=('np', 'mc',))
    def np_fits_packing(cfg: Config) -> bool:
        """np is a whole number of A texels (4 k for 1xN, 2 k for 2x2)"""
        return int(cfg["np"]) % packing(cfg["mc"])[2] == 0

    @restriction(knobs=('unroll', 'np', 'mc',))
    def unroll_divides_pass(cfg: Config) -> bool:
        """unroll < steps per pass and divides them (a larger factor is 'full')"""
        u = cfg["unroll"]
        s = _steps(cfg, K)
        return u == "full" or (u < s and s % u == 0) or (u == 1 and s == 1)

    @restriction(knobs=('out', 'lang', 'unroll', 'np', 'mc', 'block_h', 'block_w', 'mrt_h', 'mrt_w',))
    def unroll_budget(cfg: Config) -> bool:
        """unrolled loop body within the instruction budget (ARBfp: the driver's limits)"""
        if cfg["lang"] == "arbfp":
            return True
        if cfg["out"] == "image":
            return _body_steps(cfg, K) * cfg["block_h"] * cfg["block_w"] * 4 <= IMAGE_BODY_BUDGET
        return _body_steps(cfg, K) * cfg["mrt_h"] * cfg["mrt_w"] <= UNROLL_BUDGET

    @restriction(knobs=('out', 'block_h', 'block_w', 'np', 'mc', 'mrt_h', 'mrt_w',))
    def targets_hold_data(cfg: Config) -> bool:
        """every render target (image path: block row / column group) holds some of C"""
        if cfg["out"] == "image":
            L = image_layout_of(cfg)
            return (L.rows - 1) * L.hc < M and (L.col_texels - 1) * L.wc < L.NB
        L = layout_of(cfg)
        return (L.mrt_h - 1) * L.hc * L.mc_h < M and (L.mrt_w - 1) * L.wc * L.mc_w < N

    @restriction(knobs=('out', 'block_h', 'block_w', 'np', 'mc', 'mrt_h', 'mrt_w',))
    def textures_fit(cfg: Config) -> bool:
        """every texture within the device's max texture size"""
        L = image_layout_of(cfg) if cfg["out"] == "image" else layout_of(cfg)
        return L.largest_texture() <= max_tex

    knobs = {
        "out": OUTS if images else ("mrt",),
        "lang": asm_langs(limits),
        "glsl": GLSL_VERSIONS,
        "fetch": FETCH_STYLES,
        "unroll": UNROLLS,
        "np": np_values(max(K, 1)),
        "mc": tuple(MC_SHAPES),
        "mrt_h": MRT_SIDES,
        "mrt_w": MRT_SIDES,
        "block_h": (0,) + (BLOCK_ROWS if images else ()),
        "block_w": (0,) + (BLOCK_COLS if images else ()),
        "a_src": A_SOURCES if n_ssbo else ("texture",),
        "b_src": B_SOURCES if n_ssbo else ("texture",),
    }
    rules = {"mrt_path_knobs": mrt_path_knobs, "image_path_knobs": image_path_knobs,
             "glsl_version": glsl_version, "np_within_k": np_within_k, "np_fits_packing": np_fits_packing,
             "unroll_divides_pass": unroll_divides_pass, "unroll_budget": unroll_budget,
             "targets_hold_data": targets_hold_data, "textures_fit": textures_fit}
    for path in FRAGMENT_PATHS:
        rules.update(path.rules(shape))
    restrictions = [rules.pop(name) for name in FRAGMENT_RULES] + list(rules.values())
    constants = {"max_draw_buffers": int(limits.get("max_draw_buffers", 8)), "gl_version": gl_version,
                 "max_texture_units": int(limits.get("max_texture_units", 16)),
                 "kpad": kpad, "M": M, "N": N, "K": K, "image_glsl": glsl_image}
    return Space(knobs, restrictions, constants)


# Knobs only the MRT path has: a partial config that names one is completed from the
# MRT path's default, not from an image-path default.
MRT_ONLY_KNOBS = ("mc", "mrt_h", "mrt_w")


def default_config(problem: Problem, space: Space) -> Config:
    """What matmul runs untuned: the compute family's default where the device has it
    and is a GPU (compute/space.compute_candidates; on the H200 the compute family runs
    on every SM, the fragment family on 4 of 132), else the fragment family's: a software
    renderer runs fragment shaders faster than compute shaders that share memory and
    wait at barriers (llvmpipe at 256: the best fragment config 8.2 GFLOP/s, the best
    compute config 4.8; notes/gl.md), and stacked products are the compute family's."""
    software = space.constants.get("software_renderer", False)
    if "compute" in space.parts and (not software or "fragment" not in space.parts):
        first = compute_default_config(problem, space)
        if first is not None:
            return first
    return fragment_default_config(problem, space)


def compute_default_config(problem: Problem, space: Space) -> Config | None:
    """The compute family's default: its first candidate (compute/space.compute_candidates),
    None where the space has no compute config of the default shapes."""
    first = compute_candidates(problem, space)[:1] if "compute" in space.parts else []
    return first[0] if first else None


def fragment_default_config(problem: Problem, space: Space) -> Config:
    """The fragment family's default.  Where the device has the image path (GL 4.3 or
    the extensions): a 16 x 8 block per fragment through imageStore, A from a texture,
    B from a storage buffer, passes of up to 1024 k (on the H200 the phased search's
    pick at 1024 and 4096, 1.6-1.9x the best render-target config; notes/gl.md),
    falling back to smaller blocks; else, and where no image config fits the product,
    Jiang's path (mrt_default_config)."""
    glsl = space.constants.get("image_glsl")
    if glsl and "image" in space.knobs.get("out", ()):
        kpad = -(-max(problem.K, 1) // 4) * 4
        for rows, cols, b_src in IMAGE_DEFAULTS:
            cfg = with_defaults(Config(out="image", glsl=glsl, fetch="texelFetch", unroll=1,
                                       np=min(1024, kpad), mc="1x4", mrt_h=1, mrt_w=1,
                                       block_h=rows, block_w=cols, a_src="texture", b_src=b_src))
            if cfg in space:
                return cfg
    return mrt_default_config(problem, space)


# Knobs only the fragment family has: a partial config naming one is completed from a
# fragment default (one naming a compute knob, compute/space.COMPUTE_KNOBS, from the
# compute family's).
FRAGMENT_ONLY_KNOBS = ("mc", "mrt_h", "mrt_w", "block_h", "block_w", "fetch")


def default_for(problem: Problem, space: Space, given) -> Config:
    """The default a partial config is completed from: the family's default where the
    knobs given name a family (family=, or a knob only one family has), else the
    default.  In the fragment family: the MRT path's where the knobs given name that
    path (out=mrt, or mc / mrt_h / mrt_w) or do not fit the image-path default (glsl
    330, unroll 8, np 2, ...), else the fragment default; an assembly language's (lang=
    arbfp, nvfp) where the knobs given name one."""
    family = given.get("family")
    if family is None:
        if given.get("out") in ("mrt", "image") or any(k in given for k in FRAGMENT_ONLY_KNOBS):
            family = "fragment"
        elif given.get("out") == "buffer" or any(k in given for k in COMPUTE_KNOBS):
            family = "compute"
    if family == "compute":
        return compute_default_config(problem, space) or default_config(problem, space)
    if "fragment" not in space.parts:
        return default_config(problem, space)      # the knobs given then say what is wrong
    if family is None:
        default = default_config(problem, space)
        if Config({**default.to_dict(), **given}) in space:
            return default
    if given.get("lang") in ASM_LANGS:
        return mrt_default_config(problem, space, given["lang"])
    if given.get("out") == "mrt" or any(k in given for k in MRT_ONLY_KNOBS):
        return mrt_default_config(problem, space)
    default = fragment_default_config(problem, space)
    if default["out"] == "image" and given.get("out") != "image" \
            and Config({**default.to_dict(), **given}) not in space:
        return mrt_default_config(problem, space)   # knobs the image default does not take
    return default


def mrt_default_config(problem: Problem, space: Space, lang: str = "glsl") -> Config:
    """Jiang's path's safe, usually fast config (the phased plan's start, every GL 3.3
    driver runs it): 1x4 packing on 4x2 targets, 128-k passes (the fastest MRT shape
    of bench-gl), falling back to smaller blockings; in GLSL, or in the assembly
    language `lang` (with the GLSL version and fetch it holds)."""
    kpad = -(-max(problem.K, 1) // 4) * 4
    np_ = min(128, kpad)
    glsl, fetch = ("330", "texelFetch") if lang == "glsl" else (ASM_GLSL, ASM_FETCH[lang])
    for mc, mh, mw in (("1x4", 4, 2), ("1x4", 2, 2), ("1x4", 1, 1), ("1x1", 1, 1)):
        for unroll in (4, 1, "full"):
            cfg = with_defaults(Config(lang=lang, glsl=glsl, fetch=fetch, unroll=unroll, np=np_, mc=mc,
                                       mrt_h=mh, mrt_w=mw))
            if cfg in space:
                return cfg
    configs = space.configs()
    if not configs:
        raise ValueError(f"the GL space for {problem.key} is empty")
    return configs[0]

