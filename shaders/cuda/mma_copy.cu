{# The cp.async copy of one stage, operands in their stored orientation:
   the issue(k0, s) lambda of gemm_mma.cu, gemm_dmma.cu and gemm_wgmma.cu. Needs tid, As,
   Bs, STAGE_A, STAGE_B, LOADS_A, LOADS_B, PA, PB, LDA_S, LDB_S, THREADS,
   KT, VEC, m0, n0, kend, M, N, K in scope. Where a stage's vectors do not
   divide evenly among the threads, the last copy of a thread past the stage
   is skipped. #}
    // Global -> shared stage s by cp.async. A thread's copies lie at fixed
    // offsets (oa, ob) from the stage's corner in A and B, computed once here,
    // so a stage wholly inside kend costs one address and one copy a vector:
    // every stage but a ragged last one. Rows and columns past M or N read the
    // last one in the matrix instead; they only feed rows and columns of C that
    // are never stored. Only the ragged stage checks k, zero-filling past kend.
    // Vectors never straddle an edge (the space requires VEC | the contiguous
    // extent, and the K_G grain is a multiple of VEC).
    {{ off_t }} oa[LOADS_A], ob[LOADS_B];
#pragma unroll
    for (int l = 0; l < LOADS_A; ++l) {
        const int idx = tid + l * THREADS, r = idx / PA, c = (idx % PA) * VEC;
{% if trans_a %}
        oa[l] = ({{ off_t }})r * M + min(c, M - VEC - m0);
{% else %}
        oa[l] = ({{ off_t }})min(r, M - 1 - m0) * K + c;
{% endif %}
        pin(oa[l]);
    }
#pragma unroll
    for (int l = 0; l < LOADS_B; ++l) {
        const int idx = tid + l * THREADS, r = idx / PB, c = (idx % PB) * VEC;
{% if trans_b %}
        ob[l] = ({{ off_t }})min(r, N - 1 - n0) * K + c;
{% else %}
        ob[l] = ({{ off_t }})r * N + min(c, N - VEC - n0);
{% endif %}
        pin(ob[l]);
    }
    // Shared offset of a thread's copy l: a per-thread part and, where the
    // threads cover whole stored rows, a constant l * (THREADS / P) rows.
    const int sa0 = tid / PA * LDA_S + tid % PA * VEC, sb0 = tid / PB * LDB_S + tid % PB * VEC;
    auto sa = [&](const int l) {
        const int idx = tid + l * THREADS;
        return THREADS % PA == 0 ? sa0 + l * (THREADS / PA) * LDA_S : idx / PA * LDA_S + idx % PA * VEC;
    };
    auto sb = [&](const int l) {
        const int idx = tid + l * THREADS;
        return THREADS % PB == 0 ? sb0 + l * (THREADS / PB) * LDB_S : idx / PB * LDB_S + idx % PB * VEC;
    };
    const unsigned as_base = static_cast<unsigned>(__cvta_generic_to_shared(As));
    const unsigned bs_base = static_cast<unsigned>(__cvta_generic_to_shared(Bs));
    auto issue = [&](const int k0, const int s) {
        const T* const ga = pinned(A + {{ "(size_t)k0 * M + m0" if trans_a else "(size_t)m0 * K + k0" }});
        const T* const gb = pinned(B + {{ "(size_t)n0 * K + k0" if trans_b else "(size_t)k0 * N + n0" }});
        if (k0 + KT <= kend) {
            const unsigned as = as_base + s * STAGE_A * (unsigned)sizeof(T), bs = bs_base + s * STAGE_B * (unsigned)sizeof(T);
#pragma unroll
            for (int l = 0; l < LOADS_A; ++l) {
                if ((BM * KT / VEC) % THREADS != 0 && tid + l * THREADS >= BM * KT / VEC) break;
                cp_async_to<{{ vbytes }}>(as + sa(l) * (unsigned)sizeof(T), ga + oa[l]);
            }
#pragma unroll
            for (int l = 0; l < LOADS_B; ++l) {
                if ((BN * KT / VEC) % THREADS != 0 && tid + l * THREADS >= BN * KT / VEC) break;
                cp_async_to<{{ vbytes }}>(bs + sb(l) * (unsigned)sizeof(T), gb + ob[l]);
            }
            return;
        }
        T* const as = As + s * STAGE_A;
        T* const bs = Bs + s * STAGE_B;
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l) {
            const int idx = tid + l * THREADS;
            if ((BM * KT / VEC) % THREADS != 0 && idx >= BM * KT / VEC) break;
            const bool ok = k0 + {{ "idx / PA" if trans_a else "idx % PA * VEC" }} < kend;
            cp_async<{{ vbytes }}>(as + sa(l), ok ? ga + oa[l] : A, ok);
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l) {
            const int idx = tid + l * THREADS;
            if ((BN * KT / VEC) % THREADS != 0 && idx >= BN * KT / VEC) break;
            const bool ok = k0 + {{ "idx % PB * VEC" if trans_b else "idx / PB" }} < kend;
            cp_async<{{ vbytes }}>(bs + sb(l), ok ? gb + ob[l] : B, ok);
        }
    };
