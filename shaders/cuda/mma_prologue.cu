{# The start of the mma.sync kernels (gemm_mma.cu, gemm_dmma.cu): shared
   stages, the lane's place in its warp and the warp's in the block, the
   block's work (block_range.cu) and the accumulators of acc_t from zero. #}
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* const As = reinterpret_cast<T*>(smem_raw);
    T* const Bs = As + {{ ST }} * STAGE_A;

{% if SK %}
    // (read again each segment: what derives from it is not held across segments)
    const int tid = opaque(threadIdx.x);
{% else %}
    const int tid = threadIdx.x;
{% endif %}
    const int warp = tid / 32, lane = tid % 32;
    const int gid = lane / 4, tig = lane % 4;        // the mma fragment's row group, column
    const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

{% include "cuda/block_range.cu" %}

    {{ acc_t }} acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = {{ "0.0f" if acc_t == "float" else "0.0" }};
