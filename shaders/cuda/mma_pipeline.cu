{# The cp.async main loop of gemm_mma.cu and gemm_dmma.cu: issue(k0, s)
   copies a stage (mma_copy.cu), compute(s) multiplies one; needs kbeg,
   ntiles, KT in scope. #}
    // {{ ST }}-stage pipeline (stages t+1 .. t+{{ ST - 1 }} in flight while stage t is
    // computed). One barrier per stage: it publishes stage t and frees the
    // buffer of stage t-1, which the next copy overwrites.
#pragma unroll
    for (int s = 0; s < {{ ST - 1 }}; ++s) {
        if (s < ntiles) issue(kbeg + s * KT, s);
        cp_async_commit();
    }
    for (int t = 0; t < ntiles; ++t) {
        cp_async_wait<{{ ST - 2 }}>();
        __syncthreads();
        const int nx = t + {{ ST - 1 }};
        if (nx < ntiles) issue(kbeg + nx * KT, nx % {{ ST }});
        cp_async_commit();
        compute(t % {{ ST }});
    }
    cp_async_wait<0>();   // only empty groups are left
