"""Measured ceilings (the roofline): the backend-neutral parts.

    m = backend.measure_ceilings("quick")   # each backend measures its own (Backend contract)
    save("results/ceilings.json", merge(gl_m, cuda_m))
    backend.roofline(problem, config, load("results/ceilings.json"))

Here: the ceilings file (store.py: save, load, merge, the software-renderer flag,
the unit of each ceiling) and what every backend's model reads them with
(bounds.py).  The models and microbenchmarks belong to their backends
(backends/gl/roofline.py and microbench.py, backends/cuda/roofline.py and
microbench.py); a measurement taken on a software renderer is flagged
(store.software_reason) and is no roofline.
"""
from .bounds import flat, need, peak_line
from .store import CeilingsError, load, mark_software, merge, save, software_reason, unit_of

__all__ = ["save", "load", "merge", "mark_software", "software_reason", "CeilingsError", "unit_of",
           "flat", "need", "peak_line"]
