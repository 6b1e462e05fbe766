#!/usr/bin/env python3
"""Hashes of rendered kernels, to show that a refactor renders byte-identical sources:
GL fragment/image sources of 120 seeded random configs of five problems each, CUDA
sources of 60 seeded draws of three problems each, the rendered GL microbenchmark
shaders, then (from a generator of their own, so the names above stay those of earlier
runs) GL assembly (ARBfp, NVfp) and compute-family sources (with their split-K reduce
programs) of 60 seeded configs each per problem, stacked compute problems and the
hand-written assembly baseline, written as JSON (name -> sha256).  Run before and after
a change, then cmp.

    scripts/kernel-hashes OUT.json
"""
import hashlib
import json
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from project_venv import use_project_venv  # noqa: E402

use_project_venv("jinja2", "numpy")

from shadertune.core import templates  # noqa: E402
from shadertune.backends.cuda import codegen  # noqa: E402
from shadertune.backends.cuda.device import DEFAULT_LIMITS  # noqa: E402
from shadertune.backends.cuda.space import make_space  # noqa: E402
from shadertune.backends.gl import GLBackend  # noqa: E402
from shadertune.backends.gl.asm import handtuned as assembly  # noqa: E402
from shadertune.backends.gl.compute.codegen import reduce_source  # noqa: E402
from shadertune.backends.gl.compute.layout import ComputeLayout  # noqa: E402
from shadertune.backends.gl.mrt.layout import Layout  # noqa: E402
from shadertune.backends.gl.space import gl_space, with_defaults  # noqa: E402
from shadertune.core.problem import Problem  # noqa: E402
from shadertune.search.random_search import draws  # noqa: E402

# a GL 4.5 device with image stores (so the image path's configs are in the space)
GL_LIMITS = {"gl_version": 450, "image_store": True, "fbo_no_attachments": True, "max_image_units": 8,
             "max_fragment_image_uniforms": 8, "max_draw_buffers": 8, "max_texture_size": 16384}
# the same with both assembly languages (no program limit) and the compute family (an
# H100-like device: 48 KB shared, 1024 invocations, 1 GB storage blocks, 132 units)
ALL_LIMITS = {**GL_LIMITS, "asm_limits": {"arbfp": {}, "nvfp": {}}, "compute": True, "ssbo": True,
              "max_compute_shared_bytes": 49152, "max_compute_invocations": 1024,
              "max_compute_groups": [2147483647, 65535, 65535], "max_ssbo_bytes": 1 << 30,
              "max_texture_buffer_texels": 1 << 27, "compute_units": 132}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main(out: str) -> None:
    hashes = {}
    rng = random.Random(0)
    gl = GLBackend()           # its source() needs no context
    for p in (Problem(16, 16, 16), Problem(100, 60, 70), Problem(64, 48, 200, trans_a=True),
              Problem(33, 17, 9, trans_b=True), Problem(256, 8, 128)):
        cfgs = list(gl_space(p, GL_LIMITS).configs())
        for c in rng.sample(cfgs, min(120, len(cfgs))):
            c = with_defaults(c)
            hashes[f"gl {p.key} {c.key}"] = sha(gl.source(p, c))
    for p in (Problem(256, 256, 256), Problem(77, 4093, 1531), Problem(64, 64, 64, "float64")):
        for i, c in zip(range(60), draws(make_space(p, DEFAULT_LIMITS), rng)):
            hashes[f"cuda {p.key} {c.key}"] = sha(codegen.source(p, c))
    for name, kw in (("gl/roofline/fma.frag", dict(chains=8, unroll=8)),
                     *((("gl/roofline/fetch.frag", dict(tex_size=64, fetches=8, pattern=pat)))
                       for pat in ("matmul", "quad", "distinct")),
                     ("gl/roofline/ssbo.frag", dict(tex_size=64, fetches=8)),
                     ("gl/roofline/fma.comp", dict(chains=8, unroll=8, local_size=256))):
        hashes[f"bench {name} {sorted(kw.items())}"] = sha(templates.render(name, **kw))
    hashes["bench quad.vert"] = sha(templates.read("gl/roofline/quad.vert"))
    more_gl(hashes)
    pathlib.Path(out).write_text(json.dumps(hashes, indent=0, sort_keys=True))
    print(f"{len(hashes)} sources hashed into {out}")


def more_gl(hashes: dict) -> None:
    """Assembly and compute sources as the backend renders them (GLBackend.source needs
    no context), the compute family's reduce programs, and the assembly baseline."""
    rng = random.Random(1)
    gl = GLBackend()
    for p in (Problem(16, 16, 16), Problem(100, 60, 70), Problem(64, 48, 200, trans_a=True),
              Problem(33, 17, 9, trans_b=True), Problem(256, 8, 128), Problem(2048, 64, 4096),
              Problem(24, 40, 64, batch=3)):
        cfgs = gl_space(p, ALL_LIMITS).configs()
        for family, picked in (("asm", [c for c in cfgs if c["lang"] != "glsl"]),
                               ("compute", [c for c in cfgs if c["family"] == "compute"])):
            for c in rng.sample(picked, min(60, len(picked))):
                hashes[f"gl{family} {p.key} {c.key}"] = sha(gl.source(p, c))
                if family == "compute" and c["ks"] > 1:
                    hashes[f"glreduce {p.key} {c.key}"] = sha(reduce_source(ComputeLayout.plan(p, c)))
    for M, N, K, np_ in ((16, 16, 16, 8), (100, 60, 70, 36), (8, 8, 300, 256)):
        layout = Layout.plan(M, N, K, mc="1x4", mrt_h=4, mrt_w=1, np=np_, ka=4, kb=1)
        hashes[f"glbaseline asm {M}x{N}x{K} np={np_}"] = sha(assembly.source(layout))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
