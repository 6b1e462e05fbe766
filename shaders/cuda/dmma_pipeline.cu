{# gemm_dmma.cu's main loop with fragments in flight across the stage boundary
   (FP = 1; CUTLASS's multistage mainloop): after mma_copy.cu (oa, ob, sa, sb,
   as_base, bs_base), before the epilogue. Needs KS = BK / MMA_K even (a
   fragment buffer's index is then a constant in the unrolled loop) and warps
   of at least dmma.PIPE_MIN_FRAGMENTS fragments (dmma.pipelined: ptxas orders
   the mma across the back edge by stall counts alone). #}
    // Registers hold two k steps of fragments: step g's mma run on buffer g % 2
    // while step g + 1's are read from shared memory into the other. The step
    // after a stage's last is the next stage's first, so the barrier that
    // publishes stage t + 1 comes before the last step of stage t, and that
    // step's mma cover the shared-memory latency of the next stage's first
    // reads (ptxas fills each DMMA's fixed issue shadow with them).
    //
    // The k remainder is stage 0's (CUTLASS's residue first): every later
    // stage is whole, so its copies need no k check, only the predicate that
    // the stage exists, and the loop body has no branch that would split
    // the mma from the copies and reads ptxas interleaves with them.
    static_assert((BK / MMA_K) % 2 == 0, "an even number of k steps a stage");
    constexpr int KS = BK / MMA_K;
    double fa[2][MI][2 * KV], fb[2][NI][KV];
    auto load = [&](const int buf, const int s, const int kk) {
        const T* const as = As + s * STAGE_A;
        const T* const bs = Bs + s * STAGE_B;
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int q = 0; q < 2 * KV; ++q) {   // rows gid, gid + 8; k tig + 4 (q / 2)
                const int m = wm0 + i * 16 + gid + (q & 1) * 8, k = kk + tig + (q >> 1) * 4;
                fa[buf][i][q] = as[{{ "k * LDA_S + m" if trans_a else "m * LDA_S + k" }}];
            }
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int q = 0; q < KV; ++q) {       // k tig + 4 q; column gid
                const int n = wn0 + j * 8 + gid, k = kk + tig + q * 4;
                fb[buf][j][q] = bs[{{ "n * LDB_S + k" if trans_b else "k * LDB_S + n" }}];
            }
    };
    // Stage 0: k in [kbeg, kbeg + kres), zero-filled past it.
    const int kres = kend - kbeg - (ntiles - 1) * KT;
    auto copy_first = [&]() {
        const T* const ga = A + {{ "(size_t)kbeg * M + m0" if trans_a else "(size_t)m0 * K + kbeg" }};
        const T* const gb = B + {{ "(size_t)n0 * K + kbeg" if trans_b else "(size_t)kbeg * N + n0" }};
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l) {
            const int idx = tid + l * THREADS;
            if ((BM * KT / VEC) % THREADS != 0 && idx >= BM * KT / VEC) break;
            const bool ok = {{ "idx / PA" if trans_a else "idx % PA * VEC" }} < kres;
            cp_async<{{ vbytes }}>(As + sa(l), ok ? ga + oa[l] : A, ok);
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l) {
            const int idx = tid + l * THREADS;
            if ((BN * KT / VEC) % THREADS != 0 && idx >= BN * KT / VEC) break;
            const bool ok = {{ "idx % PB * VEC" if trans_b else "idx / PB" }} < kres;
            cp_async<{{ vbytes }}>(Bs + sb(l), ok ? gb + ob[l] : B, ok);
        }
    };
    // Stage t >= 1 (k from kbeg + kres + (t - 1) KT, whole) into buffer s;
    // nothing where the stage does not exist (t >= ntiles).
    auto copy_whole = [&](const int t, const int s) {
        const bool live = t < ntiles;
        const int k0 = kbeg + kres + (t - 1) * KT;
        const T* const ga = pinned(A + {{ "(size_t)k0 * M + m0" if trans_a else "(size_t)m0 * K + k0" }});
        const T* const gb = pinned(B + {{ "(size_t)n0 * K + k0" if trans_b else "(size_t)k0 * N + n0" }});
        const unsigned as = as_base + s * STAGE_A * (unsigned)sizeof(T), bs = bs_base + s * STAGE_B * (unsigned)sizeof(T);
#pragma unroll
        for (int l = 0; l < LOADS_A; ++l) {
            if ((BM * KT / VEC) % THREADS != 0 && tid + l * THREADS >= BM * KT / VEC) break;
            cp_async_if<{{ vbytes }}>(as + sa(l) * (unsigned)sizeof(T), ga + oa[l], live);
        }
#pragma unroll
        for (int l = 0; l < LOADS_B; ++l) {
            if ((BN * KT / VEC) % THREADS != 0 && tid + l * THREADS >= BN * KT / VEC) break;
            cp_async_if<{{ vbytes }}>(bs + sb(l) * (unsigned)sizeof(T), gb + ob[l], live);
        }
    };

    if (ntiles > 0) copy_first();
    cp_async_commit();
#pragma unroll
    for (int t = 1; t < {{ ST - 1 }}; ++t) {
        copy_whole(t, t);
        cp_async_commit();
    }
    cp_async_wait<{{ ST - 2 }}>();
    __syncthreads();
    load(0, 0, 0);
    for (int t = 0; t < ntiles; ++t) {
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
            const int buf = kk % 2;
            if (kk == KS - 1) {
                // Stage t + 1 in for every thread (ST - 2 later ones may be in
                // flight), and every read of stage t done before its buffer is
                // overwritten at the next stage's first step.
                cp_async_wait<{{ ST - 2 }}>();
                __syncthreads();
                load(buf ^ 1, (t + 1) % {{ ST }}, 0);
            } else {
                load(buf ^ 1, t % {{ ST }}, (kk + 1) * MMA_K);
            }
            if (kk == 0) {
                // Stage t - 1's buffer: its last reads came before the
                // barrier of stage t - 1's last step.
                copy_whole(t + {{ ST - 1 }}, (t + {{ ST - 1 }}) % {{ ST }});
                cp_async_commit();
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_f64(acc[i][j], fa[buf][i], fb[buf][j]);
        }
    }
    cp_async_wait<0>();   // only empty groups are left
