{# Stream-K (SK > 0): opens the loop over this block's segments (gemm_base.cu
   puts it before the prologue; streamk_fixup.cu closes it). The same ranges as
   shadertune/backends/cuda/streamk.py. Needs BM, BN, KT, M, N, K in scope;
   sets sk_tile, sk_k0, sk_k1, sk_kt, sk_work, sk_whole, sk_slot for
   block_range.cu, the epilogue and the fixup. #}
    // Stream-K: the output's tiles (row-major over the N tiles) times their k
    // tiles of KT are one range of work units, cut into gridDim.x equal parts;
    // this block runs its part as segments, each one tile's run of k tiles.
    // A segment covering its whole tile writes C; the others write a partial to
    // W and the last of a tile's segments to finish adds them up (streamk_fixup.cu).
    // Unit indices are {{ sk_t }}: a 64-bit division is a long subroutine that
    // holds many registers, so 32 bits wherever units x blocks fit them.
    typedef {{ sk_t }} sk_t;
    const int sk_ntn = (N + BN - 1) / BN;                       // N tiles
    const int sk_kt = (K + KT - 1) / KT;                        // k tiles of a tile
    const sk_t sk_work = (sk_t)((M + BM - 1) / BM) * sk_ntn * sk_kt;
    const sk_t sk_begin = blockIdx.x * sk_work / gridDim.x, sk_end = (blockIdx.x + 1) * sk_work / gridDim.x;
{% if PS %}
    int sk_stage = 0;          // stages this block has run: the mbarriers' phases go on across segments
{% endif %}
    // opaque(x): x computed anew where it is used, not kept in registers across
    // segments (ptxas hoists what does not change out of the loop otherwise)
    auto opaque = [](unsigned x) { asm volatile("" : "+r"(x)); return (int)x; };
    for (sk_t sk_at = sk_begin; sk_at < sk_end; ) {
        const int sk_tile = (int)(sk_at / sk_kt);
        const int sk_k0 = (int)(sk_at - (sk_t)sk_tile * sk_kt);
        const int sk_k1 = (int)min((sk_t)sk_kt, sk_k0 + (sk_end - sk_at));
        const bool sk_whole = sk_k0 == 0 && sk_k1 == sk_kt;   // this segment is the tile's only one
        // A block's segments that share a tile are at most its first and its last:
        // their partials go to slots 2 b and 2 b + 1 of W.
        const int sk_slot = 2 * blockIdx.x + (sk_at != sk_begin);
        sk_at += sk_k1 - sk_k0;
        __syncthreads();       // every read of the previous segment's shared memory is done
