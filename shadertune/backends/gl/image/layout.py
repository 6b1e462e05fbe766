"""Memory layout of the image path (out=image): operands in their own row-major order.

Every operand is an RGBA32F texture or a storage buffer of vec4 holding the
caller's row-major array as it is: A (M x K) is KA = ceil(K/4) texels wide and
M high, texel (k4, m) = A[m, 4 k4 .. 4 k4 + 3]; B (K x N) is NB = ceil(N/4)
texels wide, texel (n4, k) = B[k, 4 n4 .. 4 n4 + 3]; C (M x N) likewise, and C
is written with imageStore.  Uploads and read-back therefore copy the caller's
bytes unchanged where K and N are multiples of 4; otherwise the last texel of a
row is part padding, and a GPU pass packs (or unpacks) the row (driver).  B has
4 * KA rows, the ones past K zero, so that a whole A texel always meets four B
rows that exist.

A fragment owns `rows` x `cols` outputs (cols a multiple of 4: cols // 4 C
texels).  Ownership is strided: fragment (x, y) owns rows y + i * hc and C
texels x + j * wc, so neighbouring fragments read neighbouring rows and texels
in the same instruction (coalesced loads, few distinct texels per quad).  Rows
and texels past C's edge are read clamped and never stored.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

_TEXEL = 16     # bytes of one RGBA32F texel / vec4


@dataclass(frozen=True)
class ImageLayout:
    M: int
    N: int
    K: int
    rows: int            # C rows a fragment owns
    cols: int            # C columns a fragment owns (a multiple of 4)
    np: int              # k-values per pass (a multiple of 4), clamped to 4 * KA
    passes: int
    hc: int              # fragments vertically: ceil(M / rows)
    wc: int              # fragments horizontally: ceil(NB / (cols / 4))

    @classmethod
    def plan(cls, M: int, N: int, K: int, *, rows: int, cols: int, np: int) -> "ImageLayout":
        if M <= 0 or N <= 0 or K <= 0:
            raise ValueError(f"GL layouts need M, N, K >= 1, got {M}x{N}x{K}")
        if rows < 1 or cols < 4 or cols % 4:
            raise ValueError(f"an image-path block is rows >= 1 x cols (a multiple of 4), "
                             f"got {rows} x {cols}")
        if np <= 0 or np % 4:
            raise ValueError(f"np={np} must be a positive multiple of 4 (k-values per A texel "
                             f"on the image path)")
        ka = -(-K // 4)
        np_eff = min(np, 4 * ka)
        nb = -(-N // 4)
        return cls(M, N, K, rows, cols, np_eff, math.ceil(ka / (np_eff // 4)),
                   hc=math.ceil(M / rows), wc=math.ceil(nb / (cols // 4)))

    # --- shape --------------------------------------------------------
    @property
    def KA(self) -> int:
        """A texels per row (k in 4s)."""
        return -(-self.K // 4)

    @property
    def NB(self) -> int:
        """B and C texels per row (columns in 4s)."""
        return -(-self.N // 4)

    @property
    def col_texels(self) -> int:
        return self.cols // 4

    @property
    def steps(self) -> int:
        """A-texel steps in a full pass."""
        return self.np // 4

    def pass_steps(self, p: int) -> int:
        """A-texel steps of pass p (the last one may be short)."""
        return min(self.steps, self.KA - p * self.steps)

    @property
    def viewport(self) -> tuple[int, int]:
        """(width, height) in fragments."""
        return self.wc, self.hc

    # --- storage ------------------------------------------------------
    @property
    def a_size(self) -> tuple[int, int]:
        return self.KA, self.M

    @property
    def b_size(self) -> tuple[int, int]:
        return self.NB, 4 * self.KA

    @property
    def c_size(self) -> tuple[int, int]:
        return self.NB, self.M

    @property
    def a_bytes(self) -> int:
        return self.KA * self.M * _TEXEL

    @property
    def b_bytes(self) -> int:
        return self.NB * 4 * self.KA * _TEXEL

    @property
    def a_packed_on_gpu(self) -> bool:
        """A's rows end mid-texel: a GPU pass pads them (K % 4 != 0)."""
        return self.K % 4 != 0

    @property
    def bc_packed_on_gpu(self) -> bool:
        """B's and C's rows end mid-texel: a GPU pass pads / unpads them (N % 4 != 0)."""
        return self.N % 4 != 0

    def largest_texture(self) -> int:
        """Widest or highest texture this layout needs, packing sources included
        (an unpadded row is a one-channel texture as wide as the row)."""
        sides = [self.KA, self.M, self.NB, 4 * self.KA]
        if self.a_packed_on_gpu:
            sides.append(self.K)
        if self.bc_packed_on_gpu:
            sides.append(self.N)
        return max(sides)

    def fragment_reads(self) -> tuple[int, int]:
        """(A texels, B texels) one fragment reads per A-texel step (4 k)."""
        return self.rows, 4 * self.col_texels
