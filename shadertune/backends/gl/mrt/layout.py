"""Texture layouts: how A, B and C live in RGBA32F textures for a GL config.

mc = (mc_h, mc_w) is the block of C one texel holds.  A texel holds mc_h rows
x ka k-values, a B texel kb k-values x mc_w columns, with ka = 4 // mc_h and
kb = min(ka, 4 // mc_w) (so 1x4: A four k per texel, B four columns per texel;
2x2: every texel a 2x2 block).  A fragment computes mrt_h x mrt_w C texels,
one per render target; render target (i, j) holds C's sub-block (i, j) of an
mrt_h x mrt_w split.  Shapes the blocking does not divide are zero-padded
here and cropped on the way back: the user never sees padding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MC_SHAPES = {"1x1": (1, 1), "1x2": (1, 2), "1x3": (1, 3), "1x4": (1, 4), "2x2": (2, 2)}


def packing(mc: str) -> tuple[int, int, int, int]:
    """(mc_h, mc_w, ka, kb) for a channel-use code."""
    try:
        mc_h, mc_w = MC_SHAPES[mc]
    except KeyError:
        raise ValueError(f"mc must be one of {list(MC_SHAPES)}, got {mc!r}") from None
    ka = 4 // mc_h
    return mc_h, mc_w, ka, min(ka, 4 // mc_w)


def _ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def pass_depth(np: int, K: int, ka: int) -> int:
    """k-values one pass covers: np, clamped to K rounded up to whole A texels of ka
    k-values (a deeper pass would only read zero padding)."""
    return min(np, _ceil_to(K, ka))


@dataclass(frozen=True)
class Layout:
    M: int
    N: int
    K: int
    mc_h: int
    mc_w: int
    ka: int              # k-values per A texel
    kb: int              # k-values per B texel
    mrt_h: int
    mrt_w: int
    np: int              # k-values per pass (a multiple of ka), clamped to padded K
    passes: int
    hc: int              # C texels per render target, vertically
    wc: int              # ... and horizontally

    @classmethod
    def plan(cls, M: int, N: int, K: int, *, mc: str = "1x1", mrt_h: int = 1, mrt_w: int = 1,
             np: int = 4, ka: int | None = None, kb: int | None = None) -> "Layout":
        mc_h, mc_w, ka0, kb0 = packing(mc)
        ka = ka0 if ka is None else ka
        kb = kb0 if kb is None else kb
        if mc_h * ka > 4 or kb * mc_w > 4 or ka % kb:
            raise ValueError(f"mc={mc} with ka={ka}, kb={kb} does not fit an RGBA texel")
        if M <= 0 or N <= 0 or K <= 0:
            raise ValueError(f"GL layouts need M, N, K >= 1, got {M}x{N}x{K}")
        if np <= 0 or np % ka:
            raise ValueError(f"np={np} must be a positive multiple of {ka} (k-values per A texel for mc={mc})")
        np_eff = pass_depth(np, K, ka)
        passes = math.ceil(K / np_eff)
        return cls(M, N, K, mc_h, mc_w, ka, kb, mrt_h, mrt_w, np_eff, passes,
                   hc=math.ceil(M / (mrt_h * mc_h)), wc=math.ceil(N / (mrt_w * mc_w)))

    # --- padded sizes ---------------------------------------------------
    @property
    def Mp(self) -> int:
        return self.mrt_h * self.hc * self.mc_h

    @property
    def Np(self) -> int:
        return self.mrt_w * self.wc * self.mc_w

    @property
    def Kp(self) -> int:
        return self.passes * self.np

    @property
    def steps(self) -> int:
        """A-texel steps per pass."""
        return self.np // self.ka

    @property
    def b_sub(self) -> int:
        """B texels fetched per A texel and C column block."""
        return self.ka // self.kb

    @property
    def targets(self) -> int:
        return self.mrt_h * self.mrt_w

    # texture sizes as (width, height)
    @property
    def a_size(self) -> tuple[int, int]:
        return self.Kp // self.ka, self.Mp // self.mc_h

    @property
    def b_size(self) -> tuple[int, int]:
        return self.Np // self.mc_w, self.Kp // self.kb

    @property
    def c_size(self) -> tuple[int, int]:
        """One render target."""
        return self.wc, self.hc

    @property
    def cfull_size(self) -> tuple[int, int]:
        """All of C as one texture (the beta * C input)."""
        return self.mrt_w * self.wc, self.mrt_h * self.hc

    def largest_texture(self) -> int:
        return max(*self.a_size, *self.b_size, *self.cfull_size)

    # --- packing --------------------------------------------------------
    @property
    def a_row_major(self) -> bool:
        """A's packed texture is A's own row-major memory in its top-left corner (one
        row a texel row, 4 k a texel; zero past it): 1xN channel use, K a multiple of 4."""
        return self.mc_h == 1 and self.ka == 4 and self.K % 4 == 0

    @property
    def b_row_major(self) -> bool:
        """B's packed texture is B's row-major memory in its top-left corner: one k a
        texel row, 4 columns a texel (mc = 1x4), N a multiple of 4."""
        return self.kb == 1 and self.mc_w == 4 and self.N % 4 == 0

    @property
    def c_row_major(self) -> bool:
        """Each render target holds a block of C's rows with 4 columns a texel (1x4)."""
        return self.mc_h == 1 and self.mc_w == 4

    @property
    def a_pack_key(self) -> tuple:
        """Layouts with equal keys pack A to the same bytes."""
        return (self.M, self.K, self.Mp, self.Kp, self.mc_h, self.ka)

    @property
    def b_pack_key(self) -> tuple:
        return (self.K, self.N, self.Kp, self.Np, self.kb, self.mc_w)

    def pack_a(self, A: np.ndarray) -> np.ndarray:
        """(M, K) -> (height, width, 4) float32 texel array."""
        Ap = np.zeros((self.Mp, self.Kp), np.float32)
        Ap[:self.M, :self.K] = A
        t = Ap.reshape(self.Mp // self.mc_h, self.mc_h, self.Kp // self.ka, self.ka)
        return _rgba(t.transpose(0, 2, 1, 3).reshape(self.Mp // self.mc_h, self.Kp // self.ka, -1))

    def pack_b(self, B: np.ndarray) -> np.ndarray:
        """(K, N) -> (height, width, 4)."""
        Bp = np.zeros((self.Kp, self.Np), np.float32)
        Bp[:self.K, :self.N] = B
        t = Bp.reshape(self.Kp // self.kb, self.kb, self.Np // self.mc_w, self.mc_w)
        return _rgba(t.transpose(0, 2, 1, 3).reshape(self.Kp // self.kb, self.Np // self.mc_w, -1))

    def pack_c(self, C: np.ndarray) -> np.ndarray:
        """(M, N) -> the full-C texel array (height, width, 4)."""
        Cp = np.zeros((self.Mp, self.Np), np.float32)
        Cp[:self.M, :self.N] = C
        h, w = self.Mp // self.mc_h, self.Np // self.mc_w
        t = Cp.reshape(h, self.mc_h, w, self.mc_w).transpose(0, 2, 1, 3)
        return _rgba(t.reshape(h, w, -1))

    def unpack_c(self, targets: list[np.ndarray]) -> np.ndarray:
        """Render-target texel arrays (row-major i, j) -> C (M, N) float32."""
        full = np.empty((self.mrt_h * self.hc, self.mrt_w * self.wc, 4), np.float32)
        for t, arr in enumerate(targets):
            i, j = divmod(t, self.mrt_w)
            full[i * self.hc:(i + 1) * self.hc, j * self.wc:(j + 1) * self.wc] = arr
        n = self.mc_h * self.mc_w
        t = full[..., :n].reshape(full.shape[0], full.shape[1], self.mc_h, self.mc_w)
        C = t.transpose(0, 2, 1, 3).reshape(self.Mp, self.Np)
        return np.ascontiguousarray(C[:self.M, :self.N])


def _rgba(t: np.ndarray) -> np.ndarray:
    """Pad the channel axis to 4 (unused channels zero)."""
    if t.shape[-1] == 4:
        return np.ascontiguousarray(t, dtype=np.float32)
    out = np.zeros(t.shape[:-1] + (4,), np.float32)
    out[..., :t.shape[-1]] = t
    return out
