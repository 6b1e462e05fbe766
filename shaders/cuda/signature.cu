{# The parameters of every GEMM kernel (gemm_base.cu), after its name; a
   batched problem adds the operands' per-product strides sA, sB. #}
{{ kernel }}(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
           T* __restrict__ W, int* __restrict__ counters, const int M, const int N, const int K,
           const int k_units, const T alpha, const T beta{{ batch_args }})
