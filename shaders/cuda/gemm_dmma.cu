{% extends "cuda/gemm_base.cu" %}
{% block kind %}FP64 tensor cores, DMMA{% endblock %}
{% block about %}
// float64 from Hopper's FP64 tensor cores: mma.sync m16n8k{{ MMA_K }} .f64 (sm_90+),
// every product and sum in IEEE double (no splitting, no lower-precision
// step); verified against a float64 reference like any other config.
//
// Structure: a block computes a BM x BN tile of C with THREADS threads; warps
// tile it WM x WN, a warp issuing mma.sync on (WM/16) x (WN/8) C fragments of
// 16 x 8. Stages of BK k-values go global -> shared memory by cp.async,
// {{ ST }} buffers deep ({{ ST - 1 }} stages ahead), each operand in its stored
// orientation. {{ "The main loop keeps the next k step's fragments in flight\n// across the stage boundary (dmma_pipeline.cu)." if FP else "The main loop reads a stage's fragments after its\n// barrier (mma_pipeline.cu)." }} blockIdx.z splits K across the grid (ISAAC's K_G) into a
// workspace W; the partials are summed {{ "in this launch by the last block of each tile to finish (KR)" if KR else "by a second kernel" }}.
{% endblock %}
{% block constants %}
typedef double T;
typedef double2 frag_t;       // the K_G reduction's 16-byte accesses

constexpr int BM = {{ BM }}, BN = {{ BN }}, BK = {{ BK }}, FV = 2;
constexpr int WM = {{ WM }}, WN = {{ WN }}, MI = WM / 16, NI = WN / 8;
constexpr int MMA_K = {{ MMA_K }}, KV = MMA_K / 4;   // k per mma; k values per thread and fragment row
constexpr int WARPS_N = {{ warps_n }}, THREADS = {{ threads }};
constexpr int KT = BK, VEC = {{ VEC }};
constexpr int LOADS_A = {{ loads_a }}, LOADS_B = {{ loads_b }};
// Shared rows: A is {{ "[BK][LDA_S], m contiguous" if trans_a else "[BM][LDA_S], k contiguous" }}; B is {{ "[BN][LDB_S], k contiguous" if trans_b else "[BK][LDB_S], n contiguous" }}.
// Every row is padded to 4 mod 16 doubles: a fragment read (8 rows or columns
// by 4 k per warp, 8 bytes a lane) then uses each of the 16 eight-byte bank
// pairs exactly twice, the least a 256-byte warp read can (two wavefronts).
constexpr int LDA_S = {{ lda_s }}, LDB_S = {{ ldb_s }};
constexpr int PA = {{ "BM" if trans_a else "BK" }} / VEC, PB = {{ "BK" if trans_b else "BN" }} / VEC;   // vectors per stored row
constexpr int KGRAN = {{ kgran }}, KG = {{ KG }};                        // K_G split grain, splits
constexpr int STAGE_A = {{ stage_a }}, STAGE_B = {{ stage_b }};    // elements per stage
static_assert(WM % 16 == 0 && WN % 8 == 0 && BK % MMA_K == 0, "mma tiles");
static_assert(LDA_S % 16 == 4 && LDB_S % 16 == 4, "conflict-free fragment reads");

{% endblock %}
{% block helpers %}
{% include "cuda/cp_async.cu" %}
{% include "cuda/cp_async_pinned.cu" %}
{% if FP %}

// cp_async_to where `live`, else nothing (no zero fill): a predicated copy,
// so a loop of them has no branch.
template <int BYTES>
__device__ __forceinline__ void cp_async_if(const unsigned s, const void* src, const bool live)
{
    if constexpr (BYTES == 16)
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n"
                     :: "r"(s), "l"(src), "r"((int)live));
    else
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.ca.shared.global [%0], [%1], %3;\n}\n"
                     :: "r"(s), "l"(src), "r"((int)live), "n"(BYTES));
}
{% endif %}

// d += a (16 x MMA_K, row) * b (MMA_K x 8, col) in IEEE double. Fragments as in
// the PTX ISA's m16n8k{{ MMA_K }} .f64 layout: a[r + 2 q] = A[gid + 8 r][tig + 4 q],
// b[q] = B[tig + 4 q][gid], d[c + 2 r] = D[gid + 8 r][2 tig + c].
__device__ __forceinline__ void mma_f64(double* d, const double* a, const double* b)
{
{% if MMA_K == 16 %}
    asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 { %0, %1, %2, %3 }, "
        "{ %4, %5, %6, %7, %8, %9, %10, %11 }, { %12, %13, %14, %15 }, { %0, %1, %2, %3 };\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
          "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
{% elif MMA_K == 8 %}
    asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 { %0, %1, %2, %3 }, "
        "{ %4, %5, %6, %7 }, { %8, %9 }, { %0, %1, %2, %3 };\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
{% else %}
    asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 { %0, %1, %2, %3 }, "
        "{ %4, %5 }, { %6 }, { %0, %1, %2, %3 };\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(b[0]));
{% endif %}
}

{% endblock %}
{% block bounds %}, 1{% endblock %}
{% block prologue %}
{% include "cuda/mma_prologue.cu" %}

{% include "cuda/mma_copy.cu" %}

{% endblock %}
{% block main_loop %}
{% if FP %}
{% include "cuda/dmma_pipeline.cu" %}
{% else %}
    // One stage: BK / MMA_K steps of (WM/16) x (WN/8) fragments. A's fragments
    // of a step are all held; B's one column of fragments at a time.
    auto compute = [&](const int s) {
        const T* const as = As + s * STAGE_A;
        const T* const bs = Bs + s * STAGE_B;
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            double a[MI][2 * KV];
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int q = 0; q < 2 * KV; ++q) {   // rows gid, gid + 8; k tig + 4 (q / 2)
                    const int m = wm0 + i * 16 + gid + (q & 1) * 8, k = kk + tig + (q >> 1) * 4;
                    a[i][q] = as[{{ "k * LDA_S + m" if trans_a else "m * LDA_S + k" }}];
                }
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                double b[KV];
#pragma unroll
                for (int q = 0; q < KV; ++q) {   // k tig + 4 q; column gid
                    const int n = wn0 + j * 8 + gid, k = kk + tig + q * 4;
                    b[q] = bs[{{ "n * LDB_S + k" if trans_b else "k * LDB_S + n" }}];
                }
#pragma unroll
                for (int i = 0; i < MI; ++i) mma_f64(acc[i][j], a[i], b);
            }
        }
    };

{% include "cuda/mma_pipeline.cu" %}
{% endif %}

{% endblock %}
{% block epilogue %}
{% include "cuda/mma_epilogue.cu" %}
{% endblock %}
