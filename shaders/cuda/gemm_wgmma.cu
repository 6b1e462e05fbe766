{% extends "cuda/gemm_base.cu" %}
{% block needs %}
// shadertune: needs sm_90a (wgmma)
{% endblock %}
{% block kind %}Hopper warpgroup MMA, 3xTF32{% endblock %}
{% block about %}
// float32 accuracy from TF32 tensor cores, as gemm_mma.cu (3xTF32: x = big +
// small, product small_a * big_b + big_a * small_b + big_a * big_b), issued as
// wgmma.mma_async (sm_90a): a warpgroup of 128 threads multiplies a 64 x WN
// tile per instruction, both operands read from shared memory by the tensor
// cores, so a k-step costs the warps no fragment loads and no per-warp splits.
//
// Structure: a block computes BM x BN of C with (BM/64) x (BN/WN) warpgroups.
// Stages of BK k-values go global -> shared memory by cp.async in their
// stored orientation, {{ ST }} buffers deep ({{ ST - 1 }} stages ahead). Each stage is
// split once, by all threads, into big and small halves written in the
// wgmma's K-major core-matrix layout (8 rows x 16 bytes per core matrix, no
// swizzle); two split buffers let the split of stage t+1 run while the
// tensor cores work on stage t. A stage's 3 * BK/8 wgmmas sum into a
// temporary from zero (the first one with scale-d = 0), which is added to the
// accumulators in round-to-nearest FADDs: the tensor cores' own accumulation
// truncates (see gemm_mma.cu), and a chain of 3 * BK/8 of them stays within
// ~{{ 3 * BK // 8 }} * 2^-24 of the stage's partial sum.
// blockIdx.z splits K across the grid (ISAAC's K_G) into a workspace W; the
// partials are summed {{ "in this launch by the last block of each tile to finish (KR)" if KR else "by a second kernel" }}.
{% endblock %}
{% block constants %}
typedef float T;
typedef float4 frag_t;        // the K_G reduction's 16-byte accesses

constexpr int BM = {{ BM }}, BN = {{ BN }}, BK = {{ BK }}, FV = 4;
constexpr int WN = {{ WN }}, MI = 1, NI = WN / 8, WG_N = BN / WN, THREADS = {{ threads }};
constexpr int KT = BK, VEC = {{ VEC }};
constexpr int LOADS_A = {{ loads_a }}, LOADS_B = {{ loads_b }};
// Stored-orientation stages: A is {{ "[BK][LDA_S], m contiguous" if trans_a else "[BM][LDA_S], k contiguous" }}; B is {{ "[BN][LDB_S], k contiguous" if trans_b else "[BK][LDB_S], n contiguous" }}.
// A k-contiguous row is padded by 4 words: the split's 16-byte reads of one
// k-quad from 8 consecutive rows then hit 8 distinct 16-byte bank groups.
constexpr int LDA_S = {{ lda_s }}, LDB_S = {{ ldb_s }};
constexpr int PA = {{ "BM" if trans_a else "BK" }} / VEC, PB = {{ "BK" if trans_b else "BN" }} / VEC;   // vectors per stored row
constexpr int KGRAN = {{ kgran }}, KG = {{ KG }};                        // K_G split grain, splits
constexpr int STAGE_A = {{ stage_a }}, STAGE_B = {{ stage_b }};    // elements per stored stage
// Split operands: rows x BK in core matrices (row group r/8, k-quad q) of
// 8 x 4 floats, q fastest: the core matrix next in k is 128 bytes on (the
// descriptor's leading byte offset), the next row group KC * 128 (its stride).
constexpr int KC = BK / 4, KS = BK / 8;
constexpr int SPL_A = {{ "0" if AR else "BM * BK" }}, SPL_B = BN * BK, SPL = 2 * (SPL_A + SPL_B);   // one buffer: big A, small A, big B, small B
constexpr unsigned LBO = 128, SBO = KC * 128;
static_assert(BM % 64 == 0 && BN % WN == 0 && WN % 8 == 0 && WN <= 256 && BK % 8 == 0, "wgmma tiles");

{% endblock %}
{% block helpers %}
{% include "cuda/cp_async.cu" %}
{% include "cuda/cp_async_pinned.cu" %}
{% include "cuda/wgmma_ops.cu" %}

{% if AR %}
// d (+)= a (64 x 8 from registers: this warp's rows 16 w + gid (+8), k tig
// (+4), the PTX ISA's A fragment of .m64nNk8 .tf32) * b (8 x WN, K-major).
template <int SCALE_D>
__device__ __forceinline__ void wgmma_tf32_rs(float (&d)[NI][4], const float (&a)[4], const unsigned long long db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %{{ wgmma_nreg + 5 }}, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n{{ WN }}k8.f32.tf32.tf32 {{ '{' }}{{ wgmma_regs }}{{ '}' }}, {{ '{' }}%{{ wgmma_nreg }}, %{{ wgmma_nreg + 1 }}, %{{ wgmma_nreg + 2 }}, %{{ wgmma_nreg + 3 }}{{ '}' }}, %{{ wgmma_nreg + 4 }}, p, 1, 1;\n}\n"
                 : {{ wgmma_outs }}
                 : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
                   "r"(__float_as_uint(a[3])), "l"(db), "n"(SCALE_D));
}
// A stage of A fragments: [k-step][big, small][a0..a3].
typedef float AFrag[KS][2][4];
// The registers a wgmma reads stay allocated and unchanged until it is waited for.
__device__ __forceinline__ void fence_a(AFrag& a)
{
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(a[s][h][q]) :: "memory");
}
{% endif %}
// Generic-proxy stores (the split) made visible to the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

{% endblock %}
{% block bounds %}, 1{% endblock %}
{% block prologue %}
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T* const Spl = reinterpret_cast<T*>(smem_raw);     // 2 split buffers
    T* const As = Spl + 2 * SPL;                        // {{ ST }} stored stages of A, then of B
    T* const Bs = As + {{ ST }} * STAGE_A;

{% include "cuda/wgmma_threads.cu" %}

    float acc[MI][NI][4], t[NI][4];
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[0][j][q] = t[j][q] = 0.0f;

{% include "cuda/mma_copy.cu" %}

    // Stored stage s -> split buffer b. Thread items run down the rows (row
    // fastest), so 8 consecutive lanes write one 128-byte core matrix.
    auto split = [&](const int s, const int b) {
{% if not AR %}
        const T* const as = As + s * STAGE_A;
{% endif %}
        const T* const bs = Bs + s * STAGE_B;
        T* const a_big = Spl + b * SPL;
        T* const b_big = a_big + 2 * SPL_A;
{% if not AR %}
#pragma unroll
        for (int l = 0; l < (BM * KC + THREADS - 1) / THREADS; ++l) {
            const int idx = tid + l * THREADS;
            if ((BM * KC) % THREADS != 0 && idx >= BM * KC) break;
            const int r = idx % BM, q = idx / BM;
{% if trans_a %}
            const float4 v = make_float4(as[(4 * q) * LDA_S + r], as[(4 * q + 1) * LDA_S + r],
                                         as[(4 * q + 2) * LDA_S + r], as[(4 * q + 3) * LDA_S + r]);
{% else %}
            const float4 v = *reinterpret_cast<const float4*>(as + r * LDA_S + 4 * q);
{% endif %}
            const int o = ((r / 8) * KC + q) * 32 + (r % 8) * 4;
            store_split(v, a_big + o, a_big + SPL_A + o);
        }
{% endif %}
#pragma unroll
        for (int l = 0; l < (BN * KC + THREADS - 1) / THREADS; ++l) {
            const int idx = tid + l * THREADS;
            if ((BN * KC) % THREADS != 0 && idx >= BN * KC) break;
            const int r = idx % BN, q = idx / BN;
{% if trans_b %}
            const float4 v = *reinterpret_cast<const float4*>(bs + r * LDB_S + 4 * q);
{% else %}
            const float4 v = make_float4(bs[(4 * q) * LDB_S + r], bs[(4 * q + 1) * LDB_S + r],
                                         bs[(4 * q + 2) * LDB_S + r], bs[(4 * q + 3) * LDB_S + r]);
{% endif %}
            const int o = ((r / 8) * KC + q) * 32 + (r % 8) * 4;
            store_split(v, b_big + o, b_big + SPL_B + o);
        }
    };

    // One stage's 3 * BK/8 wgmmas on split buffer b into t, from zero; the
    // small terms first (the least significant).
    const unsigned spl0 = static_cast<unsigned>(__cvta_generic_to_shared(Spl));
    const unsigned b_off = wn0 / 8 * KC * 128;
{% if AR %}
    // Stored stage s's A rows of this warp -> fragment registers, split.
    auto load_a = [&](const int s, AFrag& a) {
        const T* const as = As + s * STAGE_A;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
#pragma unroll
            for (int q = 0; q < 4; ++q) {   // a0..a3: rows gid, gid+8; k tig, tig+4
                const int r = wm0 + gid + (q & 1) * 8, k = 8 * ks + tig + (q >> 1) * 4;
                const float x = as[{{ "k * LDA_S + r" if trans_a else "r * LDA_S + k" }}];
                a[ks][0][q] = tf32_rna(x);
                a[ks][1][q] = tf32_rna(x - a[ks][0][q]);
            }
    };
{% else %}
    const unsigned a_off = (wm0 - (warp % 4) * 16) / 8 * KC * 128;   // the warpgroup's first row group
{% endif %}
{% set wgmma, a_big, a_small = ("wgmma_tf32_rs", "a[s][0]", "a[s][1]") if AR else ("wgmma_tf32", "smem_desc(a_big + ko)", "smem_desc(a_small + ko)") %}
    auto compute = [&](const int b, float (&t)[NI][4]{{ ", const AFrag& a" if AR }}) {
{% if AR %}
        const unsigned b_big = spl0 + b * SPL * 4 + b_off, b_small = b_big + SPL_B * 4;
{% else %}
        const unsigned a_big = spl0 + b * SPL * 4 + a_off, a_small = a_big + SPL_A * 4;
        const unsigned b_big = spl0 + b * SPL * 4 + 2 * SPL_A * 4 + b_off, b_small = b_big + SPL_B * 4;
{% endif %}
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < KS; ++s) {
            const unsigned ko = s * 256;    // two core matrices of k per step
            if (s == 0)
                {{ wgmma }}<0>(t, {{ a_small }}, smem_desc(b_big + ko));
            else
                {{ wgmma }}<1>(t, {{ a_small }}, smem_desc(b_big + ko));
            {{ wgmma }}<1>(t, {{ a_big }}, smem_desc(b_small + ko));
            {{ wgmma }}<1>(t, {{ a_big }}, smem_desc(b_big + ko));
        }
        wgmma_commit();
    };
{% if AR %}
    AFrag a0, a1;
{% endif %}

{% endblock %}
{% block main_loop %}
    // Pipeline: stored stages t+1 .. t+{{ ST - 1 }} in flight by cp.async; split
    // buffer t&1 holds stage t for the tensor cores while the threads split
    // stage t+1 into the other one{{ " (and load its A fragments into the other register set)" if AR }}.
#pragma unroll
    for (int s = 0; s < {{ ST - 1 }}; ++s) {
        if (s < ntiles) issue(kbeg + s * KT, s);
        cp_async_commit();
    }
    if (ntiles > 0) {
        cp_async_wait<{{ ST - 2 }}>();
        __syncthreads();
        split(0, 0);
{% if AR %}
        load_a(0, a0);
{% endif %}
        fence_proxy_async();
        __syncthreads();
    }
    // A stage's sum is added once its wgmmas end. (A second temporary, to
    // queue the next stage's wgmmas while this one is added, made ptxas
    // serialize every wgmma (warning C7514, nvcc 13.0) and spill at WN = 128.)
    auto step = [&](const int it{{ ", AFrag& a, AFrag& a_next" if AR }}) {
        fence_regs(t);
        compute(it & 1, t{{ ", a" if AR }});     // first: the tensor cores start while the copies are issued
        // the stored stage it-1 was split in iteration it-2: its buffer is free
        const int nx = it + {{ ST - 1 }};
        if (nx < ntiles) issue(kbeg + nx * KT, nx % {{ ST }});
        cp_async_commit();
        if (it + 1 < ntiles) {
            cp_async_wait<{{ ST - 2 }}>();     // stage it+1 landed (this thread's copies)
            __syncthreads();                   // (everyone's)
            split((it + 1) % {{ ST }}, (it + 1) & 1);
{% if AR %}
            load_a((it + 1) % {{ ST }}, a_next);
{% endif %}
            fence_proxy_async();
        }
        wgmma_wait<0>();
        fence_regs(t);
{% if AR %}
        fence_a(a);
{% endif %}
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[0][j][q] += t[j][q];
        __syncthreads();    // split buffer (it+1)&1 is complete; every warpgroup is done with it&1
    };
{% if AR %}
    // two iterations per trip: the register sets alternate by name, not by index
    for (int it = 0; it < ntiles; it += 2) {
        step(it, a0, a1);
        if (it + 1 < ntiles) step(it + 1, a1, a0);
    }
{% else %}
    for (int it = 0; it < ntiles; ++it) step(it);
{% endif %}
    cp_async_wait<0>();   // only empty groups are left

{% endblock %}
{% block epilogue %}
{% include "cuda/mma_epilogue.cu" %}
{% endblock %}
