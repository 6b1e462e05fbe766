"""Strided regions of GL buffers, and the GPU programs that move them.

A Region is a matrix of float32 elements lying in a GL buffer as numpy lays out a
strided view: element (r, c) at `offset + r * sr + c * sc` (in elements).  GL
arrays (arrays.py) are regions; so are the operands a kernel reads where they lie
and the C it writes where the caller wants it.  Three compute programs move them,
all on the GPU (shaders/gl/arrays/):

- copy:   a region into another region (any strides; one may be the transpose of
          the other), a value into a region, or a region scaled in place;
- pack:   a region into RGBA32F texels (a texture, or a storage buffer of vec4 laid
          out like one) as a fragment kernel's layout holds an operand;
- unpack: a fragment kernel's result texels back into a region.

Each program is compiled once per context (kept with the context's compute
programs) and takes its shapes in uniforms.  A barrier follows every dispatch, so
what runs next (a kernel, a read-back) sees what it wrote.
"""
from __future__ import annotations

from dataclasses import dataclass

from ....errors import ContextError
from ....core.templates import read, render
from .context import state_of
from .uniforms import set_uniform
from .uninterrupted import uninterrupted

GROUP = 16                    # a work group is 16 x 16 invocations
MAX_GROUPS = 4096             # per dimension: the programs stride over larger regions
COPY, UNPACK = "gl/arrays/copy.comp", "gl/arrays/unpack.comp"
PACK = "gl/arrays/pack.comp.j2"
TEMPLATES = (COPY, PACK, UNPACK)
FLOAT = 4                     # bytes


@dataclass(frozen=True)
class Region:
    """rows x cols float32 elements of `buffer`: (r, c) at offset + r * sr + c * sc."""
    buffer: object
    offset: int
    rows: int
    cols: int
    sr: int
    sc: int

    @property
    def size(self) -> int:
        return self.rows * self.cols

    @property
    def T(self) -> "Region":
        return Region(self.buffer, self.offset, self.cols, self.rows, self.sc, self.sr)

    def sub(self, r0: int, r1: int, c0: int, c1: int) -> "Region":
        """Rows r0..r1-1 and columns c0..c1-1 (a tile of a product)."""
        return Region(self.buffer, self.offset + r0 * self.sr + c0 * self.sc, r1 - r0, c1 - c0,
                      self.sr, self.sc)

    def layout(self) -> tuple[str, int] | None:
        """('N', ld) where rows lie at a stride ld with contiguous elements (row-major
        with leading dimension ld), ('T', ld) where columns do (the stored layout of the
        transpose), None where neither (only a copy makes it one of the two).  A row or a
        column alone has no meaningful stride along it."""
        if self.cols == 1 or self.sc == 1:
            if self.rows == 1:
                return "N", max(self.cols, 1)
            return "N", self.sr
        if self.rows == 1 or self.sr == 1:
            return "T", self.sc
        return None

    @property
    def contiguous(self) -> bool:
        """Whether the elements are the buffer's floats offset .. offset + size - 1 in
        row-major order."""
        return (self.cols <= 1 or self.sc == 1) and (self.rows <= 1 or self.sr == self.cols)

    def span(self) -> tuple[int, int]:
        """[first, last + 1) elements of the buffer the region touches (empty: (o, o))."""
        if self.rows == 0 or self.cols == 0:
            return self.offset, self.offset
        last = self.offset + (self.rows - 1) * self.sr + (self.cols - 1) * self.sc
        return self.offset, last + 1

    def overlaps(self, other: "Region") -> bool:
        """Whether the two regions share an element: exact for two regions of one
        leading dimension (views of one matrix, as a blocked factorisation takes
        them), else whether their spans meet (a copy apart is then never wrong)."""
        if self.buffer is not other.buffer:
            return False
        (a0, a1), (b0, b1) = self.span(), other.span()
        if a0 >= b1 or b0 >= a1:
            return False
        rect_a, rect_b = self._rectangle(), other._rectangle()
        if rect_a is None or rect_b is None or rect_a[0] != rect_b[0]:
            return True
        (_, ar, ac, ah, aw), (_, br, bc, bh, bw) = rect_a, rect_b
        return ar < br + bh and br < ar + ah and ac < bc + bw and bc < ac + aw

    def _rectangle(self):
        """(ld, first row, first column, rows, columns) of the region as a rectangle of
        a row-major matrix of leading dimension ld (stored rows for a transposed
        region), or None where it is not one."""
        lay = self.layout()
        if lay is None:
            return None
        kind, ld = lay
        h, w = (self.rows, self.cols) if kind == "N" else (self.cols, self.rows)
        if ld < 1:
            return None
        r0, c0 = divmod(self.offset, ld)
        if c0 + w > ld:
            return None
        return ld, r0, c0, h, w


def contiguous_region(buffer, rows: int, cols: int, offset: int = 0) -> Region:
    return Region(buffer, offset, rows, cols, cols, 1)


# --- the programs ------------------------------------------------------------------
def _program(ctx, name: str, **params):
    """The context's compiled program of template `name` (kept with its compute programs,
    by source, and by name and parameters: a cached call renders nothing)."""
    kept = state_of(ctx).programs
    key = (name, tuple(sorted(params.items())))
    program = kept.get(key)
    if program is not None:
        return program
    source = render(name, **params) if name.endswith(".j2") else read(name)
    program = kept.get(source)
    if program is None:
        try:
            with uninterrupted():
                program = ctx.compute_shader(source)
        except Exception as e:   # moderngl: a plain Exception with the compiler's log
            raise ContextError(f"GL arrays need compute shaders (GL 4.3), which this context "
                               f"could not compile: {str(e).strip()[:500]}") from None
        kept[source] = program
    kept[key] = program
    return program


def _groups(w: int, h: int) -> tuple[int, int]:
    return (min(MAX_GROUPS, max(1, -(-w // GROUP))), min(MAX_GROUPS, max(1, -(-h // GROUP))))


def _set(program, **values) -> None:
    for name, value in values.items():
        u = program.get(name, None)
        if u is not None:
            set_uniform(u, value)


def _dispatch(ctx, prog, w: int, h: int) -> None:
    """Run `prog` over a w x h grid of elements (SIGINT held back: the first dispatch
    compiles on llvmpipe), then a barrier of every kind: the next kernel, copy or
    read-back sees its stores."""
    with uninterrupted():
        prog.run(*_groups(w, h))
    ctx.memory_barrier()


def copy(ctx, src: Region, dst: Region, scale: float = 1.0) -> None:
    """dst <- scale * src, element by element (the same shape; regions that overlap
    only where each element is read and written by itself, as a scale in place)."""
    if (src.rows, src.cols) != (dst.rows, dst.cols):
        raise ValueError(f"copy between regions of shapes {(src.rows, src.cols)} and {(dst.rows, dst.cols)}")
    if dst.size == 0:
        return
    prog = _program(ctx, COPY)
    src.buffer.bind_to_storage_buffer(0)
    dst.buffer.bind_to_storage_buffer(1)
    _set(prog, u_rows=dst.rows, u_cols=dst.cols, u_so=src.offset, u_sr=src.sr, u_sc=src.sc,
         u_do=dst.offset, u_dr=dst.sr, u_dc=dst.sc, u_fill=False, u_value=0.0, u_scale=float(scale))
    _dispatch(ctx, prog, dst.cols, dst.rows)


def fill(ctx, dst: Region, value: float) -> None:
    """Every element of dst <- value."""
    if dst.size == 0:
        return
    prog = _program(ctx, COPY)
    dst.buffer.bind_to_storage_buffer(0)
    dst.buffer.bind_to_storage_buffer(1)
    _set(prog, u_rows=dst.rows, u_cols=dst.cols, u_so=0, u_sr=0, u_sc=0,
         u_do=dst.offset, u_dr=dst.sr, u_dc=dst.sc, u_fill=True, u_value=float(value), u_scale=1.0)
    _dispatch(ctx, prog, dst.cols, dst.rows)


def pack(ctx, src: Region, dst, size: tuple[int, int], rh: int, cw: int, to_buffer: bool = False) -> None:
    """dst (an RGBA32F texture of `size` texels, or with to_buffer a storage buffer of
    size[0] x size[1] vec4) <- src packed rh x cw elements a texel, zero elsewhere."""
    if rh * cw > 4 or rh < 1 or cw < 1:
        raise ValueError(f"a texel holds at most 4 floats, got {rh} x {cw}")
    w, h = size
    prog = _program(ctx, PACK, to_buffer=to_buffer)
    src.buffer.bind_to_storage_buffer(0)
    if to_buffer:
        dst.bind_to_storage_buffer(1)
    else:
        dst.bind_to_image(0, read=False, write=True)
    _set(prog, u_w=w, u_h=h, u_rh=rh, u_cw=cw, u_rows=src.rows, u_cols=src.cols,
         u_so=src.offset, u_sr=src.sr, u_sc=src.sc)
    _dispatch(ctx, prog, w, h)


def unpack(ctx, src, size: tuple[int, int], origin: tuple[int, int], rh: int, cw: int,
           dst: Region) -> None:
    """The texels of `src` (a texture of `size` texels, texel (0, 0) at texel `origin` of
    the whole packing, rh x cw elements a texel) into dst, padding dropped."""
    w, h = size
    prog = _program(ctx, UNPACK)
    src.use(0)
    dst.buffer.bind_to_storage_buffer(1)
    _set(prog, src=0, u_w=w, u_h=h, u_ox=origin[0], u_oy=origin[1], u_rh=rh, u_cw=cw,
         u_rows=dst.rows, u_cols=dst.cols, u_do=dst.offset, u_dr=dst.sr, u_dc=dst.sc)
    _dispatch(ctx, prog, w, h)
