"""CUDA backend: generated SIMT GEMM kernels (shaders/cuda/gemm.cu) compiled
with NVRTC through CuPy, cuBLAS as the baseline.

    space.py     knobs, derived launch shape, restrictions, phase plan
    codegen.py   config -> CUDA source
    compiler.py  NVRTC -> cubin, on-disk cache
    driver.py    load, launch, CUDA-event timing
    baseline.py  cuBLAS (TF32 off) timing and operands
    tuning.py    short model-ranked candidate lists (default config, quick tuning)
    api.py       run_call: shadertune.matmul(..., backend="cuda") on this backend
"""
from .backend import CUDABackend

__all__ = ["CUDABackend"]
