{% extends "cuda/gemm_base.cu" %}
{% block kind %}SIMT{% endblock %}
{% block about %}
// Structure: a block computes a BM x BN tile of C with THREADS threads; warps
// tile it WM x WN; a lane owns TM x TN outputs as (TM/FV) x (TN/FV) fragments
// of FV x FV, strided so that a warp's 16-byte shared loads are conflict-free.
{% if ST %}
// Stages of KT = BK * KL k-values go global -> shared memory, {{ ST }} buffers deep:
// by cp.async (no registers) for an operand whose block is not transposed on
// the way, {{ ST - 1 }} stages ahead; through registers one stage ahead otherwise.
{% else %}
// Stages of KT = BK * KL k-values go global -> registers -> shared memory;
// with DB the next stage is prefetched while the current one is computed.
{% endif %}
// KL thread groups split a stage's k (ISAAC's K_L) and meet in shared memory;
// blockIdx.z splits K across the grid (ISAAC's K_G) into a workspace W; the
// partials are summed {{ "in this launch by the last block of each tile to finish (KR)" if KR else "by a second kernel" }}.
{% endblock %}
{% block constants %}
typedef {{ T }} T;
typedef {{ vec_t }} vec_t;    // one global load: VEC elements
typedef {{ frag_t }} frag_t;  // one 16-byte shared-memory fragment load

constexpr int BM = {{ BM }}, BN = {{ BN }}, BK = {{ BK }};
constexpr int TM = {{ TM }}, TN = {{ TN }}, FV = {{ FV }};
constexpr int WM = {{ WM }}, WN = {{ WN }};
constexpr int LANES_M = {{ lanes_m }}, LANES_N = {{ lanes_n }}, WARPS_N = {{ warps_n }};
constexpr int THREADS_MN = {{ threads_mn }}, THREADS = {{ threads }};
constexpr int KT = {{ KT }}, VEC = {{ VEC }};
constexpr int LOADS_A = {{ loads_a }}, LOADS_B = {{ loads_b }};
constexpr int LDA_S = {{ lda_s }}, LDB_S = {{ ldb_s }};            // padded shared rows
// Global-load index -> (row r, vector column cv) of the stored block: RA/RB
// rows, PA/PB vectors side by side. Where the store to shared memory
// transposes (scalar stores) P covers 32 bytes, so a warp spans 16+ rows and
// the scattered stores hit distinct banks (PAD = 16 bytes); else P = a row
// and the map is written plainly (r = idx / P): the grouped formula costs
// registers per load, and with them ptxas issues the prefetch after the FMAs
// (notes/cuda.md, "SASS comparison").
constexpr int RA = {{ ra }}, PA = {{ pa }}, RB = {{ rb }}, PB = {{ pb }};
static_assert((LOADS_A * THREADS) % (RA * PA) == 0 && (LOADS_B * THREADS) % (RB * PB) == 0, "load map");
constexpr int KGRAN = {{ kgran }}, KG = {{ KG }};                        // K_G split grain, splits
constexpr int STAGE_A = {{ stage_a }}, STAGE_B = {{ stage_b }};    // elements per stage
{% endblock %}
{% block helpers %}
{% if ST %}

{% include "cuda/cp_async.cu" %}
{% endif %}

{% endblock %}
{% block prologue %}
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* const As = reinterpret_cast<T*>(smem_raw);
    T* const Bs = As + {{ nbuf }} * STAGE_A;

    const int tid = threadIdx.x;
    const int kslice = tid / THREADS_MN;             // K_L group of this thread
    const int warp = (tid % THREADS_MN) / 32, lane = tid % 32;
    const int row0 = (warp / WARPS_N) * WM + (lane / LANES_N) * FV;
    const int col0 = (warp % WARPS_N) * WN + (lane % LANES_N) * FV;

{% include "cuda/block_range.cu" %}

    T acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

{% if not async_a or not async_b %}
    vec_t ra[{{ "1" if async_a else "LOADS_A" }}], rb[{{ "1" if async_b else "LOADS_B" }}];
{% endif %}

    // Global -> registers for the stage starting at k0{{ " (operands not copied by cp.async)" if ST }}.
    // Vectors never straddle an edge (the space requires VEC | the contiguous
    // extent), so one test each; what lies outside the matrix reads as zero.
    auto load = [&](const int k0) {
{% if not async_a %}
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l) {
            const int idx = tid + l * THREADS;
{% if trans_a %}
            {{ rowcol_a }}   // r: k, c: m
            const int gk = k0 + r, gm = m0 + c;
            ra[l] = (gk < kend && gm < M) ? *reinterpret_cast<const vec_t*>(A + (size_t)gk * M + gm) : {{ vec_zero }};
{% else %}
            {{ rowcol_a }}   // r: m, c: k
            const int gm = m0 + r, gk = k0 + c;
            ra[l] = (gm < M && gk < kend) ? *reinterpret_cast<const vec_t*>(A + (size_t)gm * K + gk) : {{ vec_zero }};
{% endif %}
        }
{% endif %}
{% if not async_b %}
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l) {
            const int idx = tid + l * THREADS;
{% if trans_b %}
            {{ rowcol_b }}   // r: n, c: k
            const int gn = n0 + r, gk = k0 + c;
            rb[l] = (gn < N && gk < kend) ? *reinterpret_cast<const vec_t*>(B + (size_t)gn * K + gk) : {{ vec_zero }};
{% else %}
            {{ rowcol_b }}   // r: k, c: n
            const int gk = k0 + r, gn = n0 + c;
            rb[l] = (gk < kend && gn < N) ? *reinterpret_cast<const vec_t*>(B + (size_t)gk * N + gn) : {{ vec_zero }};
{% endif %}
        }
{% endif %}
    };

    // Registers -> shared stage s. B is always k-major; A is k-major when
    // trans (Li-Dongarra's transposed A block) so fragments load 16 bytes wide.
    auto store = [&](const int s) {
        T* const as = As + s * STAGE_A;
        T* const bs = Bs + s * STAGE_B;
{% if not async_a %}
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l) {
            const int idx = tid + l * THREADS;
            {{ rowcol_a }}
{% if scatter_a %}
{% for v in range(VEC) %}
            as[(c + {{ v }}) * LDA_S + r] = ra[l]{{ comp[v] }};
{% endfor %}
{% else %}
            *reinterpret_cast<vec_t*>(as + r * LDA_S + c) = ra[l];
{% endif %}
        }
{% endif %}
{% if not async_b %}
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l) {
            const int idx = tid + l * THREADS;
            {{ rowcol_b }}
{% if scatter_b %}
{% for v in range(VEC) %}
            bs[(c + {{ v }}) * LDB_S + r] = rb[l]{{ comp[v] }};
{% endfor %}
{% else %}
            *reinterpret_cast<vec_t*>(bs + r * LDB_S + c) = rb[l];
{% endif %}
        }
{% endif %}
    };
{% if ST %}

    // Global -> shared stage s by cp.async, for the operands whose block is
    // not transposed on the way (a transposing copy goes element by element,
    // and ptxas hoists an address per element: +60-130 registers, notes/cuda.md).
    auto issue = [&](const int k0, const int s) {
{% if async_a %}
        T* const as = As + s * STAGE_A;
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l) {
            const int idx = tid + l * THREADS;
            {{ rowcol_a }}
{% if trans_a %}
            const int gk = k0 + r, gm = m0 + c;
            const bool ok = gk < kend && gm < M;
            cp_async<{{ vbytes }}>(as + r * LDA_S + c, ok ? A + (size_t)gk * M + gm : A, ok);
{% else %}
            const int gm = m0 + r, gk = k0 + c;
            const bool ok = gm < M && gk < kend;
            cp_async<{{ vbytes }}>(as + r * LDA_S + c, ok ? A + (size_t)gm * K + gk : A, ok);
{% endif %}
        }
{% endif %}
{% if async_b %}
        T* const bs = Bs + s * STAGE_B;
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l) {
            const int idx = tid + l * THREADS;
            {{ rowcol_b }}   // r: k, c: n
            const int gk = k0 + r, gn = n0 + c;
            const bool ok = gk < kend && gn < N;
            cp_async<{{ vbytes }}>(bs + r * LDB_S + c, ok ? B + (size_t)gk * N + gn : B, ok);
        }
{% endif %}
    };
{% endif %}

    // One stage of FMAs: this thread's K_L slice of the KT rows.
    auto compute = [&](const int s) {
        const T* const as = As + s * STAGE_A;
        const T* const bs = Bs + s * STAGE_B;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const int k = kslice * BK + kk;
            T a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM / FV; ++i) {
{% if trans %}
                const frag_t f = *reinterpret_cast<const frag_t*>(as + k * LDA_S + row0 + i * LANES_M * FV);
{% for v in range(FV) %}
                a[i * FV + {{ v }}] = f{{ fcomp[v] }};
{% endfor %}
{% else %}
#pragma unroll
                for (int v = 0; v < FV; ++v) a[i * FV + v] = as[(row0 + i * LANES_M * FV + v) * LDA_S + k];
{% endif %}
            }
#pragma unroll
            for (int j = 0; j < TN / FV; ++j) {
                const frag_t f = *reinterpret_cast<const frag_t*>(bs + k * LDB_S + col0 + j * LANES_N * FV);
{% for v in range(FV) %}
                b[j * FV + {{ v }}] = f{{ fcomp[v] }};
{% endfor %}
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
    };

{% endblock %}
{% block main_loop %}
{% if ST %}
    // {{ ST }}-stage pipeline: the cp.async operands run {{ ST - 1 }} stages ahead (stages
    // t+1 .. t+{{ ST - 1 }} in flight while stage t is computed); the others, if any,
    // one stage ahead through registers. One barrier per stage: it publishes
    // stage t and frees the buffer of stage t-1, which the next copy overwrites.
#pragma unroll
    for (int s = 0; s < {{ ST - 1 }}; ++s) {
        if (s < ntiles) issue(kbeg + s * KT, s);
        cp_async_commit();
    }
{% if not (async_a and async_b) %}
    if (ntiles > 0) { load(kbeg); store(0); }
{% endif %}
    for (int t = 0; t < ntiles; ++t) {
        cp_async_wait<{{ ST - 2 }}>();
        __syncthreads();
        const int nx = t + {{ ST - 1 }};
        if (nx < ntiles) issue(kbeg + nx * KT, nx % {{ ST }});
        cp_async_commit();
{% if not (async_a and async_b) %}
        if (t + 1 < ntiles) load(kbeg + (t + 1) * KT);
        compute(t % {{ ST }});
        if (t + 1 < ntiles) store((t + 1) % {{ ST }});
{% else %}
        compute(t % {{ ST }});
{% endif %}
    }
    cp_async_wait<0>();   // only empty groups are left; the buffers may be reused
{% elif DB %}
    // Double buffering: one barrier per stage; stage t+1 is fetched into
    // registers before stage t's FMAs and lands in the other buffer after them.
    if (ntiles > 0) { load(kbeg); store(0); }
    __syncthreads();
    for (int t = 0; t < ntiles; ++t) {
        const int cur = t & 1;
        if (t + 1 < ntiles) load(kbeg + (t + 1) * KT);
        compute(cur);
        if (t + 1 < ntiles) store(cur ^ 1);
        __syncthreads();
    }
{% else %}
    for (int t = 0; t < ntiles; ++t) {
        load(kbeg + t * KT);
        store(0);
        __syncthreads();
        compute(0);
        __syncthreads();
    }
{% endif %}

{% endblock %}
{% block epilogue %}
{% if KL > 1 %}
    // K_L: groups 1..KL-1 park their partial tiles in shared memory (the stage
    // buffers are free now), group 0 adds them up and writes C.
    __syncthreads();
    T* const red = As;
    if (kslice > 0) {
        T* const mine = red + (kslice - 1) * (BM * BN);
#pragma unroll
        for (int i = 0; i < TM / FV; ++i)
#pragma unroll
            for (int r = 0; r < FV; ++r)
#pragma unroll
                for (int j = 0; j < TN / FV; ++j)
#pragma unroll
                    for (int c = 0; c < FV; ++c)
                        mine[(row0 + i * LANES_M * FV + r) * BN + col0 + j * LANES_N * FV + c] = acc[i * FV + r][j * FV + c];
    }
    __syncthreads();
{% if KR %}
    if (kslice == 0) {
{% else %}
    if (kslice > 0) return;
{% endif %}
#pragma unroll
    for (int s = 0; s < {{ KL - 1 }}; ++s) {
        const T* const part = red + s * (BM * BN);
#pragma unroll
        for (int i = 0; i < TM / FV; ++i)
#pragma unroll
            for (int r = 0; r < FV; ++r)
#pragma unroll
                for (int j = 0; j < TN / FV; ++j)
#pragma unroll
                    for (int c = 0; c < FV; ++c)
                        acc[i * FV + r][j * FV + c] += part[(row0 + i * LANES_M * FV + r) * BN + col0 + j * LANES_N * FV + c];
    }
{% if KR %}
    }
{% endif %}
{% endif %}

    // Epilogue: {{ "raw partial sums to this split's slice of W (the reduce kernel applies alpha, beta)" if KG > 1 else "C = alpha * acc + beta * C; C is not read when beta == 0 (BLAS)" }}.
{% if KG > 1 %}
    T* const out = W + (size_t)blockIdx.z * {{ wsplit }};
{% else %}
    T* const out = C;
{% endif %}
{% if KR and KL > 1 %}
    if (kslice == 0)
{% endif %}
#pragma unroll
    for (int i = 0; i < TM / FV; ++i) {
#pragma unroll
        for (int r = 0; r < FV; ++r) {
            const int gm = m0 + row0 + i * LANES_M * FV + r;
            if (gm >= M) continue;
#pragma unroll
            for (int j = 0; j < TN / FV; ++j) {
                const int gn = n0 + col0 + j * LANES_N * FV;
{% if c_vec %}
                if (gn < N) {   // N % FV == 0: the fragment is all in or all out
                    frag_t v;
{% for c in range(FV) %}
                    v{{ fcomp[c] }} = {{ "acc[i * FV + r][j * FV + %d]" % c if KG > 1 else "alpha * acc[i * FV + r][j * FV + %d]" % c }};
{% endfor %}
{% if KG == 1 %}
                    if (beta != T(0)) {
                        const frag_t o = *reinterpret_cast<const frag_t*>(out + (size_t)gm * N + gn);
{% for c in range(FV) %}
                        v{{ fcomp[c] }} += beta * o{{ fcomp[c] }};
{% endfor %}
                    }
{% endif %}
                    *reinterpret_cast<frag_t*>(out + (size_t)gm * N + gn) = v;
                }
{% else %}
#pragma unroll
                for (int c = 0; c < FV; ++c) {
                    if (gn + c >= N) break;
                    T* const p = out + (size_t)gm * N + gn + c;
{% if KG > 1 %}
                    *p = acc[i * FV + r][j * FV + c];
{% else %}
                    *p = alpha * acc[i * FV + r][j * FV + c] + (beta != T(0) ? beta * *p : T(0));
{% endif %}
                }
{% endif %}
            }
        }
    }
{% endblock %}
