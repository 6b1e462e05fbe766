"""GL contexts: EGL with a device index, GLFW under Xvfb, and clear errors when none can be made."""
import os
import shutil
import subprocess
import time

import pytest
from subproc import run_python

from shadertune.errors import ContextError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _py(code: str, env_extra: dict | None = None, timeout: int = 120):
    return run_python(code, env=env_extra, timeout=timeout)


def test_egl_context_and_limits(gl_backend):
    dev = gl_backend.device()
    assert dev.renderer and dev.driver
    lim = dev.limits
    assert lim["max_draw_buffers"] >= 1 and lim["max_texture_size"] >= 1024
    assert lim["float_render_targets"] is True


def test_bad_device_index_is_a_clear_error():
    from shadertune.backends.gl.platform.context import create_egl_context
    with pytest.raises(ContextError, match="device_index=99"):
        create_egl_context(99)
    with pytest.raises(ValueError, match="non-negative"):
        create_egl_context(-1)


def test_missing_libegl_is_one_clear_error():
    """A broken EGL library path: one ContextError naming the fix, no C-level traceback."""
    r = _py("""
        import numpy as np, shadertune
        try:
            shadertune.matmul(np.ones((2, 2)), np.ones((2, 2)))
        except Exception as e:
            print(type(e).__name__ + ": " + str(e))
    """, {"GLCONTEXT_LINUX_LIBEGL": "/nonexistent/libEGL.so.1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ContextError: cannot create a headless EGL GL context")
    assert "apt-get install" in r.stdout and "Traceback" not in r.stdout


def test_missing_vendor_file_is_diagnosed():
    r = _py("""
        from shadertune.backends.gl.platform.context import create_egl_context
        try:
            create_egl_context()
        except Exception as e:
            print(type(e).__name__ + ": " + str(e))
        else:
            print("created")
    """, {"__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/10_nvidia.json"})
    assert "ContextError" in r.stdout and "/nonexistent/10_nvidia.json" in r.stdout, r.stdout + r.stderr


@pytest.fixture(scope="module")
def xvfb_display():
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (scripts/test installs it: apt-get install xvfb)")
    display = ":97"
    proc = subprocess.Popen(["Xvfb", display, "-screen", "0", "64x64x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    if proc.poll() is not None:
        pytest.skip("Xvfb did not start")
    yield display
    proc.terminate()
    proc.wait(10)


def test_glfw_hidden_window_under_xvfb(xvfb_display):
    r = _py("""
        import numpy as np
        from shadertune.backends.gl import GLBackend
        from shadertune.core.problem import Problem
        be = GLBackend(context="glfw")
        p = Problem(9, 7, 11)
        k = be.build(p, be.default_config(p))
        A, B = np.arange(99.).reshape(9, 11), np.arange(77.).reshape(11, 7)
        print(be.device().renderer, float(np.abs(k.run(A, B) - A @ B).max()))
    """, {"DISPLAY": xvfb_display})
    assert r.returncode == 0, r.stderr
    renderer, err = r.stdout.rsplit(" ", 1)
    assert renderer and float(err) < 1e-3


def test_glfw_without_display_is_a_clear_error():
    r = _py("""
        from shadertune.backends.gl.platform.context import create_glfw_context
        try:
            create_glfw_context()
        except Exception as e:
            print(type(e).__name__ + ": " + str(e))
    """, {"DISPLAY": ""})
    assert r.stdout.startswith("ContextError:"), r.stdout + r.stderr


def test_glfw_without_the_package_names_the_extra():
    """glfw is the optional extra of the fallback context only: without it, asking for that
    context is one ContextError saying how to install it (EGL needs nothing more)."""
    r = _py("""
        import sys
        sys.modules["glfw"] = None                   # as where the extra is not installed
        from shadertune.backends.gl import GLBackend
        try:
            GLBackend(context="glfw").device()
        except Exception as e:
            print(type(e).__name__ + ": " + str(e))
        print(GLBackend().device().renderer != "")   # the default EGL context does not need it
    """, {"DISPLAY": ""})
    first, second = r.stdout.splitlines()[:2]
    assert first.startswith("ContextError: context='glfw' needs the glfw package: "
                            "pip install 'shadertune[glfw]'"), r.stdout + r.stderr
    assert second == "True", r.stdout + r.stderr


def test_per_context_state_lives_on_the_context():
    """Issue 13 item 6: parking framebuffer, NaN-clear check, placeholder texture and the
    software flag belong to one object on each context (no module dicts keyed by id(ctx),
    which a new context could inherit from a released one with the same id)."""
    from shadertune.backends.gl.platform.context import (create_egl_context, make_current, software_renderer,
                                                         state_of)
    from shadertune.backends.gl.platform.objects import clear_writes_nan, parking_framebuffer, placeholder_texture
    a, b = create_egl_context(), create_egl_context()
    try:
        for ctx in (a, b):
            make_current(ctx)
            parking_framebuffer(ctx), placeholder_texture(ctx), clear_writes_nan(ctx), software_renderer(ctx)
        sa, sb = state_of(a), state_of(b)
        assert sa is not sb and sa is state_of(a)
        assert sa.parking.ctx is a and sb.parking.ctx is b
        assert sa.placeholder.ctx is a and sb.placeholder.ctx is b
        assert sa.clears_nan is not None and sa.software is not None
    finally:
        a.release()
        b.release()


IMAGE_4X4 = {"out": "image", "block_h": 4, "block_w": 4, "a_src": "texture", "b_src": "texture",
             "glsl": "450", "unroll": 1, "np": 4}


@pytest.mark.parametrize("config", ["default", IMAGE_4X4], ids=["default", "image"])
def test_one_thread_with_two_contexts_switches_between_them(rng, config):
    """device_index None and 0 are two contexts of this thread: each call makes its own
    current (making the second one left the first one's kernels drawing into it), and
    releases happen in the kernel's own context (an image kernel's GPU packing programs
    were once deleted in whichever context was current: GL_INVALID_VALUE afterwards)."""
    import shadertune
    from numerics import rel_err
    from shadertune.front import matmul as api
    shapes = {None: [((6, 9), (9, 4)), ((8, 9), (9, 4))], 0: [((17, 5), (5, 30))]}
    if config is IMAGE_4X4:
        from shadertune.core.problem import Problem
        if "image" not in api.backend("gl").space(Problem(8, 4, 9)).knobs["out"]:
            pytest.skip("this GL has no image path")
        shapes[None] = [((8, 9), (9, 4))]       # K >= np (4) and rows ending mid-texel
    for step in (None, 0, None, 0, "clear", None, 0):
        if step == "clear":      # releases both contexts' kernels, each in its own context
            api.clear_cache()
            continue
        for a, b in shapes[step]:
            A, B = rng.standard_normal(a), rng.standard_normal(b)
            got = shadertune.matmul(A, B, config=config, device_index=step)
            assert rel_err(got, A @ B) <= 1e-5


def test_the_profile_is_compatibility_on_a_software_renderer_and_core_on_a_gpu(monkeypatch):
    """SHADERTUNE_GL_PROFILE: 'auto' (the default) gives llvmpipe the compatibility profile
    (assembly kernels shade there) and a GPU the core profile; 'compat' and 'core' ask."""
    from shadertune.backends.gl.platform import context
    from shadertune.backends.gl.platform.egl_compat import is_compatibility_profile

    def profile_of(env, software=True):
        monkeypatch.setenv("SHADERTUNE_GL_PROFILE", env)
        monkeypatch.setattr(context, "is_software_renderer", lambda renderer: software)
        ctx = context.create_egl_context()
        try:
            return is_compatibility_profile(ctx)
        finally:
            ctx.release()
    assert profile_of("auto") is True
    assert profile_of("auto", software=False) is False          # what a GPU gets
    assert profile_of("compat", software=False) is True
    assert profile_of("core") is False
    monkeypatch.setenv("SHADERTUNE_GL_PROFILE", "bogus")
    with pytest.raises(context.ContextError, match="SHADERTUNE_GL_PROFILE"):
        context.gl_profile()
    from shadertune.backends.gl import GLBackend      # refused where a command starts, too
    with pytest.raises(context.ContextError, match="SHADERTUNE_GL_PROFILE must be one of"):
        GLBackend.check_environment()


def test_gl_device_variable_chooses_the_egl_device(monkeypatch):
    # SHADERTUNE_GL_DEVICE points a process at one EGL device where the caller names none;
    # a bad value is one error naming the variable, before any context is made
    from shadertune.backends.gl import GLBackend
    from shadertune.backends.gl.platform.context import default_device_index
    from shadertune.errors import ContextError
    monkeypatch.delenv("SHADERTUNE_GL_DEVICE", raising=False)
    assert default_device_index() is None
    monkeypatch.setenv("SHADERTUNE_GL_DEVICE", "0")
    assert default_device_index() == 0
    for bad in ("-1", "gpu1", "1.5"):
        monkeypatch.setenv("SHADERTUNE_GL_DEVICE", bad)
        with pytest.raises(ContextError, match="SHADERTUNE_GL_DEVICE"):
            GLBackend.check_environment()
    monkeypatch.setenv("SHADERTUNE_GL_DEVICE", "999")
    with pytest.raises(ContextError, match="device_index=999"):
        from shadertune.backends.gl.platform.context import create_egl_context
        create_egl_context()
