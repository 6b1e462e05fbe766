{% extends "cuda/gemm_base.cu" %}
{% block needs %}
// shadertune: needs sm_90a (wgmma)
{% endblock %}
{% block kind %}Hopper warpgroup MMA, 3xTF32 on pre-split operands{% endblock %}
{% block about %}
// The arithmetic of gemm_wgmma.cu (3xTF32: per k-step of 8 the products
// small_a * big_b, big_a * small_b, big_a * big_b into a temporary started
// from zero each stage, added to the float32 sums once per stage), with the
// split taken out of the main loop: a first kernel ({{ kernel }}_pack) splits A
// and B once into big and small TF32 halves, written tile by tile in the
// layout the wgmma descriptors read (pack_split.cu). A stage of the GEMM is
// then one contiguous block of each operand, brought into shared memory by
// two bulk asynchronous copies (cp.async.bulk: the TMA engine, no tensor map)
// that one thread issues and an mbarrier counts in; no thread loads, splits
// or stores an operand, so the warps only issue wgmmas and add the sums.
// {{ ST }} stages in flight; a stage's buffer is refilled once every warpgroup's
// wgmmas on it are done. {{ "PS = 2: the sum is added once every two stages." if PS == 2 else "PS = 1: each stage's wgmmas are waited for, then its sum is added." }}
{% endblock %}
{% block constants %}
typedef float T;

constexpr int BM = {{ BM }}, BN = {{ BN }}, BK = {{ BK }}, ST = {{ ST }};
constexpr int WN = {{ WN }}, MI = 1, NI = WN / 8, WG_N = BN / WN, THREADS = {{ threads }};
constexpr int KT = BK;
constexpr int KGRAN = {{ kgran }}, KG = {{ KG }};
{% if SK %}
constexpr int FV = 4;
typedef float4 frag_t;        // stream-K's fixup: 16-byte accesses
{% endif %}
constexpr int KC = BK / 4, KS = BK / 8;
// A packed stage: A's big and small halves (BM x BK each), then B's (BN x BK).
constexpr int TILE_A = 2 * BM * BK, TILE_B = 2 * BN * BK, STAGE = TILE_A + TILE_B;
constexpr unsigned LBO = 128, SBO = KC * 128;
static_assert(BM % 64 == 0 && BN % WN == 0 && WN % 8 == 0 && WN <= 256 && BK % 8 == 0 && KG == 1, "wgmma tiles, no split-K");

{% endblock %}
{% block helpers %}
{% include "cuda/wgmma_ops.cu" %}
{% include "cuda/pack_split.cu" %}

// mbarriers (PTX ISA, "Parallel Synchronization and Communication
// Instructions: mbarrier"): a stage's barrier expects its copies' bytes;
// its phase completes when they have all landed.
__device__ __forceinline__ void mbar_init(const unsigned bar, const unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// The inits visible to the async proxy (the copies complete on them).
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect(const unsigned bar, const unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(const unsigned bar, const unsigned parity)
{
    asm volatile("{\n.reg .pred done;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// bytes (a multiple of 16, both addresses 16-byte aligned) global -> shared,
// counted in on the mbarrier bar.
__device__ __forceinline__ void bulk_copy(const unsigned dst, const void* src, const unsigned bytes, const unsigned bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// A and B are the packed operands (PA, PB of {{ kernel }}_pack).
{% endblock %}
{% block bounds %}, 1{% endblock %}
{% block prologue %}
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const unsigned stages = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned bars = stages + ST * STAGE * 4;      // ST mbarriers of 8 bytes after the stages

{% include "cuda/wgmma_threads.cu" %}

    // this block's row of packed A tiles and column of packed B tiles
    const int ktiles = (K + BK - 1) / BK;
    const T* const pa = A + (size_t)(m0 / BM) * ktiles * TILE_A;
    const T* const pb = B + (size_t)(n0 / BN) * ktiles * TILE_B;

    float acc[MI][NI][4], t[NI][4];
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[0][j][q] = t[j][q] = 0.0f;

    // k tile kt -> stage s (one thread).
    auto issue = [&](const int kt, const int s) {
        const unsigned bar = bars + 8 * s, dst = stages + s * STAGE * 4;
        mbar_arrive_expect(bar, STAGE * 4);
        bulk_copy(dst, pa + (size_t)kt * TILE_A, TILE_A * 4, bar);
        bulk_copy(dst + TILE_A * 4, pb + (size_t)kt * TILE_B, TILE_B * 4, bar);
    };
{% if SK %}
    // Stream-K: the mbarriers are made once (the first segment), their phases go
    // on across segments; stage and phase follow the block's stage count
    // sk_stage + it, and k tiles start at this segment's first, sk_k0 (KT = BK).
    if (tid == 0 && sk_stage == 0) {
{% else %}
    if (tid == 0) {
{% endif %}
#pragma unroll
        for (int s = 0; s < ST; ++s) mbar_init(bars + 8 * s, 1);
        mbar_init_fence();
    }
    __syncthreads();
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < ST; ++s)
            if (s < ntiles) issue({{ "sk_k0 + s, (sk_stage + s) % ST" if SK else "s, s" }});
    }

{% endblock %}
{% block main_loop %}
    // One stage's 3 * BK/8 wgmmas into t (from zero where a chain starts); the small terms first.
    const unsigned a_off = (wg / WG_N) * 8 * SBO, b_off = wn0 / 8 * SBO;
    auto compute = [&](const int s, float (&t)[NI][4], const bool start) {
        const unsigned a_big = stages + s * STAGE * 4 + a_off, a_small = a_big + BM * BK * 4;
        const unsigned b_big = stages + (s * STAGE + TILE_A) * 4 + b_off, b_small = b_big + BN * BK * 4;
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const unsigned ko = ks * 256;    // two core matrices of k per step
            if (ks == 0 && start)
                wgmma_tf32<0>(t, smem_desc(a_small + ko), smem_desc(b_big + ko));
            else
                wgmma_tf32<1>(t, smem_desc(a_small + ko), smem_desc(b_big + ko));
            wgmma_tf32<1>(t, smem_desc(a_big + ko), smem_desc(b_small + ko));
            wgmma_tf32<1>(t, smem_desc(a_big + ko), smem_desc(b_big + ko));
        }
        wgmma_commit();
    };

    auto merge = [&](float (&t)[NI][4]) {
        fence_regs(t);
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[0][j][q] += t[j][q];
    };
    // every warpgroup is done with stage it: refill it with k tile it + ST
    auto release = [&](const int it) {
        __syncthreads();
        if (tid == 0 && it + ST < ntiles) issue({{ "sk_k0 + it + ST, (sk_stage + it) % ST" if SK else "it + ST, it % ST" }});
    };
{% if PS == 2 %}
    // Stages in pairs: the second stage's wgmmas go on summing into the first
    // one's temporary (a chain of 6 * BK/8), so the tensor cores drain and the
    // sum is added once a pair; the first stage's buffer is refilled as soon
    // as its wgmmas are done. (A second temporary, added while the next
    // stage's wgmmas run, makes ptxas serialize the wgmmas: warning C7514.)
    for (int it = 0; it < ntiles; it += 2) {
{% set g0, g1 = ("(sk_stage + it)", "(sk_stage + it + 1)") if SK else ("it", "(it + 1)") %}
        mbar_wait(bars + 8 * ({{ g0 }} % ST), ({{ g0 }} / ST) & 1);
        fence_regs(t);
        compute({{ g0 }} % ST, t, true);
        const bool pair = it + 1 < ntiles;
        if (pair) {
            mbar_wait(bars + 8 * ({{ g1 }} % ST), ({{ g1 }} / ST) & 1);
            compute({{ g1 }} % ST, t, false);
            wgmma_wait<1>();    // the first stage's wgmmas are done
            release(it);
        }
        wgmma_wait<0>();
        merge(t);
        release(pair ? it + 1 : it);
    }
{% else %}
    for (int it = 0; it < ntiles; ++it) {
{% set g0 = "(sk_stage + it)" if SK else "it" %}
        mbar_wait(bars + 8 * ({{ g0 }} % ST), ({{ g0 }} / ST) & 1);
        fence_regs(t);
        compute({{ g0 }} % ST, t, true);
        wgmma_wait<0>();
        merge(t);
        release(it);
    }
{% endif %}

{% endblock %}
{% block epilogue %}
{% include "cuda/mma_epilogue.cu" %}
{% endblock %}
