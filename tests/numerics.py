"""Test helpers for numerical comparisons."""
import numpy as np


def rel_err(out, ref) -> float:
    """Relative Frobenius error of `out` against a float64 reference."""
    ref = np.asarray(ref, np.float64)
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(np.asarray(out, np.float64) - ref) / (denom if denom else 1.0))
