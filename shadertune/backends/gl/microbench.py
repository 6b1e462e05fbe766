"""GL microbenchmarks: fragment FMA peak, fragment texelFetch and storage-buffer load
rates, compute FMA peak: the ceilings of the GL roofline (roofline.py).

Each benchmark doubles a uniform loop count until one draw takes `target_ms`
(so one code path serves llvmpipe and an H200), then reports the median of
`repeats` timed draws after a warm-up.  Sizes are parameters: tests run them
tiny on llvmpipe.
"""
from __future__ import annotations

import statistics

import numpy as np

from ...core import templates
from ...core.roofline import store
from .platform.context import get_context, software_renderer
from .platform.objects import parking_framebuffer
from .platform.timing import timed

_A = (0.999, 0.9995, 0.9999, 0.99995)   # x*a + b stays finite however long the loop runs
_B = (1e-4, 2e-4, 3e-4, 4e-4)


def context(device_index=None):
    """The shared headless context of this thread (the GL backend's)."""
    return get_context(device_index)


def device_of(ctx) -> dict:
    """The measured device; `software_renderer` marks a CPU rasteriser, whose ceilings
    are no roofline (roofline.store.software_reason)."""
    info = ctx.info
    return {"backend": "gl", "vendor": info.get("GL_VENDOR", ""),
            "renderer": info.get("GL_RENDERER", ""), "driver": info.get("GL_VERSION", ""),
            "software_renderer": bool(software_renderer(ctx))}


def _park(ctx):
    """Bind a framebuffer that outlives this one before releasing it: moderngl binds the
    last used framebuffer again when it makes the next, and a released one is an error."""
    parking_framebuffer(ctx).use()


def _calibrate_and_time(ctx, set_iters, fn, iters, target_ms, max_iters, repeats):
    """Double iters until one run takes target_ms; return (iters, times_ms, timer)."""
    query = ctx.query(time=True)
    set_iters(iters)
    fn()                                   # warm-up: compile, allocate, first-use costs
    ctx.finish()
    while True:
        ms, _ = timed(ctx, query, fn)
        if ms >= target_ms or iters * 2 > max_iters:
            break
        iters *= 2 if ms * 8 > target_ms else 8   # far below target: jump faster
        iters = min(iters, max_iters)
        set_iters(iters)
    runs = [timed(ctx, query, fn) for _ in range(repeats)]
    times = [t for t, _ in runs]
    return iters, times, runs[-1][1]


def _set_ab(prog):
    prog["a"].value = _A
    prog["b"].value = _B


def _time_fragment_shader(ctx, shader, params, size, iters, target_ms, max_iters, repeats,
                          bind=lambda prog: (), read=True):
    """Time fullscreen draws of the fragment shader `shader` (rendered with `params`)
    into a size^2 RGBA32F framebuffer, its `iters` loop count doubled until one draw
    takes `target_ms`: (iters, times_ms, timer, the framebuffer (size, size, 4) or None
    without `read`).  bind(prog) sets the shader's inputs before the framebuffer is
    made and returns the objects to release with it."""
    import moderngl
    prog = ctx.program(vertex_shader=templates.read("gl/roofline/quad.vert"),
                       fragment_shader=templates.render(shader, **params))
    held = tuple(bind(prog))
    tex = ctx.texture((size, size), 4, dtype="f4")
    fbo = ctx.framebuffer([tex])
    vao = ctx.vertex_array(prog, [])
    try:
        fbo.use()
        ctx.viewport = (0, 0, size, size)
        draw = lambda: vao.render(moderngl.TRIANGLES, vertices=3)  # noqa: E731
        it, times, timer = _calibrate_and_time(ctx, lambda n: _set(prog, n), draw,
                                               iters, target_ms, max_iters, repeats)
        out = np.frombuffer(tex.read(), dtype=np.float32).reshape(size, size, 4) if read else None
    finally:
        _park(ctx)
        for obj in (vao, fbo, tex, *held, prog):
            obj.release()
    return it, times, timer, out


def fragment_fma_peak(ctx, size=1024, chains=8, unroll=8, iters=1, target_ms=20.0,
                      max_iters=1 << 16, repeats=5, return_output=False) -> dict:
    """GFLOP/s of a fullscreen fragment shader of independent vec4 multiply-add chains.

    return_output adds the framebuffer (size, size, 4) so a test can check that
    the shader really did the flops counted (see fma_reference)."""
    def bind(prog):
        _set_ab(prog)
        return ()
    it, times, timer, out = _time_fragment_shader(
        ctx, "gl/roofline/fma.frag", dict(chains=chains, unroll=unroll), size, iters, target_ms,
        max_iters, repeats, bind)
    if not np.isfinite(out).all():
        raise RuntimeError("fragment FMA benchmark produced non-finite values")
    ms = statistics.median(times)
    flops = size * size * it * unroll * chains * 4 * 2
    r = {"gflops": flops / (ms * 1e-3) / 1e9, "median_ms": ms, "times_ms": times,
         "timer": timer, "pixels": size * size, "iters": it, "chains": chains, "unroll": unroll}
    if return_output:
        r["output"] = out
    return r


def _set(prog, n):
    prog["iters"].value = int(n)


FETCH_PATTERNS = ("matmul", "distinct", "quad")


def fragment_fetch_rate(ctx, size=1024, tex_size=64, fetches=8, iters=1, target_ms=20.0,
                        max_iters=1 << 16, repeats=5, return_output=False, pattern="matmul") -> dict:
    """G texelFetch/s of RGBA32F from a small (cache-resident) texture in a fragment shader.

    return_output adds the framebuffer and the source texels (fetch_reference checks them)."""
    import moderngl
    if pattern not in FETCH_PATTERNS:
        raise ValueError(f"fetch pattern must be one of {FETCH_PATTERNS}, got {pattern!r}")

    def source(texels):
        src = ctx.texture((tex_size, tex_size), 4, texels.tobytes(), dtype="f4")
        src.filter = (moderngl.NEAREST, moderngl.NEAREST)
        src.use(0)
        return src
    r = _fragment_loads(ctx, "gl/roofline/fetch.frag", source, dict(pattern=pattern), size, tex_size,
                        fetches, iters, target_ms, max_iters, repeats, return_output)
    r["gtexels"] = r["rate"]
    r["pattern"] = pattern
    return r


def fragment_ssbo_rate(ctx, size=1024, tex_size=64, fetches=8, iters=1, target_ms=20.0,
                       max_iters=1 << 16, repeats=5, return_output=False) -> dict:
    """G vec4 loads/s from a small (cache-resident) storage buffer in a fragment shader,
    with fetch.frag's matmul-like addresses (the image path's second operand path).

    return_output adds the framebuffer and the source vec4s (fetch_reference checks
    them with pattern 'matmul': element [y, x] of the buffer's rows is texel (x, y))."""
    def source(texels):
        buf = ctx.buffer(texels)
        buf.bind_to_storage_buffer(0)
        return buf
    r = _fragment_loads(ctx, "gl/roofline/ssbo.frag", source, {}, size, tex_size, fetches, iters,
                        target_ms, max_iters, repeats, return_output)
    r["gloads"] = r["rate"]
    return r


def _fragment_loads(ctx, shader, make_source, params, size, tex_size, fetches, iters, target_ms,
                    max_iters, repeats, return_output) -> dict:
    """Time `shader` (fetches from a tex_size^2 source of random vec4s, which
    make_source(texels) uploads and binds) over a size^2 framebuffer: G loads/s as 'rate'."""
    if tex_size & (tex_size - 1):
        raise ValueError(f"tex_size must be a power of two (addresses wrap by masking), got {tex_size}")
    rng = np.random.default_rng(0)
    texels = rng.random((tex_size, tex_size, 4), dtype=np.float32)
    it, times, timer, out = _time_fragment_shader(
        ctx, shader, dict(tex_size=tex_size, fetches=fetches, **params), size, iters, target_ms,
        max_iters, repeats, lambda prog: (make_source(texels),), read=return_output)
    ms = statistics.median(times)
    n = size * size * it * fetches
    r = {"rate": n / (ms * 1e-3) / 1e9, "median_ms": ms, "times_ms": times, "timer": timer,
         "pixels": size * size, "iters": it, "fetches": fetches, "tex_size": tex_size,
         "gbytes_per_s": 16 * n / (ms * 1e-3) / 1e9}
    if return_output:
        r["output"], r["texels"] = out, texels
    return r


def compute_fma_peak(ctx, groups=1024, local_size=256, chains=8, unroll=8, iters=1,
                     target_ms=20.0, max_iters=1 << 16, repeats=5, return_output=False) -> dict:
    """GFLOP/s of a GL 4.3 compute shader running the same FMA chains as fma.frag."""
    cs = ctx.compute_shader(templates.render("gl/roofline/fma.comp", chains=chains,
                                             unroll=unroll, local_size=local_size))
    _set_ab(cs)
    threads = groups * local_size
    buf = ctx.buffer(reserve=threads * 16)
    try:
        buf.bind_to_storage_buffer(0)
        run = lambda: cs.run(group_x=groups)  # noqa: E731
        it, times, timer = _calibrate_and_time(ctx, lambda n: _set(cs, n), run,
                                               iters, target_ms, max_iters, repeats)
        out = np.frombuffer(buf.read(), dtype=np.float32)
        if not np.isfinite(out).all():
            raise RuntimeError("compute FMA benchmark produced non-finite values")
    finally:
        buf.release(); cs.release()
    ms = statistics.median(times)
    flops = threads * it * unroll * chains * 4 * 2
    r = {"gflops": flops / (ms * 1e-3) / 1e9, "median_ms": ms, "times_ms": times, "timer": timer,
         "threads": threads, "iters": it, "chains": chains, "unroll": unroll}
    if return_output:
        r["output"] = out.reshape(threads, 4)
    return r


def fma_reference(seed: np.ndarray, chains: int, steps: int) -> np.ndarray:
    """What the FMA shaders output for per-invocation vec4 seeds (..., 4) after
    `steps` = iters * unroll multiply-adds: sum over chains of the closed form
    x_n = a^n x_0 + b (1 - a^n) / (1 - a), in float64."""
    a, b = np.array(_A), np.array(_B)
    an = a ** steps
    x0 = seed[..., None, :].astype(np.float64) + np.arange(chains, dtype=np.float64)[:, None]
    return (an * x0 + b * (1 - an) / (1 - a)).sum(axis=-2)


def fetch_reference(texels: np.ndarray, size: int, fetches: int, iters: int,
                    pattern: str = "matmul") -> np.ndarray:
    """What fetch.frag outputs at every pixel: the sum of the texels it fetched
    (texelFetch(x, y) reads texels[y, x])."""
    mask = texels.shape[0] - 1
    y, x = np.mgrid[0:size, 0:size]
    out = np.zeros((size, size, 4))
    for i in range(iters):
        for f in range(fetches):
            if pattern == "matmul":
                k = (i * fetches + f) & mask
                out += texels[y & mask, k] if f % 2 == 0 else texels[k, x & mask]
            elif pattern == "quad":
                out += texels[((y >> 1) + i) & mask, ((x >> 1) + f) & mask]
            else:
                out += texels[(y + i) & mask, (x + f) & mask]
    return out


# Sizes per mode: 'tiny' is for tests on llvmpipe, 'quick' for bench-gpu's time budget.
PRESETS = {
    "full": dict(size=2048, target_ms=50.0, repeats=7, groups=4096),
    "quick": dict(size=1024, target_ms=20.0, repeats=5, groups=2048),
    "tiny": dict(size=32, target_ms=1.0, repeats=3, groups=4, max_iters=8),
}


def measure_gl(ctx=None, quick=False, *, preset: str | None = None, compute=True) -> dict:
    """Measure the GL ceilings of the device at hand; a dict for store.save()."""
    ctx = ctx if ctx is not None else context()
    p = dict(PRESETS[preset or ("quick" if quick else "full")])
    groups = p.pop("groups")
    fma = fragment_fma_peak(ctx, **p)
    ceilings = {"fragment_fma_gflops": fma["gflops"]}
    details = {"fragment_fma": fma}
    # The matmul-like pattern is the roofline's fetch rate; the other two show the spread
    # (on an H200: 21 G/s with 4 distinct texels per quad, 32 G/s with 1).
    for pattern in FETCH_PATTERNS:
        r = fragment_fetch_rate(ctx, pattern=pattern, **p)
        suffix = "" if pattern == "matmul" else f"_{pattern}"
        ceilings["fetch_gtexels" + suffix] = r["gtexels"]
        details["fragment_fetch" + suffix] = r
    # The image path's storage-buffer operands: their load rate is the second fetch ceiling.
    try:
        r = fragment_ssbo_rate(ctx, **p)
    except Exception as e:          # no storage buffers in fragment shaders: say so, keep the rest
        details["fragment_ssbo"] = {"skipped": f"{e.__class__.__name__}: {e}".strip()[:300]}
    else:
        ceilings["ssbo_gloads"] = r["gloads"]
        details["fragment_ssbo"] = r
    if compute:
        # Not gated on ctx.version_code: NVIDIA's EGL hands out a 3.3 core context
        # that still compiles #version 430 compute shaders (ARB_compute_shader).
        p.pop("size")
        try:
            comp = compute_fma_peak(ctx, groups=groups, **p)
        except Exception as e:          # no compute shaders on this driver: say so, keep the rest
            details["compute_fma"] = {"skipped": f"{e.__class__.__name__}: {e}".strip()[:300]}
        else:
            ceilings["compute_fma_gflops"] = comp["gflops"]
            details["compute_fma"] = comp
    return store.new(device_of(ctx), ceilings, details)
