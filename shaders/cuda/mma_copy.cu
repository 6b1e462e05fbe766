{# The cp.async copy of one stage, operands in their stored orientation:
   the issue(k0, s) lambda of gemm_mma.cu and gemm_wgmma.cu. Needs tid, As,
   Bs, STAGE_A, STAGE_B, LOADS_A, LOADS_B, PA, PB, LDA_S, LDB_S, THREADS,
   m0, n0, kend, M, N, K in scope. Where a stage's vectors do not divide
   evenly among the threads, the last copy of a thread past the stage is skipped. #}
    // Global -> shared stage s by cp.async. Vectors never straddle an edge
    // (the space requires VEC | the contiguous extent, and the K_G grain is a
    // multiple of VEC); what lies outside the matrix is zero-filled.
    auto issue = [&](const int k0, const int s) {
        T* const as = As + s * STAGE_A;
        T* const bs = Bs + s * STAGE_B;
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l) {
            const int idx = tid + l * THREADS;
            if ((BM * KT / VEC) % THREADS != 0 && idx >= BM * KT / VEC) break;
            const int r = idx / PA, c = (idx % PA) * VEC;
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
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l) {
            const int idx = tid + l * THREADS;
            if ((BN * KT / VEC) % THREADS != 0 && idx >= BN * KT / VEC) break;
            const int r = idx / PB, c = (idx % PB) * VEC;
{% if trans_b %}
            const int gn = n0 + r, gk = k0 + c;
            const bool ok = gn < N && gk < kend;
            cp_async<{{ vbytes }}>(bs + r * LDB_S + c, ok ? B + (size_t)gn * K + gk : B, ok);
{% else %}
            const int gk = k0 + r, gn = n0 + c;
            const bool ok = gk < kend && gn < N;
            cp_async<{{ vbytes }}>(bs + r * LDB_S + c, ok ? B + (size_t)gk * N + gn : B, ok);
{% endif %}
        }
    };
