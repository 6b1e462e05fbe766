{# Where this block's work lies: its tile m0, n0 (for a batched problem,
   batch > 1, also the product it belongs to) and its k range kbeg..kend of
   ntiles stages; with stream-K (SK), the current segment's. Every GEMM
   template includes it after tid; needs BM, BN, KT, KG, KGRAN, A, B, C, W,
   M, N, K, k_units, (batched) sA, sB and (SK) sk_* in scope. #}
{% if SK %}
    // Stream-K: this segment's tile sk_tile and its k tiles [sk_k0, sk_k1)
    // (streamk_loop.cu); one product.
    const int m0 = sk_tile / sk_ntn * BM, n0 = sk_tile % sk_ntn * BN;
    const int kbeg = sk_k0 * KT, kend = min(K, sk_k1 * KT);
    const int ntiles = sk_k1 - sk_k0;
{% elif batch > 1 %}
    // Batched: blockIdx.y = product * MTILES + M tile. A and B step sA, sB
    // elements per product (0: a broadcast operand), C and this product's
    // slice of the K_G workspace M * N (C's products are contiguous); W's
    // splits lie WSPLIT = M * N * (products in this launch) apart.
    constexpr int MTILES = {{ mtiles }};
    const int bz = blockIdx.y / MTILES;
    const int m0 = (blockIdx.y - bz * MTILES) * BM, n0 = blockIdx.x * BN;
    A += bz * sA;
    B += bz * sB;
    C += (size_t)bz * M * N;
    W += (size_t)bz * M * N;
    const size_t WSPLIT = (size_t)M * N * (gridDim.y / MTILES);
{% else %}
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
{% endif %}
{% if not SK %}
    // Split z: grains [z * units / KG, (z + 1) * units / KG), balanced to one grain.
    // KG (= gridDim.z) is a constant: the division is a multiply-high, and the
    // product is 32-bit where k_units * KG fits.
    const int kbeg = min(K, KGRAN * (int)(({{ split_t }})blockIdx.z * k_units / KG));
    const int kend = min(K, KGRAN * (int)(({{ split_t }})(blockIdx.z + 1) * k_units / KG));
    const int ntiles = kend > kbeg ? (kend - kbeg + KT - 1) / KT : 0;
{% endif %}
