#!/usr/bin/env python3
"""What a renderer does with float32 subnormals (|x| < 1.18e-38) in shadertune.matmul.

    scripts/probe-subnormals [--backend gl,cuda] [--config default,naive]

Prints, for each case, the float64 reference, numpy's float32 result and the
backend's, and a verdict per backend: 'kept' (every subnormal result right within
float32 rounding), 'flushed' (inputs or results read as zero) or 'mixed'.
docs/semantics.md records the answers per renderer.
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import shadertune  # noqa: E402
import shadertune.front.matmul  # noqa: E402

TINY = np.float32(1e-39)          # subnormal: float32's smallest normal is 1.18e-38
F = np.float32
CASES = [
    # (name, A, B, alpha, beta, out before)
    ("subnormal input x 1", [[TINY]], [[1.0]], 1.0, 0.0, None),
    ("subnormal input x 2^20", [[TINY]], [[2.0 ** 20]], 1.0, 0.0, None),
    ("normal x normal -> subnormal", [[F(1e-20)]], [[F(1e-19)]], 1.0, 0.0, None),
    ("sum of two subnormals", [[TINY, TINY]], [[1.0], [1.0]], 1.0, 0.0, None),
    ("normal - normal -> subnormal", [[F(1.5e-38), F(-1.4e-38)]], [[1.0], [1.0]], 1.0, 0.0, None),
    ("alpha scales into subnormal", [[1.0]], [[F(1e-30)]], 1e-10, 0.0, None),
    ("beta * subnormal out", [[0.0]], [[0.0]], 1.0, 1.0, TINY),
]


def probe(backend: str, config) -> list[tuple]:
    rows = []
    for name, a, b, alpha, beta, before in CASES:
        A, B = np.array(a, np.float32), np.array(b, np.float32)
        out = None if before is None else np.full((A.shape[0], B.shape[1]), before, np.float32)
        ref = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + (beta * float(before) if beta else 0.0)
        got = shadertune.matmul(A, B, out, backend=backend, config=config, alpha=alpha, beta=beta)
        np32 = np.float32(alpha) * (A @ B)[0, 0] + (np.float32(beta) * before if beta else np.float32(0))
        rows.append((name, float(ref[0, 0]), float(np32), float(got[0, 0])))
    return rows


def verdict(rows) -> str:
    kept = [abs(g - r) <= 1e-6 * abs(r) + 1e-45 for _, r, _, g in rows]
    zero = [g == 0.0 for _, _, _, g in rows]
    return "kept" if all(kept) else "flushed" if all(zero) else "mixed"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="gl", help="comma-separated: gl, cuda")
    p.add_argument("--config", default="default", help="comma-separated configs/presets")
    args = p.parse_args()
    for backend in args.backend.split(","):
        be = shadertune.front.matmul.backend(backend)
        dev = be.device()
        print(f"# {backend}: {dev.renderer} | {dev.driver}")
        for config in args.config.split(","):
            try:
                rows = probe(backend, config)
            except ValueError as e:      # a config of another backend (naive is GL's)
                print(f"{backend} {config}: skipped ({e})")
                continue
            for name, ref, np32, got in rows:
                print(f"{config:10s} {name:32s} ref {ref:10.3e}  numpy-f32 {np32:10.3e}  {backend} {got:10.3e}")
            print(f"{backend} {config}: subnormals {verdict(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
