{# The in-launch K_G reduction (KR = 1): the tail of every GEMM kernel
   (gemm_base.cu puts it after the epilogue). Needs tid, m0, n0, M, N, BM, BN,
   THREADS, FV, frag_t, W, C, counters, alpha, beta in scope. #}

    // In-launch K_G reduction (threadFenceReduction pattern): publish this
    // split's partial, count the tile's finished splits; the last block to
    // finish sums all KG partials in the fixed order z = 0..KG-1 (so the result
    // does not depend on which block came last) and applies alpha, beta once.
    __shared__ int st_last;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        int* const cnt = counters + blockIdx.y * gridDim.x + blockIdx.x;
        const int done = atomicAdd(cnt, 1);
        st_last = done == {{ KG - 1 }};
        if (st_last) *cnt = 0;    // every split has arrived: reset for the next launch
    }
    __syncthreads();
    if (!st_last) return;
    __threadfence();
    const size_t MN = {{ "WSPLIT" if batch > 1 else "(size_t)M * N" }};   // K_G splits apart in W
{% set partial_loop %}
#pragma unroll 8
        for (int z = 0; z < {{ KG }}; ++z) {
{%- endset %}
{% set partial_at = "W + z * MN + o" %}
{% include "cuda/partials_sum.cu" %}
