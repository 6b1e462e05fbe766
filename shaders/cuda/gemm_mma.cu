{% extends "cuda/gemm_base.cu" %}
{% block kind %}tensor cores, 3xTF32{% endblock %}
{% block about %}
// float32 accuracy from TF32 tensor cores (the "3xTF32" of CUTLASS): each
// operand x is split into big = tf32(x) and small = tf32(x - big); the product
// is small_a * big_b + big_a * small_b + big_a * big_b in float32 accumulators
// (small * small, ~2^-22 relative, is dropped). Every result is verified
// against float64 like any other config.
//
// Structure: a block computes a BM x BN tile of C with THREADS threads; warps
// tile it WM x WN, a warp issuing mma.sync m16n8k8 on (WM/16) x (WN/8) C
// fragments. Stages of BK k-values go global -> shared memory by cp.async,
// {{ ST }} buffers deep ({{ ST - 1 }} stages ahead), each operand in its stored
// orientation (no transposes; pads chosen so fragment reads are conflict-free).
// blockIdx.z splits K across the grid (ISAAC's K_G) into a workspace W; the
// partials are summed {{ "in this launch by the last block of each tile to finish (KR)" if KR else "by a second kernel" }}.
{% endblock %}
{% block constants %}
typedef float T;
typedef float4 frag_t;        // the K_G reduction's 16-byte accesses

constexpr int BM = {{ BM }}, BN = {{ BN }}, BK = {{ BK }}, FV = 4;
constexpr int WM = {{ WM }}, WN = {{ WN }}, MI = WM / 16, NI = WN / 8;
constexpr int WARPS_N = {{ warps_n }}, THREADS = {{ threads }};
constexpr int KT = BK, VEC = {{ VEC }};
constexpr int LOADS_A = {{ loads_a }}, LOADS_B = {{ loads_b }};
// Shared rows: A is {{ "[BK][LDA_S], m contiguous" if trans_a else "[BM][LDA_S], k contiguous" }}; B is {{ "[BN][LDB_S], k contiguous" if trans_b else "[BK][LDB_S], n contiguous" }}.
// A k-contiguous row is padded to 4 mod 32 words, an m/n-contiguous one to 8 mod 32:
// a fragment read (8 rows/columns by 4 k per warp) then hits 32 distinct banks.
constexpr int LDA_S = {{ lda_s }}, LDB_S = {{ ldb_s }};
constexpr int PA = {{ "BM" if trans_a else "BK" }} / VEC, PB = {{ "BK" if trans_b else "BN" }} / VEC;   // vectors per stored row
constexpr int KGRAN = {{ kgran }}, KG = {{ KG }};                        // K_G split grain, splits
constexpr int STAGE_A = {{ stage_a }}, STAGE_B = {{ stage_b }};    // elements per stage
static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % 8 == 0, "mma tiles");

{% endblock %}
{% block helpers %}
{% include "cuda/cp_async.cu" %}
{% include "cuda/cp_async_pinned.cu" %}

// x to TF32, round to nearest (ties away from zero), as cvt.rna.tf32.f32 does
// for finite x: add half a TF32 ulp to the magnitude bits and drop the low 13.
// Two integer instructions; ptxas expands cvt.rna.tf32 to ~4 on sm_90 (FSETP,
// SEL, LOP3, IADD). Infinities stay infinite; a NaN stays a
// NaN or becomes an infinity whose rest (x - big) is NaN, so C is NaN either way.
__device__ __forceinline__ unsigned tf32_rna(const float x)
{
    return (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
}

// x = big + small, both TF32; x - big is exact in float32.
__device__ __forceinline__ void split_tf32(const float x, unsigned& big, unsigned& small)
{
    big = tf32_rna(x);
    small = tf32_rna(x - __uint_as_float(big));
}

// d += a (16x8, row) * b (8x8, col); fragments as in the PTX ISA's m16n8k8 .tf32 layout.
__device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, const unsigned* b)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, { %0, %1, %2, %3 };\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

{% endblock %}
{% block prologue %}
{% include "cuda/mma_prologue.cu" %}

{% include "cuda/mma_copy.cu" %}

{% endblock %}
{% block main_loop %}
    // One stage: BK / 8 steps of (WM/16) x (WN/8) fragments, three mma each.
    auto compute = [&](const int s) {
        const T* const as = As + s * STAGE_A;
        const T* const bs = Bs + s * STAGE_B;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned a_big[MI][4], a_small[MI][4];
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int q = 0; q < 4; ++q) {   // a0..a3: rows gid, gid+8; k tig, tig+4
                    const int m = wm0 + i * 16 + gid + (q & 1) * 8, k = kk + tig + (q >> 1) * 4;
                    split_tf32(as[{{ "k * LDA_S + m" if trans_a else "m * LDA_S + k" }}], a_big[i][q], a_small[i][q]);
                }
            // The tensor cores' float32 accumulation truncates (round toward
            // zero): summed over all of K in them, the error grows with K
            // (notes/cuda.md, run O). So each k-step's three products start
            // from zero and are added to acc in round-to-nearest FADDs
            // (Ootomo & Yokota, 2022).
            // B's fragments are split column by column: only one is live.
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                unsigned b_big[2], b_small[2];
#pragma unroll
                for (int q = 0; q < 2; ++q) {   // b0, b1: k tig, tig+4; column gid
                    const int n = wn0 + j * 8 + gid, k = kk + tig + q * 4;
                    split_tf32(bs[{{ "n * LDB_S + k" if trans_b else "k * LDB_S + n" }}], b_big[q], b_small[q]);
                }
#pragma unroll
                for (int i = 0; i < MI; ++i) {   // the small terms first: they are the least significant
                    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    mma_tf32(t, a_small[i], b_big);
                    mma_tf32(t, a_big[i], b_small);
                    mma_tf32(t, a_big[i], b_big);
#pragma unroll
                    for (int q = 0; q < 4; ++q) acc[i][j][q] += t[q];
                }
            }
        }
    };

{% include "cuda/mma_pipeline.cu" %}

{% endblock %}
{% block epilogue %}
{% include "cuda/mma_epilogue.cu" %}
{% endblock %}
