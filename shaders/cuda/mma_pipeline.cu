{# The cp.async main loop of gemm_mma.cu and gemm_dmma.cu: issue(k0, s)
   copies a stage (mma_copy.cu), compute(s) multiplies one (with
   copy_after_first_step set: compute(s, nx), which issues and commits stage
   nx's copies after its first k-step); needs kbeg, ntiles, KT in scope. #}
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
{% if copy_after_first_step is defined and copy_after_first_step %}
        // compute issues stage nx's copies (and commits them) after this stage's
        // first k-step of mma: every warp gets here right after the barrier, and
        // ~100 address and copy instructions issued first would leave the tensor
        // pipe idle meanwhile.
        compute(t % {{ ST }}, nx);
{% else %}
        if (nx < ntiles) issue(kbeg + nx * KT, nx % {{ ST }});
        cp_async_commit();
        compute(t % {{ ST }});
{% endif %}
    }
    cp_async_wait<0>();   // only empty groups are left
