{# The pack kernel of gemm_wgmma_ps.cu (PS = 1): op(A) and op(B)^T split into
   TF32 halves and laid out tile by tile as the wgmma descriptors read them.
   Needs BM, BN, BK, KC and store_split (wgmma_ops.cu) in scope. #}
// A packed operand of R rows (M for A, N for B) in tiles of RB rows (BM, BN):
// [row tile][k tile][big, small][RB x BK floats], each half in K-major core
// matrices of 8 rows x 4 k (the order gemm_wgmma.cu's split writes: row
// group r / 8, then the k-quad q, then the row r % 8), rows past R and k past K
// zero. A stage of the GEMM is then one contiguous block per operand.
// One thread makes one quad (4 k of one row) of both halves: the packed index
// i runs in the packed order, so a warp's 16-byte stores are contiguous.
template <int RB, bool K_CONTIG>
__device__ __forceinline__ void pack_quad(const float* __restrict__ X, float* __restrict__ P, const int R,
                                          const int K, const int ktiles, const long long i)
{
    constexpr int TQ = RB * KC;                       // quads in one half of a tile
    const long long tile = i / TQ;
    const int qi = static_cast<int>(i - tile * TQ);
    const int rt = static_cast<int>(tile / ktiles), kt = static_cast<int>(tile - (long long)rt * ktiles);
    const int r = rt * RB + (qi / (8 * KC)) * 8 + qi % 8, k = kt * BK + 4 * ((qi / 8) % KC);
    float4 v;
    if (K_CONTIG && r < R && k + 3 < K && ((reinterpret_cast<unsigned long long>(X + (size_t)r * K + k) & 15) == 0)) {
        v = *reinterpret_cast<const float4*>(X + (size_t)r * K + k);
    } else {
        float e[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
            e[j] = r < R && k + j < K ? X[K_CONTIG ? (size_t)r * K + k + j : (size_t)(k + j) * R + r] : 0.0f;
        v = make_float4(e[0], e[1], e[2], e[3]);
    }
    float* const big = P + tile * (2 * RB * BK) + 4 * qi;
    store_split(v, big, big + RB * BK);
}

// A (stored {{ "K x M" if trans_a else "M x K" }}) -> PA, B (stored {{ "N x K" if trans_b else "K x N" }}) -> PB; PACK_THREADS a block.
constexpr int PACK_THREADS = 256;
extern "C" __global__ void __launch_bounds__(PACK_THREADS)
{{ kernel }}_pack(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ PA,
              float* __restrict__ PB, const int M, const int N, const int K)
{
    const int ktiles = (K + BK - 1) / BK;
    const long long qa = (long long)((M + BM - 1) / BM) * ktiles * (BM * KC);
    const long long qb = (long long)((N + BN - 1) / BN) * ktiles * (BN * KC);
    const long long i = (long long)blockIdx.x * PACK_THREADS + threadIdx.x;
    if (i < qa)
        pack_quad<BM, {{ "false" if trans_a else "true" }}>(A, PA, M, K, ktiles, i);
    else if (i - qa < qb)
        pack_quad<BN, {{ "true" if trans_b else "false" }}>(B, PB, N, K, ktiles, i - qa);
}
