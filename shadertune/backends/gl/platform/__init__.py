"""The GL platform under every kernel path: contexts (EGL, the compatibility profile,
one per thread), the entry points moderngl does not wrap, device limits, timing and
the GPU's clock, the texture pool, transfers, and the small objects a context keeps.

Nothing here knows a kernel path or a knob: the paths (mrt/, image/, asm/, compute/)
and the base kernel (kernel.py) are built on it (an import-linter contract in
pyproject.toml keeps it so)."""
