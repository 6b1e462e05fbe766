{# The start of the wgmma kernels (gemm_wgmma.cu, gemm_wgmma_ps.cu): the lane's
   place in its warp, the warp's in its warpgroup, the warpgroup's 64 x WN tile,
   and the block's work (block_range.cu). #}
{% if SK %}
    // (read again each segment: what derives from it is not held across segments)
    const int tid = opaque(threadIdx.x);
{% else %}
    const int tid = threadIdx.x;
{% endif %}
    const int warp = tid / 32, lane = tid % 32;
    const int gid = lane / 4, tig = lane % 4;        // the accumulator fragment's row group, column
    const int wg = warp / 4;
    // a warpgroup's 64 x WN tile; its warp w holds rows 16 w .. 16 w + 15
    const int wm0 = (wg / WG_N) * 64 + (warp % 4) * 16, wn0 = (wg % WG_N) * WN;

{% include "cuda/block_range.cu" %}
