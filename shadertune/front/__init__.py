"""The front door: matmul (matmul), tune (tuning), explain (explanation), what
config= asks for (requests), first-use tuning (first_use), the kernels matmul keeps
(kernel_cache) and SHADERTUNE_PRINT_TUNING (print_tuning).  The package's root
exports matmul, tune and explain."""
