{# Where this block's tile lies: m0, n0, and for a batched problem (batch > 1)
   the product it belongs to. Included by every GEMM template right after
   tid; needs BM, BN, A, B, C, W, M, N and (batched) sA, sB in scope. #}
{% if batch > 1 %}
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
