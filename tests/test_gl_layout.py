"""Texture layouts: packing round-trips and the padding the user never sees."""
import numpy as np
import pytest

from shadertune.backends.gl.mrt.layout import MC_SHAPES, Layout, packing


@pytest.mark.parametrize("mc", list(MC_SHAPES))
@pytest.mark.parametrize("mrt", [(1, 1), (1, 2), (2, 4), (4, 2), (4, 1)])
def test_c_round_trip(mc, mrt, rng):
    L = Layout.plan(37, 61, 129, mc=mc, mrt_h=mrt[0], mrt_w=mrt[1], np=8 if mc != "2x2" else 6)
    C = rng.standard_normal((37, 61)).astype(np.float32)
    full = L.pack_c(C)
    targets = [full[i * L.hc:(i + 1) * L.hc, j * L.wc:(j + 1) * L.wc]
               for i in range(L.mrt_h) for j in range(L.mrt_w)]
    np.testing.assert_array_equal(L.unpack_c(targets), C)


@pytest.mark.parametrize("mc", list(MC_SHAPES))
def test_packed_a_b_reproduce_the_product(mc, rng):
    """Summing texel-level products over the packed textures gives A @ B (the shader's algebra)."""
    A = rng.standard_normal((9, 13))
    B = rng.standard_normal((13, 7))
    L = Layout.plan(9, 7, 13, mc=mc, np=4)
    ta, tb = L.pack_a(A), L.pack_b(B)
    mc_h, mc_w, ka, kb = packing(mc)
    Cp = np.zeros((L.Mp, L.Np))
    for y in range(ta.shape[0]):
        for x in range(tb.shape[1]):
            for k in range(ta.shape[1]):
                a = ta[y, k, :mc_h * ka].reshape(mc_h, ka)
                b = np.concatenate([tb[k * (ka // kb) + s, x, :kb * mc_w].reshape(kb, mc_w)
                                    for s in range(ka // kb)])
                Cp[y * mc_h:(y + 1) * mc_h, x * mc_w:(x + 1) * mc_w] += a @ b
    np.testing.assert_allclose(Cp[:9, :7], A @ B, rtol=1e-5, atol=1e-5)
    assert not Cp[9:].any() and not Cp[:, 7:].any()


def test_passes_and_padding():
    L = Layout.plan(37, 61, 129, mc="1x4", mrt_h=2, mrt_w=2, np=8)
    assert L.passes == 17 and L.Kp == 136          # ceil(129 / 8) passes, K padded with zeros
    assert L.Mp >= 37 and L.Np >= 61 and L.Np % 8 == 0
    big = Layout.plan(37, 61, 129, mc="1x4", np=4096)
    assert big.passes == 1 and big.np == 132       # np >= K clamps to one pass


@pytest.mark.parametrize("kw,msg", [
    (dict(mc="3x3"), "mc must be one of"),
    (dict(mc="1x4", np=6), "multiple of 4"),
    (dict(mc="2x2", np=3), "multiple of 2"),
])
def test_bad_layouts(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Layout.plan(8, 8, 8, **kw)
