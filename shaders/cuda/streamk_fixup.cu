{# Stream-K (SK > 0): after the epilogue, the tile's fixup, and the end of the
   segment loop streamk_loop.cu opened; the partials' sum is partials_sum.cu's.
   Needs tid, m0, n0, M, N, BM, BN, THREADS, FV, frag_t, W, C, counters,
   alpha, beta, sk_* in scope. #}
        if (!sk_whole) {
            // Publish this segment's partial (slot sk_slot, written by the
            // epilogue), count the tile's segments that have; the last sums the
            // partials of blocks b_lo .. b_hi in that order (so the result does not
            // depend on which came last), applies alpha and beta once, and resets
            // the counter for the next launch (threadFenceReduction, as KR). Block
            // b's partial of this tile is in slot 2 b + 1 where its range began
            // before the tile (the tile is its last segment), else in slot 2 b.
            __shared__ int sk_last;
            const sk_t t0 = (sk_t)sk_tile * sk_kt;                  // the tile's first unit
            const int b_lo = (int)(((t0 + 1) * gridDim.x - 1) / sk_work);
            const int b_hi = (int)(((t0 + sk_kt) * gridDim.x - 1) / sk_work);
            __threadfence();
            __syncthreads();
            if (tid == 0) {
                int* const cnt = counters + sk_tile;
                const int done = atomicAdd(cnt, 1);
                sk_last = done == b_hi - b_lo;
                if (sk_last) *cnt = 0;     // every segment has arrived
            }
            __syncthreads();
            if (sk_last) {
                __threadfence();
{% set partial_loop %}
#pragma unroll 1
        for (int b = b_lo; b <= b_hi; ++b) {   // (not unrolled: loads in flight would hold registers)
            const int slot = 2 * b + ((sk_t)b * sk_work / gridDim.x < t0);
{%- endset %}
{% set partial_at = "W + (size_t)slot * (BM * BN) + e" %}
{% filter indent(12, first=True) %}
{% include "cuda/partials_sum.cu" %}
{% endfilter %}
            }
        }
{% if PS %}
        sk_stage += ntiles;
{% endif %}
    }
