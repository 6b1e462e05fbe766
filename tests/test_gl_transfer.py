"""The GL entry points moderngl lacks (glraw) and the transfer paths built on them."""
import numpy as np
import pytest

from shadertune.backends.gl.platform import glraw
from shadertune.backends.gl.platform.transfer import Transfers, copy_bytes, transfer_mode


def test_limits_moderngl_does_not_report_are_read(gl_backend):
    ctx = gl_backend.ctx
    assert glraw.usable(ctx)
    assert glraw.get_integer(ctx, glraw.MAX_FRAGMENT_IMAGE_UNIFORMS) >= 1
    assert glraw.get_integer(ctx, glraw.MAX_SHADER_STORAGE_BLOCK_SIZE) == \
        int(ctx.info["GL_MAX_SHADER_STORAGE_BLOCK_SIZE"])
    # a name the driver rejects reads None and leaves no GL error behind
    assert glraw.get_integer(ctx, 0x1234) is None
    assert ctx.error == "GL_NO_ERROR"
    lim = gl_backend.device().limits
    assert lim["image_store"] and lim["max_image_units"] >= 1 and lim["max_ssbo_bytes"] > 0


def test_a_persistent_mapping_round_trip(gl_backend):
    ctx = gl_backend.ctx
    up, view = glraw.persistent_buffer(ctx, 4096, read=False)
    down, back = glraw.persistent_buffer(ctx, 4096, read=True)
    try:
        view[:] = np.arange(4096) % 251
        ctx.copy_buffer(down, up)
        glraw.wait_gpu(ctx)
        assert np.array_equal(back, view)
    finally:
        view = back = None
        for b in (up, down):
            glo = b.glo
            b.release()
            glraw.delete_buffer(glo)
    assert ctx.error == "GL_NO_ERROR"


def test_parallel_copies_are_exact():
    src = np.random.default_rng(0).integers(0, 255, (9 << 20) + 13, dtype=np.uint8)   # past the threshold
    dst = np.zeros_like(src)
    copy_bytes(dst, src)
    assert np.array_equal(dst, src)


def test_mode_comes_from_the_environment_and_the_renderer(gl_backend, monkeypatch):
    monkeypatch.delenv("SHADERTUNE_GL_TRANSFER", raising=False)
    assert transfer_mode(gl_backend.ctx) == ("direct" if gl_backend.device().limits["software_renderer"]
                                             else "staged")
    assert transfer_mode() == "staged"
    monkeypatch.setenv("SHADERTUNE_GL_TRANSFER", "direct")
    assert Transfers(gl_backend.ctx).mode == "direct"
    monkeypatch.setenv("SHADERTUNE_GL_TRANSFER", "fast")
    with pytest.raises(ValueError, match="SHADERTUNE_GL_TRANSFER"):
        Transfers(gl_backend.ctx)


@pytest.mark.parametrize("mode", ["staged", "direct"])
def test_textures_and_buffers_round_trip(gl_backend, mode):
    ctx = gl_backend.ctx
    tr = Transfers(ctx, mode=mode)
    a = np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32)
    tex = ctx.texture((2, 6), 4, dtype="f4")
    buf = ctx.buffer(reserve=a.nbytes + 64)
    out = np.empty_like(a)
    try:
        tr.write_texture(tex, a, slot="A")
        tr.read_texture(tex, out)
        assert np.array_equal(out, a)
        tr.write_buffer(buf, a, offset=64, slot="B")
        assert np.array_equal(np.frombuffer(buf.read(), np.float32)[16:].reshape(6, 8), a)
        with pytest.raises(ValueError, match="C-contiguous"):
            tr.write_texture(tex, np.ones((6, 16), np.float32)[:, ::2])
    finally:
        tr.release()
        tex.release()
        buf.release()
