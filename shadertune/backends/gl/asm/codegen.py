"""Assembly code generation: a render-target (out=mrt) config -> an assembly fragment program.

The `lang` knob is the compiler dimension of Jiang's search (he searched Cg's and
fxc's profiles because the high-level compiler lost to hand-written assembly):

- glsl:  the GLSL kernel (mrt/codegen.py, matmul.frag.j2), compiled by the driver;
- arbfp: ARB_fragment_program assembly, ARBfp1.0 (shaders/gl/matmul.arbfp.j2).
         No loops, so a pass's k-steps are all written out (unroll = full);
         normalised texture coordinates (TEX ... 2D), like GLSL's texture();
- nvfp:  NVIDIA's NV_gpu_program4 assembly, "!!NVfp4.0" (matmul.nvfp.j2): loops
         (REP / ENDREP, so unroll is a knob as in GLSL), integer registers and
         integer texel fetches (TXF), like GLSL's texelFetch.

Both languages take the same layout (mrt/layout.py) as the GLSL kernel, the same
textures and render targets (mrt/targets.py), run by driver.py.
Counts of what a program holds (instructions, ALU and texture instructions,
texture indirections, temporaries, parameters) are read from the text itself
(analyse) and, for the space's pruning, extrapolated from programs of one and
two k-steps (program_counts): a program grows by the same instructions each
k-step.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ....errors import InvalidConfig
from ....core.templates import render
from ..fragment import unroll_factor
from ..mrt.layout import Layout, packing

TEMPLATES = {"arbfp": "gl/matmul.arbfp.j2", "nvfp": "gl/matmul.nvfp.j2"}
SHARED_TEMPLATE = "gl/matmul_asm.j2"        # the macros both import


def float_constant(x: float) -> str:
    """A float constant both assemblers read: digits enough for float32, a decimal point."""
    s = format(float(x), ".9g")
    if "e" in s and "." not in s.split("e")[0]:
        m, e = s.split("e")
        return f"{m}.0e{e}"
    return s if ("." in s or "e" in s) else s + ".0"


def asm_source(layout: Layout, config) -> str:
    """The assembly program of `config` (lang arbfp or nvfp) on `layout` (mrt/codegen.plan_layout's)."""
    lang = config.get("lang")
    if lang not in TEMPLATES:
        raise InvalidConfig(f"asm_source renders {' or '.join(TEMPLATES)} assembly, not lang={lang!r}")
    unroll = config.get("unroll", "full")
    if lang == "arbfp" and unroll != "full" and int(unroll) < layout.steps:
        raise InvalidConfig("ARBfp1.0 has no loops: lang=arbfp takes unroll='full' only")
    body = unroll_factor(unroll, layout.steps)
    return render(TEMPLATES[lang], **_template_values(layout, config, body))


def _template_values(L: Layout, config, body: int) -> dict:
    """Derived constants of the templates: normalised sizes and offsets (ARBfp), texel
    offsets (NVfp), how coordinates pair up in registers."""
    a_w, a_h = L.a_size
    b_w, b_h = L.b_size
    c_w, c_h = L.cfull_size
    f = float_constant
    a_pairs, b_pairs = -(-L.mrt_h // 2), -(-L.b_sub // 2)
    return dict(
        mc=config["mc"], np=L.np, steps=L.steps, unroll=config.get("unroll", "full"), body=body,
        reps=L.steps // body, mc_h=L.mc_h, mc_w=L.mc_w, ka=L.ka, kb=L.kb, b_sub=L.b_sub,
        mrt_h=L.mrt_h, mrt_w=L.mrt_w, targets=L.targets, hc=L.hc, wc=L.wc,
        a_pairs=a_pairs, b_pairs=b_pairs,
        inv_aw=f(1 / a_w), inv_ah=f(1 / a_h), inv_bw=f(1 / b_w), b_step=f(L.b_sub / b_h),
        inv_wc=f(1 / L.wc), inv_hc=f(1 / L.hc), inv_cw=f(1 / c_w), inv_ch=f(1 / c_h),
        a_rows=[f(i * L.hc / a_h) for i in range(2 * a_pairs)],
        b_cols=[f(j * L.wc / b_w) for j in range(L.mrt_w)],
        b_subs=[f(s / b_h) for s in range(2 * b_pairs)],
        c_cols=[f(j * L.wc / c_w) for j in range(L.mrt_w)],
        c_rows=[f(i * L.hc / c_h) for i in range(L.mrt_h)],
        row_offsets=[i * L.hc for i in range(4)], col_offsets=[j * L.wc for j in range(4)])


def pass_parameters(lang: str, L: Layout, p: int, alpha: float, beta: float) -> list[tuple[int, tuple]]:
    """The program.local parameters of pass `p` (index, (x, y, z, w)) as the templates
    read them: where the pass's k-steps start in A and B, alpha and beta (1 and 0 except
    in the last pass), and whether it is the last pass."""
    last = p == L.passes - 1
    k0 = p * L.steps                         # the pass's first A texel column
    if lang == "arbfp":
        a_w, _ = L.a_size
        _, b_h = L.b_size
        start = ((k0 + 0.5) / a_w, (k0 * L.b_sub + 0.5) / b_h)
    else:                                    # texel indices, exact in float32
        start = (float(k0), float(k0 * L.b_sub))
    return [(0, (*start, float(alpha) if last else 1.0, float(beta) if last else 0.0)),
            (1, (1.0 if last else 0.0, 0.0, 0.0, 0.0))]


# --- what a program holds ------------------------------------------------------

_DECLARATIONS = {"OPTION", "PARAM", "TEMP", "ATTRIB", "OUTPUT", "ALIAS", "ADDRESS", "INT", "UINT",
                 "FLOAT", "SHORT", "LONG", "END", "TEXTURE", "CBUFFER", "BUFFER", "BUFFER4"}
_TEX_OPS = {"TEX", "TXP", "TXB", "TXF", "TXL", "TXD", "TXQ", "TXG", "KIL", "TXFMS"}


@dataclass(frozen=True)
class ProgramCounts:
    """What an assembly program holds, counted as ARB_fragment_program counts it (the
    native counts a driver reports may differ: its own translation decides them)."""
    instructions: int
    alu: int
    tex: int
    indirections: int
    temporaries: int
    parameters: int

    def over(self, limits: dict) -> list[str]:
        """The counts past `limits` (keys as these fields; a missing limit bounds
        nothing), as 'name count > limit'."""
        return [f"{k} {getattr(self, k)} > {limits[k]}" for k in self.__dataclass_fields__
                if limits.get(k) is not None and getattr(self, k) > int(limits[k])]


def _split_operands(text: str) -> list[str]:
    """Comma-separated operands, commas inside { } and ( ) kept."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _register(operand: str) -> str:
    """The register an operand names: '-qa0.zwzw' -> 'qa0', 'result.color[1]' -> 'result'."""
    return re.split(r"[.\[\s]", operand.lstrip("-|+ "), maxsplit=1)[0]


def statements(text: str) -> list[str]:
    """The program's statements, comments and the header line dropped."""
    body = text.split("\n", 1)[1] if text.startswith("!!") else text
    body = re.sub(r"#[^\n]*", "", body)
    return [s.strip() for s in body.split(";") if s.strip()]


def analyse(text: str) -> ProgramCounts:
    """Count what the program text holds.  Parameters: the PARAM declarations and every
    inline constant (a driver may merge equal constants: an upper bound).  Texture indirections as
    ARB_fragment_program defines them (and Mesa counts them): a texture instruction
    begins a new one when its coordinate is a temporary written since the current one
    began, or its result a temporary an ALU instruction read since then."""
    temps: set[str] = set()
    params = literals = 0
    instructions = alu = tex = 0
    indirections, written, alu_read = 1, set(), set()
    for st in statements(text):
        words = st.split(None, 1)
        op = words[0]
        rest = words[1] if len(words) > 1 else ""
        if op in ("INT", "UINT", "FLOAT", "SHORT", "LONG") and rest:
            op, rest = (rest.split(None, 1) + [""])[:2]        # typed declaration
        if op == "TEMP":
            temps.update(n.strip() for n in rest.split(","))
            continue
        if op == "PARAM":
            m = re.match(r"\w+\s*\[(\d*)\]", rest)
            params += int(m.group(1)) if m and m.group(1) else 1
            continue
        if op == "END":
            instructions += 1                   # as Mesa counts it; neither ALU nor texture
            continue
        if op in _DECLARATIONS:
            continue
        instructions += 1
        operands = _split_operands(rest)
        literals += len(re.findall(r"\{[^}]*\}", rest))
        dst = _register(operands[0]) if operands else ""
        srcs = [_register(o) for o in operands[1:]]
        base = op.split(".")[0].split("_")[0]
        if base in _TEX_OPS:
            tex += 1
            coord = srcs[0] if srcs else ""
            if (coord in temps and coord in written) or (base != "KIL" and dst in temps and dst in alu_read):
                indirections += 1
                written, alu_read = set(), set()
        else:
            alu += 1
            alu_read.update(s for s in srcs if s in temps)
        if dst in temps:
            written.add(dst)
    return ProgramCounts(instructions, alu, tex, indirections, len(temps), params + literals)


@functools.lru_cache(maxsize=4096)
def _counts_at(lang: str, mc: str, mrt_h: int, mrt_w: int, body: int, looped: bool) -> ProgramCounts:
    """The counts of a program whose loop body (or whole pass) is `body` k-steps, on a
    small problem (sizes change constants, not counts); `looped`: NVfp's REP loop
    around it."""
    mc_h, mc_w, ka, _ = packing(mc)
    steps = 2 * body if looped else body
    L = Layout.plan(2 * mrt_h * mc_h, 2 * mrt_w * mc_w, ka * steps, mc=mc, mrt_h=mrt_h, mrt_w=mrt_w,
                    np=ka * steps)
    cfg = {"lang": lang, "mc": mc, "unroll": body if looped else "full"}
    return analyse(asm_source(L, cfg))


def program_counts(lang: str, mc: str, mrt_h: int, mrt_w: int, unroll, steps: int) -> ProgramCounts:
    """The counts of the program of a config with `steps` k-steps a pass, from programs
    of one and two k-steps (a k-step adds the same instructions, temporaries and
    indirections every time): exact for the templates, which tests check."""
    body = unroll_factor(unroll, steps)
    looped = lang == "nvfp" and body < steps
    one = _counts_at(lang, mc, mrt_h, mrt_w, 1, False) if not looped else None
    if looped:
        return _counts_at(lang, mc, mrt_h, mrt_w, body, True)
    two = _counts_at(lang, mc, mrt_h, mrt_w, 2, False)
    n = body - 1
    return ProgramCounts(*(getattr(one, f) + n * (getattr(two, f) - getattr(one, f))
                           for f in ProgramCounts.__dataclass_fields__))

