{# The in-launch K_G reduction (KR = 1): the tail of every GEMM kernel
   (gemm_base.cu puts it after the epilogue). Needs tid, m0, n0, M, N, BM, BN,
   THREADS, FV, frag_t, W, C, counters, alpha, beta in scope. #}

    // In-launch K_G reduction (threadFenceReduction pattern): publish this
    // split's partial, count the tile's finished splits; the last block to
    // finish sums all KG partials in the fixed order z = 0..KG-1 (so the result
    // does not depend on which block came last) and applies alpha, beta once.
    __shared__ int st_last;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        int* const cnt = counters + blockIdx.y * gridDim.x + blockIdx.x;
        const int done = atomicAdd(cnt, 1);
        st_last = done == {{ KG - 1 }};
        if (st_last) *cnt = 0;    // every split has arrived: reset for the next launch
    }
    __syncthreads();
    if (!st_last) return;
    __threadfence();
    const size_t MN = {{ "WSPLIT" if batch > 1 else "(size_t)M * N" }};   // K_G splits apart in W
{% if c_vec %}
    constexpr int RV = FV;        // N % FV == 0: a fragment is all in or all out
    typedef frag_t rv_t;
{% else %}
    constexpr int RV = 1;
    typedef T rv_t;
{% endif %}
    for (int e = tid * RV; e < BM * BN; e += THREADS * RV) {
        const int gm = m0 + e / BN, gn = n0 + e % BN;
        if (gm >= M || gn >= N) continue;
        const size_t o = (size_t)gm * N + gn;
        T s[RV];
#pragma unroll
        for (int v = 0; v < RV; ++v) s[v] = T(0);
#pragma unroll 8
        for (int z = 0; z < {{ KG }}; ++z) {
            const rv_t w = __ldcg(reinterpret_cast<const rv_t*>(W + z * MN + o));   // L2: other blocks wrote it
{% if c_vec %}
{% for v in range(FV) %}
            s[{{ v }}] += w{{ fcomp[v] }};
{% endfor %}
{% else %}
            s[0] += w;
{% endif %}
        }
#pragma unroll
        for (int v = 0; v < RV; ++v)
            C[o + v] = alpha * s[v] + (beta != T(0) ? beta * C[o + v] : T(0));
    }
